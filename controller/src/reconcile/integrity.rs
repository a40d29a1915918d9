//! Integrity: a run must point at a work item of kind task or subtask. The
//! API refuses anything else, and a run's task and a task's type are
//! immutable, so only a change made behind pam's back (direct SQL) can
//! break it. The seed's rule: such a run is "a data-integrity anomaly to
//! journal, not to auto-repair" — so it is journaled once
//! (`run.integrity_anomaly`) and marked with an `IntegrityAnomaly`
//! condition, which also debounces the journal.

use pam_manifests::state::{RunStatus, WorkItemKind};
use serde_json::json;

use super::{ignore_conflict, runs, Ctx};
use crate::events::topic;
use crate::store::RunFilter;

pub const CONDITION: &str = "IntegrityAnomaly";

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
    for mut run in active {
        let already = run
            .meta
            .conditions
            .as_array()
            .is_some_and(|cs| cs.iter().any(|c| c["type"] == CONDITION));
        if already {
            continue;
        }
        let Some(task) = tx.get_work_item(run.task_id).await? else {
            continue;
        };
        if matches!(task.kind, WorkItemKind::Task | WorkItemKind::Subtask) {
            continue;
        }
        let message = format!(
            "run points at {} {:?}; runs may only execute tasks and subtasks",
            task.kind, task.name
        );
        let cond = json!({
            "type": CONDITION, "status": "True", "reason": "TaskNotExecutable",
            "message": message, "lastTransitionTime": now.to_rfc3339(),
        });
        let rv = run.meta.resource_version;
        match run.meta.conditions.as_array_mut() {
            Some(cs) => cs.push(cond),
            None => run.meta.conditions = json!([cond]),
        }
        if ignore_conflict(tx.update_run_spec(&run, rv).await)?.is_none() {
            continue;
        }
        tracing::warn!(run_id = %run.id, task = %task.name, kind = %task.kind, "integrity anomaly: run points at a non-executable work item");
        tx.append_event(
            topic::RUN_INTEGRITY_ANOMALY,
            runs::payload(
                &run,
                json!({ "task_kind": task.kind.as_str(), "message": message }),
            ),
            now,
        )
        .await?;
        n += 1;
    }
    ctx.commit(tx).await?;
    Ok(n)
}
