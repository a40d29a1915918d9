//! Host liveness: online hosts silent past the offline threshold (90 s by
//! default: three missed 30 s heartbeats) go offline and their live runs
//! fail `host_lost` ([`hosts::go_offline`]).
//!
//! # Silence is judged from what this pamd observed
//! A host is silent when `now - max(last_seen_at, observing_since) >
//! offline_after` ([`Ctx::observing_since`]): its start, or the pass at
//! which the loops reached the database again after failing to. Workers go
//! on heartbeating while pamd is down (or cut off from PostgreSQL), and
//! those heartbeats are lost, not absent; a stale `last_seen_at` read at
//! start says nothing about the host. So every host gets a full offline
//! window after pamd starts observing, as Kubernetes' node lifecycle
//! controller gives nodes a grace period after it starts — a pamd outage
//! of any length no longer fails the fleet's runs `host_lost`.

use crate::ctx::Ctx;
use crate::rules::hosts;

/// Returns (hosts marked offline, runs failed host_lost).
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<(usize, usize)> {
    let now = ctx.now();
    // max(last_seen_at, observing_since) < now - offline_after holds only
    // when observing_since does too; then it is last_seen_at < cutoff.
    if !ctx.observed_a_full_window(now) {
        return Ok((0, 0));
    }
    let cutoff = now - ctx.offline_window();
    let mut tx = ctx.store.begin().await?;
    let silent = tx.list_silent_hosts(cutoff).await?;
    let (mut offline, mut lost) = (0, 0);
    for host in silent {
        if let Some((_, n)) = hosts::go_offline(tx.as_mut(), &host, now).await? {
            offline += 1;
            lost += n;
        }
    }
    ctx.commit(tx).await?;
    Ok((offline, lost))
}
