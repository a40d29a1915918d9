//! Why a pending run waits: its `Scheduled` condition.
//!
//! Each dispatch pass (`reconcile::timeout`) places every listed pending
//! run against the hosts it loaded once ([`Fleet`]): how many hosts could
//! take it now, and for the others the one reason each cannot — counted
//! in the message, `Unschedulable: 0/5 hosts can run it: 2 lack provider
//! claude, 2 at capacity, 1 cordoned`. The condition is written only when
//! its reason or message changes ([`set_scheduled`]), so a run that waits
//! for the same reason pass after pass is not written again. The reasons
//! are the vocabulary's (`pam_manifests::conditions::SCHEDULED_*`); the
//! waits derived when a run is read (dependencies, a missing Secret, the
//! project's budget) are put in the same condition by [`derived`].

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use pam_manifests::conditions as c;
use pam_manifests::state::HostStatus;
use pam_store::dispatch::host_has_provider;
use pam_store::prelude::*;
use pam_store::{Host, Labels, Meta, PendingRun, Run, StoreResult, Target};
use uuid::Uuid;

use super::super::meta;

pub use pam_manifests::conditions::SCHEDULED;

/// Why one host cannot take a run now, in the order the message lists
/// them (a host counts once, under the first reason [`Fleet::place`]
/// finds, checked from the host's state to the run's needs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Why {
    LacksProvider,
    LacksVersion,
    NoFullPermissions,
    LowDisk,
    AtCapacity,
    Cordoned,
    Suspect,
    Offline,
    TargetMismatch,
}

/// The hosts as one pass sees them: each host's label set built once and
/// its live-run count from one statement, so placing a run costs no query.
pub struct Fleet<'a> {
    hosts: Vec<FleetHost<'a>>,
    /// Whether the live-run counts were given ([`Fleet::new`]).
    counted: bool,
    /// A placement reached a host's capacity check without the counts:
    /// the pass counts and places again ([`Fleet::needs_counts`]).
    needs_counts: std::cell::Cell<bool>,
}

/// A run's shape: what placing it depends on (target, provider,
/// requirement, whether it uses a workspace, whether it asks for full
/// permissions). Pending runs mostly share a few, so a pass keeps its
/// placements by shape ([`Fleet::place`]) and scans the hosts once per
/// shape, not per run.
pub type Shape<'r> = (&'r Target, &'r str, Option<&'r str>, bool, bool);

struct FleetHost<'a> {
    host: &'a Host,
    labels: Labels,
    live: i64,
    /// Whether this pamd may count the host's `online` as observed (the
    /// timeout's rule before a full offline window, OQ-15).
    observed: bool,
}

/// Where a run stands against the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// Hosts that could claim it now.
    pub able: usize,
    /// An eligible, observed host matches its target and has its provider
    /// (OQ-15's `eligible_host_seen`: `no_eligible_host` vs
    /// `dispatch_timeout`), whatever its capacity.
    pub eligible_match: bool,
    /// `Unschedulable` or `WaitingForClaim`.
    pub reason: &'static str,
    /// `0/2 hosts can run it: 1 lacks provider claude, 1 cordoned`.
    pub message: String,
}

impl<'a> Fleet<'a> {
    /// `live`: [`pam_store::HostTx::count_live_runs_per_host`], `None`
    /// until a placement needs it (then [`Fleet::needs_counts`]): a fleet
    /// where no host gets as far as its capacity for any run is placed
    /// without that query. `observed`: whether a host's `online` counts
    /// as seen by this pamd.
    pub fn new(
        hosts: &'a [Host],
        live: Option<&[(Uuid, i64)]>,
        observed: impl Fn(&Host) -> bool,
    ) -> Self {
        let counted = live.is_some();
        let live: HashMap<Uuid, i64> = live.unwrap_or_default().iter().copied().collect();
        Fleet {
            hosts: hosts
                .iter()
                .map(|h| FleetHost {
                    host: h,
                    labels: h.labels(),
                    live: live.get(&h.id).copied().unwrap_or(0),
                    observed: observed(h),
                })
                .collect(),
            counted,
            needs_counts: std::cell::Cell::new(false),
        }
    }

    /// Some placement needed the live-run counts this fleet was built
    /// without: build it again with them and place again.
    pub fn needs_counts(&self) -> bool {
        self.needs_counts.get()
    }

