//! Run rules. This module: what operators declare — create, spec updates,
//! stop requests, operator signals, deletion — and the integrity anomaly.
//! [`lifecycle`]: every status transition (dispatch, the worker's
//! signals, failures and restarts, timeouts).
//!
//! Immutable after creation (ARCHITECTURE.md, "Apply semantics"): a run's
//! task, provider, prompt, cwd (and command). A stop, once asked, is never
//! withdrawn by a later apply.

pub mod activity;
pub mod env;
pub mod gate;
pub mod lifecycle;
pub mod placement;
pub mod result;
pub mod template;
pub mod usage;
pub mod workspace;

pub use lifecycle::{backoff, fail, RunWrites};

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{self, Kind};
use pam_manifests::protocol::SignalName;
use pam_manifests::state::RunStatus;
use pam_store::prelude::*;
use pam_store::{Event, Run, RunFilter, StoreResult, Target, WorkItem};
use serde_json::json;
use uuid::Uuid;

use super::meta::{self, Change, Desired};
use super::{check_immutable, RuleResult};
use crate::events::{payload, topic};

/// The operator-owned fields of a run as declared.
#[derive(Debug, Clone)]
pub struct RunDesired {
    pub name: String,
    pub provider: String,
    pub prompt: String,
    pub cwd: String,
    pub target: Target,
    pub max_attempts: i32,
    pub backoff_seconds: i32,
    pub backoff_max_seconds: i32,
    pub dispatch_timeout_seconds: Option<i32>,
    pub stopped: bool,
    pub desired: Desired,
}

fn clamp(n: u32) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

impl RunDesired {
    pub fn of(r: &kinds::Run, desired: Desired) -> RunDesired {
        let rp = &r.spec.restart_policy;
        RunDesired {
            name: r.metadata.name.to_string(),
            provider: r.spec.provider.as_str().to_string(),
            prompt: r.spec.prompt.clone(),
            cwd: r.spec.cwd.clone(),
            target: match &r.spec.target {
                None => Target::Any,
                Some(kinds::Target::Host(h)) => Target::Host(h.to_string()),
                Some(kinds::Target::Selector(s)) => Target::Selector(meta::store_labels(s)),
            },
            max_attempts: clamp(rp.max_attempts.get()),
            backoff_seconds: clamp(rp.backoff_seconds),
            backoff_max_seconds: clamp(rp.backoff_max_seconds),
            dispatch_timeout_seconds: r.spec.dispatch_timeout_seconds.map(|s| clamp(s.get())),
            stopped: r.spec.stopped,
            desired,
        }
    }
}

/// Creates a pending run of `task` (a task or subtask: validation refuses
/// milestones and epics, the integrity check journals any that slip past)
/// and journals `run.created`. Its dispatch-timeout window starts now
/// (`pending_since = created_at`, OQ-15), or when its task's last
/// dependency is done: the store sets `dispatchable_since` (the returned row
/// leaves it `None`).
pub async fn create(
    tx: &mut dyn Tx,
    project_id: Uuid,
    project_slug: &str,
    task: &WorkItem,
    d: RunDesired,
    now: DateTime<Utc>,
) -> StoreResult<Run> {
    let id = Uuid::new_v4();
    let permissions = Some(settle_permissions(tx, project_id, task, &d.desired.spec).await?);
    let row = Run {
        provider: d.provider,
        prompt: d.prompt,
        cwd: d.cwd,
        target: d.target,
        max_attempts: d.max_attempts,
        backoff_seconds: d.backoff_seconds,
        backoff_max_seconds: d.backoff_max_seconds,
        dispatch_timeout_seconds: d.dispatch_timeout_seconds,
        stop_requested: d.stopped,
        permissions,
        meta: meta::new_meta(d.desired, now),
        ..Run::first_attempt(id, (project_id, task.id), d.name, now)
    };
    tx.insert_run(&row).await?;
    // A run naming a Secret that does not exist yet waits for it from the
    // start: the claim must not win the race with the pass.
    env::check_wait(tx, &row, None, now).await?;
    let p = payload::run(
        &row,
        json!({ "project": project_slug, "task": task.name, "provider": row.provider }),
    );
    tx.append_event(topic::RUN_CREATED, p, now).await?;
    Ok(row)
}

