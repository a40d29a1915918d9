//! Integrity: a run must point at a work item of kind task or subtask. The
//! API refuses anything else, and a run's task and a task's type are
//! immutable, so only a change made behind pam's back (direct SQL) can
//! break it. Such a run is journaled once and marked, never repaired
//! ([`runs::mark_integrity_anomaly`]).

use pam_manifests::state::{RunStatus, WorkItemKind};
use pam_store::RunFilter;

use super::ignore_conflict;
use crate::ctx::Ctx;
use crate::rules::{meta, runs};

/// Checks the runs that are still active; returns how many anomalies it
/// journaled now.
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<usize> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let active = tx
        .list_runs(&RunFilter {
            statuses: Some(vec![
                RunStatus::Pending,
                RunStatus::Spawning,
                RunStatus::Running,
            ]),
            ..RunFilter::default()
        })
        .await?;
    let mut n = 0;
    for run in active {
        if meta::has_condition(&run.meta, runs::INTEGRITY_ANOMALY) {
            continue;
        }
        let Some(task) = tx.get_work_item(run.task_id).await? else {
            continue;
        };
        if matches!(task.kind, WorkItemKind::Task | WorkItemKind::Subtask) {
            continue;
        }
        if ignore_conflict(runs::mark_integrity_anomaly(tx.as_mut(), run, &task, now).await)?
            == Some(true)
        {
            n += 1;
        }
    }
    ctx.commit(tx).await?;
    Ok(n)
}
