//! The run rules several loops share: event payloads, and how a run fails
//! (which decides whether the restart policy will requeue it).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::{FailureReason, RunStatus};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::events::topic;
use crate::store::{Run, RunUpdate, StoreResult, Tx};

/// The two writes the run rules make: a guarded status transition (through
/// the state-machine gate) and a journal entry. Every [`Tx`] does them
/// directly; signal ingest stages them in memory for a whole batch and
/// writes the batch set-based (see `ingest::Staged`).
#[async_trait]
pub trait RunWrites: Send {
    /// [`Tx::transition_run`].
    async fn write_transition(
        &mut self,
        id: Uuid,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<Run>;
    /// [`Tx::append_event`], without the assigned event.
    async fn journal(
        &mut self,
        topic: &'static str,
        payload: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
}

#[async_trait]
impl<T: Tx + ?Sized> RunWrites for T {
    async fn write_transition(
        &mut self,
        id: Uuid,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        self.transition_run(id, attempt, from, to, update, now)
            .await
    }

    async fn journal(
        &mut self,
        topic: &'static str,
        payload: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.append_event(topic, payload, now).await.map(drop)
    }
}

/// The payload of a `run.*` event. Every one carries `run_id` and
/// `attempt` (pam-data-model.txt, "Run topic rules"), so a consumer can tell
/// which incarnation of a restarted run it describes. `extra`'s keys are
/// merged in.
pub fn payload(run: &Run, extra: Value) -> Value {
    let mut p = json!({
        "run_id": run.id,
        "attempt": run.attempt,
        "name": run.name,
        "project_id": run.project_id,
        "task_id": run.task_id,
        "status": run.status.as_str(),
    });
    if let Some(h) = run.host_id {
        p["host_id"] = json!(h);
    }
    if let (Value::Object(p), Value::Object(extra)) = (&mut p, extra) {
        p.extend(extra);
    }
    p
}

/// Backoff before requeue number `attempt` (1-based): `backoff ×
/// 2^(attempt-1)`, capped at `backoff_max`.
pub fn backoff(run: &Run) -> chrono::Duration {
    let base = i64::from(run.backoff_seconds.max(0));
    let shift = (run.attempt - 1).clamp(0, 20) as u32;
    let secs = base.saturating_mul(1i64 << shift);
    chrono::Duration::seconds(secs.min(i64::from(run.backoff_max_seconds.max(0))))
}

/// Moves `run` (in its current status and attempt) to `failed` and decides
/// its restart:
/// - a restartable failure (a non-zero exit, host_lost (OQ-12),
///   session_lost, spawn_failed) of a run that is not being stopped and has
///   attempts left gets `requeue_at = now + backoff`; the restart loop
///   requeues it then;
/// - the same with no attempts left (and a policy that allowed more than
///   one) becomes `restart_exhausted`;
/// - dispatch_timeout and no_eligible_host never restart.
///
/// `journal_failed` says whether to journal `run.failed`: the seed reserves
/// it for failures where no wrapper exit occurred (spawn failure, a lost
/// host or session, a dispatch timeout) and a provider hook reporting
/// failure; a non-zero exit journals only `run.finished` — one rule, no
/// overlap.
pub async fn fail<W: RunWrites + ?Sized>(
    tx: &mut W,
    run: &Run,
    reason: Option<FailureReason>,
    exit_code: Option<i32>,
    journal_failed: bool,
    now: DateTime<Utc>,
) -> StoreResult<Run> {
    let restartable = FailureReason::restartable(reason) && !run.stop_requested;
    let mut update = RunUpdate {
        failure_reason: reason,
        exit_code,
        ..RunUpdate::default()
    };
    if run.status != RunStatus::Pending {
        update.finished_at = Some(now);
    }
    if restartable && run.attempt < run.max_attempts {
        update.requeue_at = Some(now + backoff(run));
    } else if restartable && run.max_attempts > 1 {
        update.failure_reason = Some(FailureReason::RestartExhausted);
    }
    let failed = tx
        .write_transition(
            run.id,
            run.attempt,
            run.status,
            RunStatus::Failed,
            &update,
            now,
        )
        .await?;
    if journal_failed {
        let mut extra = json!({ "from": run.status.as_str() });
        if let Some(r) = failed.failure_reason {
            extra["failure_reason"] = json!(r.as_str());
        }
        if let Some(r) = reason {
            extra["cause"] = json!(r.as_str());
        }
        tx.journal(topic::RUN_FAILED, payload(&failed, extra), now)
            .await?;
    }
    Ok(failed)
}
