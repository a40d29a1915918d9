//! Dispatch: pending → spawning on one eligible host. Claims are made for
//! a worker (its watch keeps one waiting; an older worker long-polls its
//! claim call); row locks (`FOR UPDATE SKIP LOCKED` in the store)
//! serialize them, so under any concurrency a run is claimed by at most
//! one host per attempt.

use pam_store::{Host, Run, StoreResult};
use uuid::Uuid;

use crate::ctx::Ctx;
use crate::rules::{hosts, runs};

/// Claims up to `max` runs for the host (bounded by its free capacity),
/// moving each pending → spawning ([`runs::lifecycle::claim`]). Returns
/// nothing when the host is not eligible.
pub async fn claim(ctx: &Ctx, host_id: Uuid, max: i64) -> StoreResult<Vec<Run>> {
    Ok(claim_or_full(ctx, host_id, max).await?.unwrap_or_default())
}

/// [`claim`], but `None` when the host has no free capacity: it can claim
/// nothing until one of its own runs ends ([`claim_wait`] then waits for
/// that, not for new runs).
async fn claim_or_full(ctx: &Ctx, host_id: Uuid, max: i64) -> StoreResult<Option<Vec<Run>>> {
    let mut tx = ctx.store.begin().await?;
    // After the connection is ours (begin() may wait for the pool): a
    // claim's time, and so its run.spawning and dispatch latency, is when
    // it claimed, never before the run it claims was created.
    let now = ctx.now();
    let Some(host) = tx.get::<Host>(host_id).await? else {
        return Ok(Some(vec![]));
    };
    if !hosts::eligible(&host) {
        return Ok(Some(vec![]));
    }
    let live = tx.count_live_runs(host.id).await?;
    let free = i64::from(host.capacity) - live;
    if free <= 0 {
        return Ok(None);
    }
    if max <= 0 {
        return Ok(Some(vec![]));
    }
    let claimed = runs::lifecycle::claim(tx.as_mut(), &host, free.min(max), now).await?;
    ctx.commit(tx).await?;
    for r in &claimed {
        // From when it could be dispatched: time spent waiting for task
        // dependencies is not dispatch latency.
        let since = r.dispatchable_since.unwrap_or(r.pending_since);
        let waited = (now - since).to_std().unwrap_or_default();
        ctx.metrics.dispatch_latency.observe(waited.as_secs_f64());
    }
    Ok(Some(claimed))
}

/// Long-poll claim: returns as soon as a run is claimable for the host, or
/// empty after `wait`. A host with free capacity waits for new claimable
/// runs (`ctx.wakeups.claimable`: [`Ctx::runs_claimable`] wakes as many such
/// hosts as there are new runs, not the whole fleet); a full host waits
/// only for one of its own runs to end ([`Ctx::host_freed`]), so the
/// fleet's full hosts are not woken by every new run (at 1,000
/// hosts every signal batch and apply woke every long-poll, and their
/// claims queued on the pool ahead of the heartbeats).
pub async fn claim_wait(
    ctx: &Ctx,
    host_id: Uuid,
    max: i64,
    wait: std::time::Duration,
) -> StoreResult<Vec<Run>> {
    if wait.is_zero() {
        // Not a waiter: never counted, never handed a wake-up.
        return claim(ctx, host_id, max).await;
    }
    let deadline = tokio::time::Instant::now() + wait;
    let mine = ctx.wakeups.host_claims.listen(host_id);
    loop {
        // Register interest before looking, so a wake-up between the claim
        // and the wait is not lost.
        let mut notified = Box::pin(ctx.wakeups.claimable.notified());
        notified.as_mut().enable();
        let freed = mine.notified();
        tokio::pin!(freed);
        freed.as_mut().enable();
        match claim_or_full(ctx, host_id, max).await? {
            Some(runs) if !runs.is_empty() => return Ok(runs),
            Some(_) => {
                let _waiting = ctx.wakeups.host_claims.waiting();
                tokio::select! {
                    _ = &mut notified => {}
                    _ = &mut freed => {}
                    _ = tokio::time::sleep_until(deadline) => return Ok(vec![]),
                }
            }
            None => {
                // Not a waiter for new runs: a wake-up meant for a host
                // that can claim goes to the next one (tokio forwards a
                // dropped Notified's wake-up).
                drop(notified);
                tokio::select! {
                    _ = &mut freed => {}
                    _ = tokio::time::sleep_until(deadline) => return Ok(vec![]),
                }
            }
        }
    }
}
