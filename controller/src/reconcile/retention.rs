//! Retention: events older than `[retention] events_days` (30 by default)
//! are purged at start — best-effort, and no event is journaled for the
//! purge (pam-data-model.txt, "Data Retention"). Delivered and failed
//! webhook deliveries older than `[webhooks] deliveries_days` go too
//! (pending ones are kept whatever their age).

use crate::ctx::Ctx;

/// Purges events created before `now - days`; returns how many.
pub async fn purge(ctx: &Ctx, days: u32) -> anyhow::Result<u64> {
    purge_older(ctx, days, Old::Events).await
}

/// Purges delivered and failed webhook deliveries created before
/// `now - days`; returns how many.
pub async fn purge_deliveries(ctx: &Ctx, days: u32) -> anyhow::Result<u64> {
    purge_older(ctx, days, Old::Deliveries).await
}

/// What [`purge_older`] purges.
enum Old {
    Events,
    Deliveries,
}

/// Purges `what` created before `now - days` in one committed transaction.
async fn purge_older(ctx: &Ctx, days: u32, what: Old) -> anyhow::Result<u64> {
    let cutoff = ctx.now() - chrono::Duration::days(i64::from(days));
    let mut tx = ctx.store.begin().await?;
    let n = match what {
        Old::Events => tx.purge_events_before(cutoff).await?,
        Old::Deliveries => tx.purge_deliveries_before(cutoff).await?,
    };
    ctx.commit(tx).await?;
    Ok(n)
}

/// Deletes the idempotency keys whose replay window is over:
/// at start and every few minutes with the integrity check.
pub async fn purge_idempotency_keys(ctx: &Ctx) -> anyhow::Result<u64> {
    let mut tx = ctx.store.begin().await?;
    let n = tx.purge_idempotency_keys(ctx.now()).await?;
    ctx.commit(tx).await?;
    Ok(n)
}