/// A new run's permissions (admission-time defaulting, as Kubernetes
/// settles a pod's defaults when it is created): its own
/// `spec.permissions`, else its task's, else its project's, else `mode:
/// edits`. The project is read only when neither the run nor its task
/// declares any.
async fn settle_permissions(
    tx: &mut dyn Tx,
    project_id: Uuid,
    task: &WorkItem,
    run_spec: &serde_json::Value,
) -> StoreResult<kinds::EffectivePermissions> {
    let of = |spec: &serde_json::Value| -> Option<kinds::Permissions> {
        spec.get("permissions")
            .and_then(|p| serde_json::from_value(p.clone()).ok())
    };
    let (run, task) = (of(run_spec), of(&task.meta.spec));
    let project = if run.is_none() && task.is_none() {
        tx.get::<pam_store::Project>(project_id)
            .await?
            .and_then(|p| of(&p.meta.spec))
    } else {
        None
    };
    Ok(kinds::EffectivePermissions::resolve(
        run.as_ref(),
        task.as_ref(),
        project.as_ref(),
    ))
}

/// Updates the operator-owned fields of a stored run (target, restart
/// policy, dispatch timeout, stop) to their declared values; a changed
/// immutable field is refused, naming it. The same desired state writes
/// nothing.
pub async fn update(
    tx: &mut dyn Tx,
    mut row: Run,
    d: RunDesired,
    now: DateTime<Utc>,
) -> RuleResult<(Run, Change)> {
    check_immutable(
        Kind::Run,
        &row.meta.spec,
        &d.desired.spec,
        "is immutable; create a new run to change it",
    )?;
    let rv = row.meta.resource_version;
    let change = meta::set_desired(&mut row.meta, d.desired, now);
    if !change.changed() {
        return Ok((row, change));
    }
    row.target = d.target;
    row.max_attempts = d.max_attempts;
    row.backoff_seconds = d.backoff_seconds;
    row.backoff_max_seconds = d.backoff_max_seconds;
    row.dispatch_timeout_seconds = d.dispatch_timeout_seconds;
    // A stop, once asked, is not withdrawn by a later apply.
    row.stop_requested |= d.stopped;
    Ok((tx.update_run_spec(&row, rv).await?, change))
}

/// `pamctl stop RUN`: records the desired stop (`spec.stopped: true`, a
/// spec change). The worker is told through its desired set; a pending run
/// is stopped by the loops without dispatch ([`lifecycle::stop_pending`]).
/// Stopping a run that is already asked to stop changes nothing.
pub async fn request_stop(tx: &mut dyn Tx, mut run: Run, now: DateTime<Utc>) -> StoreResult<Run> {
    if run.stop_requested {
        return Ok(run);
    }
    let rv = run.meta.resource_version;
    run.stop_requested = true;
    // The audit trail: who asked. `run.stopped` is journaled when the
    // stop takes effect — by a loop or the worker's report, outside this
    // request — and names them from here (lifecycle::stopped_payload). A
    // column, not an annotation: a re-apply replaces annotations no field
    // manager owns, and lost the actor.
    run.stopped_by = pam_store::events::current_actor();
    let d = Desired::stored(&run.meta).with_spec_field("stopped", json!(true));
    meta::set_desired(&mut run.meta, d, now);
    let run = tx.update_run_spec(&run, rv).await?;
    // Journaled with its host, so every replica's watch of that host
    // wakes, and the audit trail says when it was asked.
    tx.append_event(
        topic::RUN_STOP_REQUESTED,
        payload::run(&run, json!({})),
        now,
    )
    .await?;
    Ok(run)
}

