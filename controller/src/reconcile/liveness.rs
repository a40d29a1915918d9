//! Host liveness: online hosts silent past the offline threshold (90 s by
//! default: three missed 30 s heartbeats) go offline and journal
//! `worker.offline`; their spawning and running runs fail with `host_lost`,
//! which the restart policy may requeue onto another host (OQ-12).

use pam_manifests::state::{FailureReason, HostStatus, RunStatus};
use serde_json::json;

use super::{ignore_conflict, runs, Ctx};
use crate::events::topic;
use crate::store::RunFilter;

/// Returns (hosts marked offline, runs failed host_lost).
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<(usize, usize)> {
    let now = ctx.now();
    let cutoff =
        now - chrono::Duration::from_std(ctx.thresholds.offline_after).expect("threshold in range");
    let mut tx = ctx.store.begin().await?;
    let silent = tx.list_silent_hosts(cutoff).await?;
    let (mut hosts, mut lost) = (0, 0);
    for host in silent {
        let Some(h) = ignore_conflict(
            tx.set_host_status(host.id, HostStatus::Online, HostStatus::Offline, now)
                .await,
        )?
        else {
            continue;
        };
        hosts += 1;
        tx.append_event(
            topic::WORKER_OFFLINE,
            json!({ "host_id": h.id, "host": h.name, "last_seen_at": h.last_seen_at }),
            now,
        )
        .await?;
        let live = tx
            .list_runs(&RunFilter {
                host_id: Some(h.id),
                statuses: Some(vec![RunStatus::Spawning, RunStatus::Running]),
                ..RunFilter::default()
            })
            .await?;
        for run in live {
            let r = runs::fail(
                tx.as_mut(),
                &run,
                Some(FailureReason::HostLost),
                None,
                true,
                now,
            )
            .await;
            if ignore_conflict(r)?.is_some() {
                lost += 1;
            }
        }
    }
    ctx.commit(tx).await?;
    Ok((hosts, lost))
}
