//! Dispatch timeout (OQ-15) and stops of pending runs.
//!
//! A pending run fails once `now ≥ dispatchable_since + timeout` (OQ-15).
//! `dispatchable_since` is `pending_since` — which a requeue resets, never
//! `created_at` — unless the run waited for task dependencies:
//! then it is when the last one became done, so the time spent blocked
//! never counts, and a blocked run (no `dispatchable_since`) has no
//! timeout (`rules::runs::gate`). The
//! reason is `no_eligible_host` when no online, enabled, non-suspect host
//! ever matched its target while it waited, else `dispatch_timeout`. A run
//! whose target host turns ineligible stays pending until then and may be
//! claimed by any other eligible host. A pending run with a stop request is
//! stopped without dispatch.
//!
//! # Why a run waits
//! The same pass places every listed run against the hosts it loaded
//! ([`placement::Fleet`]: in memory, no query per run) and sets its
//! `Scheduled=False` condition when the reason or the message changed
//! (`Unschedulable: 0/2 hosts can run it: 1 lacks provider claude, 1
//! cordoned`); a `no_eligible_host` or `dispatch_timeout` failure carries
//! that last message. An "eligible host matched" now also needs the
//! host to have the run's provider.
//!
//! # After pamd was away (OQ-15)
//! A timeout that passed while pamd was down (or its loops could not reach
//! the database) does not fire the moment pamd is back: no timeout fires
//! until the fleet had a full offline window to report since pamd began
//! observing ([`Ctx::observed_a_full_window`], the window
//! `reconcile::liveness` gives hosts), so a worker that is still there
//! reconnects and claims first. When the timeout then fires, the reason is
//! decided against the hosts as they are at that moment — the liveness
//! sweep of the same pass has already moved hosts that stayed silent to
//! offline. Until that window has passed, only hosts that reported to this
//! pamd mark `eligible_host_seen`: the others' `online` is inherited state,
//! not an observation.

use std::collections::HashMap;

use pam_manifests::state::RunStatus;
use pam_store::{Host, Project, RunFilter};
use uuid::Uuid;

use super::ignore_conflict;
use crate::ctx::Ctx;
use crate::rules::runs::{placement, usage};
use crate::rules::{hosts, runs};

/// Pending runs examined per pass (oldest first).
const BATCH: i64 = 1000;

/// Returns (runs failed by timeout, pending runs stopped).
/// How long a run some host could take may stay unclaimed before the
/// sweep wakes the claims again.
const UNCLAIMED_AFTER: chrono::Duration = chrono::Duration::seconds(2);

