//! Host liveness: online hosts silent past the offline threshold (90 s by
//! default: three missed 30 s heartbeats) go offline and their live runs
//! fail `host_lost` ([`hosts::go_offline`]).

use crate::ctx::Ctx;
use crate::rules::hosts;

/// Returns (hosts marked offline, runs failed host_lost).
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<(usize, usize)> {
    let now = ctx.now();
    let cutoff =
        now - chrono::Duration::from_std(ctx.thresholds.offline_after).expect("threshold in range");
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
