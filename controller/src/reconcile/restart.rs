//! Restart: failed runs whose backoff has elapsed go back to pending
//! (failed → pending, the only way back from failed). The store's requeue
//! increments `attempt`, resets the per-attempt columns and sets
//! `pending_since = now`, giving the new attempt a fresh dispatch-timeout
//! window (OQ-15). The requeued run may land on any eligible host,
//! including after `host_lost` (OQ-12). Whether a failure is requeued at
//! all was decided when it failed ([`super::runs::fail`] sets
//! `requeue_at`): dispatch_timeout, no_eligible_host and stopped runs never
//! get one.

use super::{ignore_conflict, Ctx};

const BATCH: i64 = 1000;

/// Returns how many runs were requeued.
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<usize> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let due = tx.list_requeue_due(now, BATCH).await?;
    let mut n = 0;
    for run in due {
        if run.stop_requested {
            continue;
        }
        if ignore_conflict(tx.requeue_run(run.id, run.attempt, now).await)?.is_some() {
            n += 1;
        }
    }
    ctx.commit(tx).await?;
    Ok(n)
}