pub async fn sweep(ctx: &Ctx) -> anyhow::Result<(usize, usize)> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let pending = tx.list_pending_runs(BATCH).await?;
    if pending.is_empty() {
        return Ok((0, 0));
    }
    let observing = ctx.observed_a_full_window(now);
    let since = ctx.observing_since();
    let all_hosts = tx.list::<Host>(()).await?;
    // Before a full window, an `online` host this pamd has not heard from
    // is inherited state, not an observation.
    let observed = |h: &pam_store::Host| {
        hosts::eligible(h) && (observing || h.last_seen_at.is_some_and(|t| t >= since))
    };
    let mut fleet = placement::Fleet::new(&all_hosts, None, observed);
    let mut shapes = std::collections::HashMap::new();
    for run in &pending {
        fleet.place(run, &mut shapes);
    }
    // Live-run counts only when some host got as far as its capacity.
    if fleet.needs_counts() {
        let live = tx.count_live_runs_per_host().await?;
        fleet = placement::Fleet::new(&all_hosts, Some(&live), observed);
        shapes.clear();
    }
    // A project over its budget holds its pending runs on
    // purpose (until the budget is raised): no dispatch timeout for them,
    // and once released their window opens again at the release.
    let mut held = std::collections::HashMap::new();
    let mut released = std::collections::HashMap::new();
    for p in tx.list::<Project>(()).await? {
        match usage::budget_released_at(&p.meta) {
            _ if pam_store::projects::over_budget(&p.meta) => {
                held.insert(p.id, p.name.clone());
            }
            Some(at) => {
                released.insert(p.id, at);
            }
            None => {}
        }
    }
    // What each run needs, decided over the narrow rows; whole rows are
    // read only for the runs written (a pass that changes
    // nothing reads no more than placing needs).
    enum Write {
        Stop,
        Schedule(&'static str, String),
        TimeOut(bool, String),
    }
    let over_budget: HashMap<Uuid, String> = held
        .iter()
        .map(|(id, project)| (*id, format!("project {project} is over its budget")))
        .collect();
    let mut seen = Vec::new();
    let mut writes = Vec::new();
    // A run some host could take now, dispatchable for longer than a claim
    // takes: the claims that should have taken it were not woken (a change
    // that announced nothing), so they are woken now (level-triggered:
    // workers claim only when woken since they watch).
    let mut unclaimed = false;
    for run in &pending {
        if run.stop_requested {
            writes.push((run.id, Write::Stop));
            continue;
        }
        let placed = fleet.place(run, &mut shapes);
        // A project over its budget holds its runs on purpose.
        unclaimed |= placed.able > 0
            && !held.contains_key(&run.project_id)
            && run
                .dispatchable_since
                .is_some_and(|at| now - at > UNCLAIMED_AFTER);
        let matched = placed.eligible_match;
        if matched && !run.eligible_host_seen {
            seen.push(run.id);
        }
        let (reason, message) = match over_budget.get(&run.project_id) {
            Some(m) => (
                pam_manifests::conditions::SCHEDULED_BUDGET_EXCEEDED,
                m.as_str(),
            ),
            None => (placed.reason, placed.message.as_str()),
        };
        let schedule = placement::changes(run.scheduled.as_ref(), reason, message)
            .then(|| (run.id, Write::Schedule(reason, message.to_string())));
        if !observing || held.contains_key(&run.project_id) {
            writes.extend(schedule);
            continue;
        }
        let timeout = run
            .dispatch_timeout_seconds
            .map(|s| chrono::Duration::seconds(i64::from(s)))
            .unwrap_or_else(|| {
                chrono::Duration::from_std(ctx.thresholds.dispatch_timeout)
                    .expect("timeout in range")
            });
        // OQ-15: the window opens when the run became
        // dispatchable; the store lists blocked runs only to stop them.
        let Some(since) = run.dispatchable_since else {
            continue;
        };
        let since = released
            .get(&run.project_id)
            .map_or(since, |at: &chrono::DateTime<chrono::Utc>| since.max(*at));
        if now < since + timeout {
            writes.extend(schedule);
        } else {
            writes.push((run.id, Write::TimeOut(matched, message.to_string())));
        }
    }
    let (mut timed_out, mut stopped) = (0, 0);
    if !writes.is_empty() {
        let whole: HashMap<Uuid, pam_store::Run> = tx
            .list_runs(&RunFilter {
                ids: Some(writes.iter().map(|(id, _)| *id).collect()),
                ..RunFilter::default()
            })
            .await?
            .into_iter()
            .map(|r| (r.id, r))
            .collect();
        for (id, write) in writes {
            // Gone or changed since the narrow read: a later pass sees it.
            let Some(run) = whole.get(&id).filter(|r| r.status == RunStatus::Pending) else {
                continue;
            };
            match write {
                Write::Stop => {
                    if ignore_conflict(runs::lifecycle::stop_pending(tx.as_mut(), run, now).await)?
                        .is_some()
                    {
                        stopped += 1;
                    }
                }
                Write::Schedule(reason, message) => {
                    ignore_conflict(
                        placement::set_scheduled(tx.as_mut(), run, reason, &message, now).await,
                    )?;
                }
                Write::TimeOut(matched, message) => {
                    if ignore_conflict(
                        runs::lifecycle::time_out(tx.as_mut(), run, matched, &message, now).await,
                    )?
                    .is_some()
                    {
                        timed_out += 1;
                    }
                }
            }
        }
    }
    if !seen.is_empty() {
        runs::lifecycle::note_eligible_host(tx.as_mut(), &seen).await?;
    }
    ctx.commit(tx).await?;
    if unclaimed {
        // Once per grace at most: a run some host could take but none
        // claims (its worker gone, not yet offline) must not wake every
        // claim at every pass.
        let mut last = ctx
            .wakeups
            .unclaimed_woken
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if last.is_none_or(|at| now - at >= UNCLAIMED_AFTER) {
            *last = Some(now);
            ctx.wakeups.claimable.notify_waiters();
        }
    }
    Ok((timed_out, stopped))
}