    /// Places `run` (pending) against every host, or finds the placement
    /// of its shape in `shapes` (this pass's).
    pub fn place<'c, 'r>(
        &self,
        run: &'r PendingRun,
        shapes: &'c mut HashMap<Shape<'r>, Placement>,
    ) -> &'c Placement {
        let req = run.provider_version.as_deref();
        shapes
            .entry((
                &run.target,
                run.provider.as_str(),
                req,
                run.uses_workspace,
                run.asks_full,
            ))
            .or_insert_with(|| self.scan(run, req))
    }

    /// [`Fleet::place`] without the shapes: every host, once.
    fn scan(&self, run: &PendingRun, req: Option<&str>) -> Placement {
        let mut counts: HashMap<Why, usize> = HashMap::new();
        let (mut able, mut eligible_match) = (0, false);
        for fh in &self.hosts {
            let h = fh.host;
            let why = if h.disabled || h.status == HostStatus::Disabled {
                Some(Why::Cordoned)
            } else if h.status != HostStatus::Online {
                Some(Why::Offline)
            } else if h.instance_suspect {
                Some(Why::Suspect)
            } else if !run.target.matches_labels(&h.name, &fh.labels) {
                Some(Why::TargetMismatch)
            } else if !host_has_provider(h, &run.provider, None) {
                Some(Why::LacksProvider)
            } else if !host_has_provider(h, &run.provider, req) {
                Some(Why::LacksVersion)
            } else if run.asks_full && !pam_store::dispatch::allows_full(h) {
                Some(Why::NoFullPermissions)
            } else if run.uses_workspace && pam_store::dispatch::workspace_low(h) {
                // Eligible (OQ-15: it waits, as at capacity, for the
                // disk to free up), but not now.
                eligible_match |= fh.observed;
                Some(Why::LowDisk)
            } else {
                eligible_match |= fh.observed;
                if !self.counted {
                    self.needs_counts.set(true);
                }
                (fh.live >= i64::from(h.capacity)).then_some(Why::AtCapacity)
            };
            match why {
                Some(w) => *counts.entry(w).or_default() += 1,
                None => able += 1,
            }
        }
        let mut parts: Vec<(Why, usize)> = counts.into_iter().collect();
        parts.sort();
        let said: Vec<String> = parts.iter().map(|&(w, n)| phrase(w, n, run, req)).collect();
        let mut message = format!("{able}/{} hosts can run it", self.hosts.len());
        if self.hosts.is_empty() {
            message.push_str(": no host has registered");
        } else if !said.is_empty() {
            message.push_str(": ");
            message.push_str(&said.join(", "));
        }
        Placement {
            able,
            eligible_match,
            reason: if able == 0 {
                c::SCHEDULED_UNSCHEDULABLE
            } else {
                c::SCHEDULED_WAITING_FOR_CLAIM
            },
            message,
        }
    }
}

/// `2 lack provider claude`, `1 lacks provider claude`, `1 cordoned`.
fn phrase(w: Why, n: usize, run: &PendingRun, req: Option<&str>) -> String {
    let lack = if n == 1 { "lacks" } else { "lack" };
    match w {
        Why::LacksProvider => format!("{n} {lack} provider {}", run.provider),
        Why::LacksVersion => format!(
            "{n} {lack} provider {} {}",
            run.provider,
            req.unwrap_or_default()
        ),
        Why::NoFullPermissions => {
            let take = if n == 1 { "takes" } else { "take" };
            format!("{n} {take} no permissions: full (unconfined host; worker.toml [agents] allow_unconfined_full)")
        }
        Why::LowDisk => format!("{n} low on workspace disk"),
        Why::AtCapacity => format!("{n} at capacity"),
        Why::Cordoned => format!("{n} cordoned"),
        Why::Suspect => format!("{n} instance-suspect"),
        Why::Offline => format!("{n} offline"),
        Why::TargetMismatch => match &run.target {
            Target::Host(name) => format!("{n} not host {name}"),
            _ => format!("{n} selector mismatch"),
        },
    }
}

pub use pam_store::runs::scheduled_of;

/// Sets a pending run's `Scheduled=False` condition to (reason, message)
/// — only when either differs from what it carries, so a pass that finds
/// the same reason writes nothing (no new resourceVersion, no event: the
/// condition is status, not a transition). Returns the run written, or
/// `None` when nothing changed.
pub async fn set_scheduled(
    tx: &mut dyn Tx,
    run: &Run,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) -> StoreResult<Option<Run>> {
    if !changes(scheduled_of(&run.meta).as_ref(), reason, message) {
        return Ok(None);
    }
    let mut r = run.clone();
    let rv = r.meta.resource_version;
    meta::set_condition(&mut r.meta, SCHEDULED, false, reason, message, now);
    tx.update_run_spec(&r, rv).await.map(Some)
}

/// Whether setting (reason, message) changes a run's `Scheduled`
/// condition, given what it carries ([`scheduled_of`],
/// [`PendingRun::scheduled`]).
pub fn changes(current: Option<&(String, String)>, reason: &str, message: &str) -> bool {
    !current.is_some_and(|(r, m)| r == reason && m == message)
}

