//! Dispatch timeout (OQ-15) and stops of pending runs.
//!
//! A pending run fails once `now ≥ pending_since + timeout` — measured from
//! `pending_since`, which a requeue resets, never from `created_at`. The
//! reason is `no_eligible_host` when no online, enabled, non-suspect host
//! ever matched its target while it waited, else `dispatch_timeout`. A run
//! whose target host turns ineligible stays pending until then and may be
//! claimed by any other eligible host. A pending run with a stop request is
//! stopped without dispatch.

use pam_manifests::state::{FailureReason, RunStatus};
use serde_json::json;

use super::dispatch::{host_eligible, target_matches};
use super::{ignore_conflict, runs, Ctx};
use crate::events::topic;
use crate::store::RunUpdate;

/// Pending runs examined per pass (oldest first).
const BATCH: i64 = 1000;

/// Returns (runs failed by timeout, pending runs stopped).
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<(usize, usize)> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let pending = tx.list_pending_runs(BATCH).await?;
    if pending.is_empty() {
        return Ok((0, 0));
    }
    let hosts = tx.list_hosts().await?;
    let eligible: Vec<_> = hosts.iter().filter(|h| host_eligible(h)).collect();
    let (mut timed_out, mut stopped) = (0, 0);
    let mut seen = Vec::new();
    for run in pending {
        if run.stop_requested {
            let r = ignore_conflict(
                tx.transition_run(
                    run.id,
                    run.attempt,
                    RunStatus::Pending,
                    RunStatus::Stopped,
                    &RunUpdate::default(),
                    now,
                )
                .await,
            )?;
            if let Some(r) = r {
                tx.append_event(topic::RUN_STOPPED, runs::payload(&r, json!({})), now)
                    .await?;
                stopped += 1;
            }
            continue;
        }
        let matched = eligible.iter().any(|h| target_matches(&run.target, h));
        if matched && !run.eligible_host_seen {
            seen.push(run.id);
        }
        let timeout = run
            .dispatch_timeout_seconds
            .map(|s| chrono::Duration::seconds(i64::from(s)))
            .unwrap_or_else(|| {
                chrono::Duration::from_std(ctx.thresholds.dispatch_timeout)
                    .expect("timeout in range")
            });
        if now >= run.pending_since + timeout {
            let reason = if run.eligible_host_seen || matched {
                FailureReason::DispatchTimeout
            } else {
                FailureReason::NoEligibleHost
            };
            if ignore_conflict(runs::fail(tx.as_mut(), &run, Some(reason), None, true, now).await)?
                .is_some()
            {
                timed_out += 1;
            }
        }
    }
    if !seen.is_empty() {
        tx.mark_eligible_host_seen(&seen).await?;
    }
    ctx.commit(tx).await?;
    Ok((timed_out, stopped))
}
