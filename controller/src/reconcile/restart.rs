//! Restart: failed runs whose backoff has elapsed go back to pending
//! ([`runs::lifecycle::requeue`]). Whether a failure is requeued at all was
//! decided when it failed ([`runs::fail`] sets `requeue_at`):
//! dispatch_timeout, no_eligible_host and stopped runs never get one.

use super::ignore_conflict;
use crate::ctx::Ctx;
use crate::rules::runs;

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
        if ignore_conflict(runs::lifecycle::requeue(tx.as_mut(), &run, now).await)?.is_some() {
            n += 1;
        }
    }
    ctx.commit(tx).await?;
    Ok(n)
}
