//! Host rules: the registry (declared hosts and worker registrations),
//! disable/enable, liveness, and instance identity.
//!
//! # Instance identity (OQ-14)
//! One worker token cloned onto two machines must not alias one host row
//! unnoticed.
//!
//! - The first instance-aware registration pins `hosts.instance_id`.
//! - A different instance_id while the pinned instance was seen within the
//!   offline threshold reads as a concurrent clone: `instance_suspect =
//!   true`, `instance_flagged_at = now`, `worker.instance_suspect` journaled
//!   once on the false → true edge (not on every heartbeat). The host gets
//!   no new runs; its running runs are left alone.
//! - A different instance_id after the pinned one went quiet past the
//!   threshold reads as a reinstall: `instance_id` is updated silently and
//!   `worker.instance_reinstalled` (info) is journaled.
//! - `pamctl host clear-suspect` clears the flag and pins the newest
//!   presenter ([`clear_suspect`]).
//!
//! Only the pinned instance refreshes `last_seen_at`, so a clone cannot
//! keep the pinned instance looking alive (and "the pinned instance's last
//! last_seen_at" keeps its meaning).

use chrono::{DateTime, Utc};
use pam_manifests::kinds;
use pam_manifests::protocol::RegisterRequest;
use pam_manifests::state::{FailureReason, HostStatus, Platform};
use pam_store::prelude::*;
use pam_store::{Host, Labels, StoreError, StoreResult};
use serde_json::json;
use uuid::Uuid;

use super::meta::{self, Change, Desired};
use super::runs;
use crate::events::{payload, topic};

/// What a presentation (registration or heartbeat) was judged to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// The pinned instance (or a worker that sends no instance id).
    Pinned,
    /// First instance-aware registration: now pinned.
    FirstPin,
    /// A clone while the pinned instance looked alive: flagged now.
    Flagged,
    /// A clone presenting while the host is already suspect (debounced).
    StillSuspect,
    /// The pinned instance had gone quiet: the new one is pinned.
    Reinstalled,
}

/// Applies OQ-14 to a presentation of `instance_id` by the worker of
/// `host`, updates `last_seen_at`, and brings a registered/offline host
/// online (journaling `worker.registered`). Returns the stored host.
pub async fn present(
    tx: &mut dyn Tx,
    host: Host,
    instance_id: Option<Uuid>,
    offline_after: std::time::Duration,
    now: DateTime<Utc>,
) -> StoreResult<(Host, Presence)> {
    let mut out = present_many(tx, vec![(host, instance_id)], offline_after, now).await?;
    Ok(out.pop().expect("one host in, one out"))
}

/// [`present`] for many hosts at once (the heartbeat batch), in
/// the order given; the hosts must be distinct. A presentation that
/// changes nothing but `last_seen_at` (the pinned instance of a host
/// already online — nearly every heartbeat) is written with the others
/// like it in one statement ([`Tx::touch_hosts`]); the rest are written
/// one by one, with their events. Conflict when any host is no longer at
/// the version read.
pub async fn present_many(
    tx: &mut dyn Tx,
    hosts: Vec<(Host, Option<Uuid>)>,
    offline_after: std::time::Duration,
    now: DateTime<Utc>,
) -> StoreResult<Vec<(Host, Presence)>> {
    let window = chrono::Duration::from_std(offline_after).expect("threshold in range");
    let judged: Vec<_> = hosts
        .into_iter()
        .map(|(host, instance_id)| {
            let rv = host.meta.resource_version;
            let (host, presence) = judge(host, instance_id, window, now);
            (host, presence, instance_id, rv)
        })
        .collect();
    let plain: Vec<(Uuid, i64)> = judged
        .iter()
        .filter(|(h, p, ..)| only_seen(h, *p))
        .map(|(h, _, _, rv)| (h.id, *rv))
        .collect();
    let touched: std::collections::HashSet<Uuid> = if plain.is_empty() {
        Default::default()
    } else {
        tx.touch_hosts(&plain, now).await?.into_iter().collect()
    };
    let mut out = Vec::with_capacity(judged.len());
    for (mut host, presence, instance_id, rv) in judged {
        if only_seen(&host, presence) {
            if !touched.contains(&host.id) {
                return Err(StoreError::Conflict(format!(
                    "host {} is not at resource version {rv}",
                    host.id
                )));
            }
            // What update_host would have returned: nothing else changed.
            host.meta.resource_version = rv + 1;
            out.push((host, presence));
        } else {
            let host = write_presence(tx, host, presence, instance_id, rv, now).await?;
            out.push((host, presence));
        }
    }
    Ok(out)
}

