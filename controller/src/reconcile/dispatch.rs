//! Dispatch: pending → spawning on one eligible host. Claims are made by
//! the worker's (long-polling) claim call; row locks (`FOR UPDATE SKIP
//! LOCKED` in the store) serialize them, so under any concurrency a run is
//! claimed by at most one host per attempt.

use pam_store::Run;
use uuid::Uuid;

use crate::ctx::Ctx;
use crate::rules::{hosts, runs};

/// Claims up to `max` runs for the host (bounded by its free capacity),
/// moving each pending → spawning ([`runs::lifecycle::claim`]). Returns
/// nothing when the host is not eligible.
pub async fn claim(ctx: &Ctx, host_id: Uuid, max: i64) -> anyhow::Result<Vec<Run>> {
    let mut tx = ctx.store.begin().await?;
    // After the connection is ours (begin() may wait for the pool): a
    // claim's time, and so its run.spawning and dispatch latency, is when
    // it claimed, never before the run it claims was created.
    let now = ctx.now();
    let Some(host) = tx.get_host(host_id).await? else {
        return Ok(vec![]);
    };
    if !hosts::eligible(&host) {
        return Ok(vec![]);
    }
    let live = tx.count_live_runs(host.id).await?;
    let free = i64::from(host.capacity) - live;
    if free <= 0 || max <= 0 {
        return Ok(vec![]);
    }
    let claimed = runs::lifecycle::claim(tx.as_mut(), &host, free.min(max), now).await?;
    ctx.commit(tx).await?;
    for r in &claimed {
        // From when it could be dispatched: time spent waiting for task
        // dependencies (issue 17) is not dispatch latency.
        let since = r.dispatchable_since.unwrap_or(r.pending_since);
        let waited = (now - since).to_std().unwrap_or_default();
        ctx.metrics.dispatch_latency.observe(waited.as_secs_f64());
    }
    Ok(claimed)
}

/// Long-poll claim: returns as soon as a run is claimable for the host (a
/// new run or a requeue wakes it through `ctx.claimable`), or empty after
/// `wait`.
pub async fn claim_wait(
    ctx: &Ctx,
    host_id: Uuid,
    max: i64,
    wait: std::time::Duration,
) -> anyhow::Result<Vec<Run>> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // Register interest before looking, so a wake-up between the claim
        // and the wait is not lost.
        let notified = ctx.claimable.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let runs = claim(ctx, host_id, max).await?;
        if !runs.is_empty() {
            return Ok(runs);
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => return Ok(vec![]),
        }
    }
}