/// A pending run read with one of the waits derived when read (task
/// dependencies, a missing Secret, its project's budget): its `Scheduled`
/// condition says that wait, over what the last pass stored (the pass does
/// not look at such runs' hosts).
pub fn derived(m: &mut Meta, reason: &str, message: &str, since: DateTime<Utc>) {
    meta::set_condition(m, SCHEDULED, false, reason, message, since);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pam_manifests::protocol::{Capabilities, ProviderCapability};

    fn host(name: &str, providers: &[&str]) -> Host {
        Host {
            id: Uuid::new_v4(),
            name: name.into(),
            platform: pam_manifests::state::Platform::Linux,
            token_fingerprint: None,
            status: HostStatus::Online,
            instance_id: None,
            instance_suspect: false,
            instance_flagged_at: None,
            presented_instance_id: None,
            last_seen_at: None,
            capacity: 1,
            dispatch_labels: Labels::new(),
            worker_labels: Labels::new(),
            capabilities: Some(Capabilities {
                providers: providers
                    .iter()
                    .map(|p| ProviderCapability {
                        name: p.to_string(),
                        version: Some("1.0.0".into()),
                    })
                    .collect(),
                workspace_free_bytes: None,
                workspace_min_free_bytes: None,
                ..Capabilities::default()
            }),
            disabled: false,
            meta: Meta::default(),
            created_at: Utc::now(),
            updated_at: Utc::now(),
        }
    }

    fn run(provider: &str, target: Target) -> Run {
        let now = Utc::now();
        Run {
            provider: provider.into(),
            cwd: "/tmp".into(),
            session_name: "pam-00000000".into(),
            dispatchable_since: Some(now),
            target,
            ..Run::first_attempt(Uuid::new_v4(), (Uuid::nil(), Uuid::nil()), "r", now)
        }
    }

    #[test]
    fn the_message_counts_each_host_once_by_its_first_reason() {
        let mut cordoned = host("a", &["claude"]);
        cordoned.disabled = true;
        let mut offline = host("b", &["claude"]);
        offline.status = HostStatus::Offline;
        let full = host("c", &["claude"]);
        let hosts = vec![
            cordoned,
            offline,
            full.clone(),
            host("d", &["exec"]),
            host("e", &["exec"]),
        ];
        let uncounted = Fleet::new(&hosts, None, |_| true);
        let any_exec = PendingRun::of(&run("exec", Target::Any), None);
        uncounted.place(&any_exec, &mut HashMap::new());
        assert!(uncounted.needs_counts(), "exec reaches d's capacity check");
        let fleet = Fleet::new(&hosts, Some(&[(full.id, 1)]), |_| true);
        let (claude, exec) = (
            PendingRun::of(&run("claude", Target::Any), None),
            PendingRun::of(&run("exec", Target::Host("d".into())), None),
        );
        let mut shapes = HashMap::new();
        let p = fleet.place(&claude, &mut shapes).clone();
        assert_eq!(p.reason, "Unschedulable");
        assert_eq!(
            p.message,
            "0/5 hosts can run it: 2 lack provider claude, 1 at capacity, 1 cordoned, 1 offline"
        );
        assert!(p.eligible_match, "the full host has claude");
        let p = fleet.place(&exec, &mut shapes);
        assert_eq!(p.reason, "WaitingForClaim");
        assert_eq!(
            p.message,
            "1/5 hosts can run it: 1 cordoned, 1 offline, 2 not host d"
        );
    }

    /// A host below its worker's `min_free_bytes` is counted
    /// "low on workspace disk" for a run with a workspace (eligible, so
    /// the run times out as `dispatch_timeout`, not `no_eligible_host`),
    /// and can still run the others.
    #[test]
    fn a_low_disk_host_takes_no_workspace_run() {
        let mut low = host("low", &["exec"]);
        if let Some(c) = low.capabilities.as_mut() {
            c.workspace_free_bytes = Some(10);
            c.workspace_min_free_bytes = Some(100);
        }
        let hosts = vec![low, host("cordoned", &["exec"])];
        let mut hosts = hosts;
        hosts[1].disabled = true;
        let fleet = Fleet::new(&hosts, Some(&[]), |_| true);
        let mut with_ws = PendingRun::of(&run("exec", Target::Any), None);
        with_ws.uses_workspace = true;
        let without = PendingRun::of(&run("exec", Target::Any), None);
        let mut shapes = HashMap::new();
        let p = fleet.place(&with_ws, &mut shapes).clone();
        assert_eq!(p.reason, "Unschedulable");
        assert_eq!(
            p.message,
            "0/2 hosts can run it: 1 low on workspace disk, 1 cordoned"
        );
        assert!(p.eligible_match);
        let p = fleet.place(&without, &mut shapes);
        assert_eq!(p.reason, "WaitingForClaim", "{}", p.message);
    }
}