/// OQ-14's judgement of a presentation (no store access): the host as it
/// is to be written, and what the presentation was.
fn judge(
    mut host: Host,
    instance_id: Option<Uuid>,
    window: chrono::Duration,
    now: DateTime<Utc>,
) -> (Host, Presence) {
    let presence = match (host.instance_id, instance_id) {
        (_, None) => Presence::Pinned,
        (None, Some(new)) => {
            host.instance_id = Some(new);
            Presence::FirstPin
        }
        (Some(pinned), Some(new)) if pinned == new => Presence::Pinned,
        (Some(_), Some(new)) => {
            let recently_seen = host.last_seen_at.is_some_and(|seen| now - seen <= window);
            if host.instance_suspect {
                host.presented_instance_id = Some(new);
                Presence::StillSuspect
            } else if recently_seen {
                host.instance_suspect = true;
                host.instance_flagged_at = Some(now);
                host.presented_instance_id = Some(new);
                Presence::Flagged
            } else {
                host.instance_id = Some(new);
                Presence::Reinstalled
            }
        }
    };
    if pinned_speaking(presence) {
        host.last_seen_at = Some(now);
    }
    (host, presence)
}

fn pinned_speaking(p: Presence) -> bool {
    matches!(
        p,
        Presence::Pinned | Presence::FirstPin | Presence::Reinstalled
    )
}

/// The presentation changes `last_seen_at` and nothing else: no instance
/// field, no status edge, no event.
fn only_seen(host: &Host, p: Presence) -> bool {
    p == Presence::Pinned && !matches!(host.status, HostStatus::Registered | HostStatus::Offline)
}

/// Writes a judged presentation that changes more than `last_seen_at`,
/// with its events and its status edge.
async fn write_presence(
    tx: &mut dyn Tx,
    host: Host,
    presence: Presence,
    instance_id: Option<Uuid>,
    rv: i64,
    now: DateTime<Utc>,
) -> StoreResult<Host> {
    let mut host = tx.update(&host, rv).await?;
    match presence {
        Presence::Flagged => {
            tracing::warn!(host = %host.name, "worker.instance_suspect: a second instance presents this host's token");
            tx.append_event(
                topic::WORKER_INSTANCE_SUSPECT,
                payload::host(
                    &host,
                    json!({
                        "pinned_instance_id": host.instance_id,
                        "presented_instance_id": instance_id,
                    }),
                ),
                now,
            )
            .await?;
        }
        Presence::Reinstalled => {
            tx.append_event(
                topic::WORKER_INSTANCE_REINSTALLED,
                payload::host(&host, json!({ "instance_id": instance_id })),
                now,
            )
            .await?;
        }
        _ => {}
    }
    if pinned_speaking(presence)
        && matches!(host.status, HostStatus::Registered | HostStatus::Offline)
    {
        let from = host.status;
        host = tx
            .set_host_status(host.id, from, HostStatus::Online, now)
            .await?;
        tx.append_event(
            topic::WORKER_REGISTERED,
            payload::host(
                &host,
                json!({ "instance_id": host.instance_id, "from": from.as_str() }),
            ),
            now,
        )
        .await?;
    }
    Ok(host)
}

/// `pamctl host clear-suspect`: clears the flag and pins the newest
/// presenter. Refuses a host that is not suspect.
pub async fn clear_suspect(
    tx: &mut dyn Tx,
    mut host: Host,
    now: DateTime<Utc>,
) -> StoreResult<Host> {
    if !host.instance_suspect {
        return Err(StoreError::Invalid(format!(
            "host {:?} is not instance-suspect",
            host.name
        )));
    }
    let rv = host.meta.resource_version;
    host.instance_suspect = false;
    host.instance_flagged_at = None;
    if let Some(newest) = host.presented_instance_id.take() {
        host.instance_id = Some(newest);
    }
    // The newest presenter is now the pinned one; count it as seen.
    host.last_seen_at = Some(now);
    tx.update(&host, rv).await
}

/// A host may receive new runs: the dispatch predicate's host part
/// ([`pam_store::dispatch::host_eligible`], its one home).
pub use pam_store::dispatch::host_eligible as eligible;

/// Whether a Host manifest declares this host (its spec then wins over
/// what the worker reports); a host made by a worker's registration has
/// no declared platform.
pub fn declared(h: &Host) -> bool {
    h.meta.spec.get("platform").is_some()
}

/// A host as declared by a Host manifest.
#[derive(Debug, Clone)]
pub struct HostDesired {
    pub name: String,
    pub platform: Platform,
    pub disabled: bool,
    pub capacity: i32,
    pub dispatch_labels: Labels,
    pub desired: Desired,
}

