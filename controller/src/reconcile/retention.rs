//! Retention: events older than `[retention] events_days` (30 by default)
//! are purged at start — best-effort, and no event is journaled for the
//! purge (pam-data-model.txt, "Data Retention").

use crate::ctx::Ctx;

/// Purges events created before `now - days`; returns how many.
pub async fn purge(ctx: &Ctx, days: u32) -> anyhow::Result<u64> {
    let cutoff = ctx.now() - chrono::Duration::days(i64::from(days));
    let mut tx = ctx.store.begin().await?;
    let n = tx.purge_events_before(cutoff).await?;
    ctx.commit(tx).await?;
    Ok(n)
}