/// A live run whose usage over all its attempts reached its
/// `spec.budget` is stopped through the normal stop path — the desired
/// stop the worker carries out like `pamctl stop` — with the condition
/// `BudgetExceeded` and `run.budget_exceeded` journaled with the figures;
/// its `finished` then fails it `budget_exceeded` ([`lifecycle::finish`]).
/// `None` when there is nothing to do (within budget, not live, or
/// already stopping). The spec is not touched: raising the budget later
/// does not withdraw the stop.
pub async fn stop_over_budget(
    tx: &mut dyn Tx,
    mut run: Run,
    now: DateTime<Utc>,
) -> StoreResult<Option<Run>> {
    if run.stop_requested || !run.status.is_live() {
        return Ok(None);
    }
    let Some(why) = usage::run_over_budget(&run) else {
        return Ok(None);
    };
    let rv = run.meta.resource_version;
    run.stop_requested = true;
    meta::set_condition(
        &mut run.meta,
        usage::BUDGET_EXCEEDED,
        true,
        usage::BUDGET_EXCEEDED,
        &why,
        now,
    );
    let run = tx.update_run_spec(&run, rv).await?;
    let u = run.usage.total;
    tx.append_event(
        topic::RUN_BUDGET_EXCEEDED,
        payload::run(
            &run,
            json!({
                "message": why,
                "budget": run.meta.spec.get("budget"),
                "input_tokens": u.input_tokens,
                "cached_input_tokens": u.cached_input_tokens,
                "output_tokens": u.output_tokens,
                "cost_usd": u.cost_usd(),
            }),
        ),
        now,
    )
    .await?;
    Ok(Some(run))
}

/// `pamctl signal RUN --signal S`: journals `run.signal_received`; the
/// event's seq is the signal's id, which the worker delivers once. Only a
/// live run can be signalled (the caller checks and says so).
pub async fn journal_signal(
    tx: &mut dyn Tx,
    run: &Run,
    signal: SignalName,
    now: DateTime<Utc>,
) -> StoreResult<Event> {
    tx.append_event(
        topic::RUN_SIGNAL_RECEIVED,
        payload::run(run, json!({ "signal": signal.as_str() })),
        now,
    )
    .await
}

/// A worker's output snapshot: the journal gets only its size (output
/// text never enters the events table).
pub async fn output_appended(
    tx: &mut dyn Tx,
    run: &Run,
    lines: u64,
    bytes: u64,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    tx.append_event(
        topic::RUN_OUTPUT_APPENDED,
        payload::run(run, json!({ "lines": lines, "bytes": bytes })),
        now,
    )
    .await
    .map(drop)
}

/// The live runs ([`RunStatus::is_live`]), of host `host_id` when given.
pub async fn live(tx: &mut dyn Tx, host_id: Option<Uuid>) -> StoreResult<Vec<Run>> {
    let filter = RunFilter {
        host_id,
        statuses: Some(RunStatus::LIVE.to_vec()),
        ..RunFilter::default()
    };
    tx.list_runs(&filter).await
}

/// Deletes a run (and its signal markers).
pub async fn delete(tx: &mut dyn Tx, run: &Run) -> StoreResult<bool> {
    tx.delete_run(run.id).await
}

/// The condition that marks a run whose task is not executable.
pub use pam_manifests::conditions::INTEGRITY_ANOMALY;

/// A run pointing at a milestone or epic is "a data-integrity anomaly to
/// journal, not to auto-repair" (pam-data-model.txt, runs.task_id): marks
/// the run with the `IntegrityAnomaly` condition (which also debounces the
/// journal) and journals `run.integrity_anomaly` once. Returns false when
/// the run was marked already.
pub async fn mark_integrity_anomaly(
    tx: &mut dyn Tx,
    mut run: Run,
    task: &WorkItem,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    if meta::has_condition(&run.meta, INTEGRITY_ANOMALY) {
        return Ok(false);
    }
    let message = format!(
        "run points at {} {:?}; runs may only execute tasks and subtasks",
        task.kind, task.name
    );
    let rv = run.meta.resource_version;
    meta::set_condition(
        &mut run.meta,
        INTEGRITY_ANOMALY,
        true,
        "TaskNotExecutable",
        &message,
        now,
    );
    let run = tx.update_run_spec(&run, rv).await?;
    tracing::warn!(run_id = %run.id, task = %task.name, kind = %task.kind, "integrity anomaly: run points at a non-executable work item");
    tx.append_event(
        topic::RUN_INTEGRITY_ANOMALY,
        payload::run(
            &run,
            json!({ "task_kind": task.kind.as_str(), "message": message }),
        ),
        now,
    )
    .await?;
    Ok(true)
}