impl HostDesired {
    pub fn of(h: &kinds::Host, desired: Desired) -> HostDesired {
        HostDesired {
            name: h.metadata.name.to_string(),
            platform: h.spec.platform,
            disabled: h.spec.disabled,
            capacity: i32::try_from(h.spec.capacity).unwrap_or(i32::MAX),
            dispatch_labels: meta::store_labels(&h.spec.labels),
            desired,
        }
    }
}

/// Creates a declared host: `registered` until its worker registers, or
/// `disabled`.
pub async fn create(tx: &mut dyn Tx, d: HostDesired, now: DateTime<Utc>) -> StoreResult<Host> {
    let mut h = Host::new(d.name, d.platform, now);
    h.capacity = d.capacity;
    h.dispatch_labels = d.dispatch_labels;
    h.disabled = d.disabled;
    if d.disabled {
        h.status = HostStatus::Disabled;
    }
    h.meta = meta::new_meta(d.desired, now);
    tx.insert(&h).await?;
    Ok(h)
}

/// Updates a host to its declared state (platform, capacity, labels,
/// disabled); the status follows `disabled` through the gate
/// ([`set_status_for_disabled`]). The same desired state writes nothing.
pub async fn update(
    tx: &mut dyn Tx,
    mut row: Host,
    d: HostDesired,
    offline_after: std::time::Duration,
    now: DateTime<Utc>,
) -> StoreResult<(Host, Change)> {
    let rv = row.meta.resource_version;
    let change = meta::set_desired(&mut row.meta, d.desired, now);
    if !change.changed() {
        return Ok((row, change));
    }
    row.platform = d.platform;
    row.capacity = d.capacity;
    row.dispatch_labels = d.dispatch_labels;
    row.disabled = d.disabled;
    let row = tx.update(&row, rv).await?;
    let row = set_status_for_disabled(tx, row, offline_after, now).await?;
    Ok((row, change))
}

/// `pamctl host disable|enable` (and the dashboard): records
/// `spec.disabled` (a spec change, so a new generation) and moves the
/// status through the gate. Asking for the state the host is in changes
/// nothing.
pub async fn set_disabled(
    tx: &mut dyn Tx,
    mut h: Host,
    disabled: bool,
    offline_after: std::time::Duration,
    now: DateTime<Utc>,
) -> StoreResult<Host> {
    let rv = h.meta.resource_version;
    let d = Desired::stored(&h.meta).with_spec_field("disabled", json!(disabled));
    let spec_changed = meta::set_desired(&mut h.meta, d, now).changed();
    if spec_changed || h.disabled != disabled {
        h.disabled = disabled;
        h = tx.update(&h, rv).await?;
    }
    set_status_for_disabled(tx, h, offline_after, now).await
}

/// Moves the status to follow `disabled`: a disabled host is `disabled`;
/// enabling returns it to online, offline or registered by what its
/// heartbeat says.
async fn set_status_for_disabled(
    tx: &mut dyn Tx,
    h: Host,
    offline_after: std::time::Duration,
    now: DateTime<Utc>,
) -> StoreResult<Host> {
    let window = chrono::Duration::from_std(offline_after).expect("threshold in range");
    let to = if h.disabled {
        HostStatus::Disabled
    } else if h.status != HostStatus::Disabled {
        return Ok(h);
    } else {
        match h.last_seen_at {
            None => HostStatus::Registered,
            Some(seen) if now - seen <= window => HostStatus::Online,
            Some(_) => HostStatus::Offline,
        }
    };
    if h.status == to {
        return Ok(h);
    }
    tx.set_host_status(h.id, h.status, to, now).await
}

/// A worker registration for the host its token is bound to: creates the
/// host on first registration, takes the reported platform and capacity
/// unless a Host manifest declares them, records the reported labels in
/// the worker's namespace ([`worker_labels`]; declared or not, as they
/// never mix with an operator's) and its capabilities (the
/// worker registers again when they change), then applies OQ-14 and
/// brings the host online ([`present`]).
pub async fn register(
    tx: &mut dyn Tx,
    req: &RegisterRequest,
    offline_after: std::time::Duration,
    now: DateTime<Utc>,
) -> StoreResult<Host> {
    let capacity = i32::try_from(req.capacity).unwrap_or(i32::MAX);
    let reported = worker_labels(&req.labels)?;
    let host = match tx.by_name::<Host>((), &req.name).await? {
        Some(mut h) => {
            let rv = h.meta.resource_version;
            let mut changed = h.worker_labels != reported;
            h.worker_labels = reported;
            // A report replaces the last; an older worker sends
            // none, and what was known stays.
            if req.capabilities.is_some() && h.capabilities != req.capabilities {
                h.capabilities = req.capabilities.clone();
                changed = true;
            }
            if !declared(&h) {
                changed |= h.platform != req.platform || h.capacity != capacity;
                h.platform = req.platform;
                h.capacity = capacity;
            }
            if changed {
                h = tx.update(&h, rv).await?;
            }
            h
        }
        None => {
            let mut h = Host::new(req.name.clone(), req.platform, now);
            h.capacity = capacity;
            h.worker_labels = reported;
            h.capabilities = req.capabilities.clone();
            tx.insert(&h).await?;
            h
        }
    };
    let (host, _) = present(tx, host, Some(req.instance_id), offline_after, now).await?;
    Ok(host)
}

/// A worker's reported labels as stored: each key under `worker.pam.dev/`,
/// so a worker cannot give itself a label an operator's
/// selector matches. A key with another prefix is refused (the API says
/// so with a 422 before this runs).
pub fn worker_labels(reported: &std::collections::BTreeMap<String, String>) -> StoreResult<Labels> {
    reported
        .iter()
        .map(|(k, v)| {
            let key = pam_manifests::LabelKey::worker_reported(k)
                .map_err(|e| StoreError::Invalid(format!("labels: {e}")))?;
            Ok((key.as_str().to_string(), v.clone()))
        })
        .collect()
}

/// Host liveness: an online host silent past the offline threshold goes
/// offline (`worker.offline`), and its spawning and running runs fail
/// `host_lost` — which the restart policy may requeue onto another host
/// (OQ-12). Returns the host and how many runs were lost; `None` when the
/// host was no longer online (another writer moved it first).
pub async fn go_offline(
    tx: &mut dyn Tx,
    host: &Host,
    now: DateTime<Utc>,
) -> StoreResult<Option<(Host, usize)>> {
    let h = match tx
        .set_host_status(host.id, HostStatus::Online, HostStatus::Offline, now)
        .await
    {
        Ok(h) => h,
        Err(StoreError::Conflict(_)) => return Ok(None),
        Err(e) => return Err(e),
    };
    tx.append_event(
        topic::WORKER_OFFLINE,
        payload::host(&h, json!({ "last_seen_at": h.last_seen_at })),
        now,
    )
    .await?;
    let live = super::runs::live(tx, Some(h.id)).await?;
    // Said in the run's status and its `run.failed`: which host,
    // and when it was last heard from.
    let why = match h.last_seen_at {
        Some(at) => format!(
            "host {} stopped heartbeating at {}",
            h.name,
            at.format("%H:%M:%SZ")
        ),
        None => format!("host {} went offline", h.name),
    };
    let mut lost = 0;
    for run in live {
        match runs::fail(
            tx,
            &run,
            Some(FailureReason::HostLost),
            Some(&why),
            None,
            true,
            now,
        )
        .await
        {
            Ok(_) => lost += 1,
            Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(Some((h, lost)))
}

/// The runs that name this host (finished ones too), as (id, name), in
/// the order runs are listed: what holds it (prune keeps it, delete
/// refuses).
pub async fn runs_naming(tx: &mut dyn Tx, h: &Host) -> StoreResult<Vec<(Uuid, String)>> {
    let filter = pam_store::RunFilter {
        host_id: Some(h.id),
        ..Default::default()
    };
    Ok(tx
        .list_runs(&filter)
        .await?
        .into_iter()
        .map(|r| (r.id, r.name))
        .collect())
}

/// Deletes a host; refused (a conflict naming the runs and what to do)
/// while runs name it, finished ones too: their history says where they
/// ran.
pub async fn delete(tx: &mut dyn Tx, h: &Host) -> StoreResult<bool> {
    let mut runs = runs_naming(tx, h).await?;
    runs.sort_by(|a, b| a.1.cmp(&b.1));
    if !runs.is_empty() {
        let names: Vec<String> = runs
            .iter()
            .take(3)
            .map(|(_, n)| format!("run {n}"))
            .collect();
        let more = match runs.len() {
            n if n > 3 => format!(" and {} more", n - 3),
            _ => String::new(),
        };
        return Err(StoreError::Conflict(format!(
            "host {:?} is named by {} run(s) that ran on it ({}{more}); delete those runs first, or disable the host (pamctl host disable {}) to keep their history",
            h.name,
            runs.len(),
            names.join(", "),
            h.name
        )));
    }
    tx.delete::<Host>(h.id).await
}
