//! Run status transitions (pam-data-model.txt, "Run Status"): dispatch,
//! what the worker reports, failure and the restart decision, requeue,
//! dispatch timeout (OQ-15), pending stops.
//!
//! Every transition journals its event; `progress` is not a transition
//! (signal ingest only moves `last_progress_seq`) and
//! journals none.
//!
//! Every transition goes through [`RunWrites`]: a guarded, gated status
//! write and its journal entry. A [`Tx`] implements it directly; signal
//! ingest implements it over a whole batch held in memory and writes the
//! batch set-based — so a batch is decided by these same functions, not a
//! copy of them.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::{FailureReason, RunStatus};
use serde_json::{json, Value};
use uuid::Uuid;

use pam_store::prelude::*;
use pam_store::{Host, Run, RunUpdate, StoreResult};

use super::usage;
use crate::clock::ts;
use crate::events::{payload, topic};

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
/// overlap. `message` says why in words (a spawn failure's cause as the
/// worker saw it): kept per attempt in `failure_message` and carried in
/// `run.failed`.
pub async fn fail<W: RunWrites + ?Sized>(
    tx: &mut W,
    run: &Run,
    reason: Option<FailureReason>,
    message: Option<&str>,
    exit_code: Option<i32>,
    journal_failed: bool,
    now: DateTime<Utc>,
) -> StoreResult<Run> {
    let restartable = FailureReason::restartable(reason) && !run.stop_requested;
    let mut update = RunUpdate {
        failure_reason: reason,
        failure_message: message.map(str::to_string),
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
        if let Some(m) = message {
            extra["message"] = json!(m);
        }
        tx.journal(topic::RUN_FAILED, payload::run(&failed, extra), now)
            .await?;
    }
    Ok(failed)
}

/// Dispatch (pending → spawning): claims up to `limit` pending runs that
/// target `host` (eligibility and capacity are the caller's) with row
/// locks, so a run goes to at most one host per attempt, and journals
/// `run.spawning` for each, in claim order — one multi-row insert for the
/// whole claim (a claim costs the same statements for 1 run or 16).
pub async fn claim(
    tx: &mut dyn Tx,
    host: &Host,
    limit: i64,
    now: DateTime<Utc>,
) -> StoreResult<Vec<Run>> {
    let claimed = tx.claim_runs(host, limit, now).await?;
    let events = claimed
        .iter()
        .map(|r| {
            let extra = json!({ "host": host.name, "session_name": r.session_name });
            (topic::RUN_SPAWNING, payload::run(r, extra))
        })
        .collect();
    tx.append_events(events, now).await?;
    Ok(claimed)
}

/// spawning → running (the worker's `started`): journals `run.started`.
pub async fn mark_running<W: RunWrites + ?Sized>(
    w: &mut W,
    run: &Run,
    now: DateTime<Utc>,
) -> StoreResult<Run> {
    let update = RunUpdate {
        started_at: Some(now),
        ..RunUpdate::default()
    };
    let r = w
        .write_transition(
            run.id,
            run.attempt,
            RunStatus::Spawning,
            RunStatus::Running,
            &update,
            now,
        )
        .await?;
    w.journal(topic::RUN_STARTED, payload::run(&r, json!({})), now)
        .await?;
    Ok(r)
}

/// The wrapper exited with `code` (the worker's `finished`): always
/// journals `run.finished` (any exit code). Exit 0 → exited; non-zero →
/// failed with no `run.failed` (one rule, no overlap) and the restart
/// decision; a run with a stop request → stopped (the worker confirming the
/// stop), journaling `run.stopped` too. A run still spawning (its `started`
/// was lost or merged away: the wrapper did run) passes through running.
///
/// `provider_failed`: the provider's own result reported failure this
/// attempt (a `failed` signal with `provider_failed` came first): an exit
/// code 0 is then a failure too, never a plain success. `message`: the
/// provider's last error text, for a failure (a message the provider's
/// hook already recorded is kept).
pub async fn finish<W: RunWrites + ?Sized>(
    w: &mut W,
    run: &Run,
    code: i32,
    (provider_failed, message): (bool, Option<&str>),
    now: DateTime<Utc>,
) -> StoreResult<Run> {
    let mut run = run.clone();
    if run.status == RunStatus::Spawning {
        run = mark_running(w, &run, now).await?;
    }
    // A run that reached its budget fails budget_exceeded,
    // whether the budget stop reached it or it ended first.
    let over_budget = usage::run_over_budget(&run);
    let to = if over_budget.is_some() {
        RunStatus::Failed
    } else if run.stop_requested {
        RunStatus::Stopped
    } else if code == 0 && !provider_failed {
        RunStatus::Exited
    } else {
        RunStatus::Failed
    };
    let done = if let Some(why) = over_budget.as_deref() {
        let reason = Some(FailureReason::BudgetExceeded);
        fail(w, &run, reason, Some(why), Some(code), false, now).await?
    } else if to == RunStatus::Failed {
        let message = message.filter(|_| run.failure_message.is_none());
        fail(w, &run, None, message, Some(code), false, now).await?
    } else {
        let update = RunUpdate {
            exit_code: Some(code),
            finished_at: Some(now),
            ..RunUpdate::default()
        };
        w.write_transition(run.id, run.attempt, RunStatus::Running, to, &update, now)
            .await?
    };
    w.journal(topic::RUN_FINISHED, finished_payload(&done, code), now)
        .await?;
    if to == RunStatus::Stopped {
        w.journal(
            topic::RUN_STOPPED,
            stopped_payload(&done, json!({ "exit_code": code })),
            now,
        )
        .await?;
    }
    Ok(done)
}

/// `run.finished`'s payload: the exit code, and what the attempt leaves
/// to read beside it — the provider's session id, how many tool calls
/// its permissions refused, the failure's words.
fn finished_payload(done: &Run, code: i32) -> serde_json::Value {
    let mut extra = json!({ "exit_code": code });
    if let Some(id) = &done.session_id {
        extra["session_id"] = json!(id);
    }
    if let Some(d) = &done.denials {
        extra["permission_denials"] = json!(d.count);
    }
    if let Some(m) = done
        .failure_message
        .as_deref()
        .filter(|_| done.status == RunStatus::Failed)
    {
        extra["message"] = json!(m);
    }
    payload::run(done, extra)
}

/// A provider's completion hook reported failure: journals `run.failed`
/// (cause `provider_failed`, with the provider's own words) and leaves the
/// status to the `finished` that follows. The caller keeps the words as
/// the run's `failure_message`.
pub async fn provider_failed<W: RunWrites + ?Sized>(
    w: &mut W,
    run: &Run,
    message: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut extra = json!({ "cause": "provider_failed" });
    if let Some(m) = message {
        extra["message"] = json!(m);
    }
    w.journal(topic::RUN_FAILED, payload::run(run, extra), now)
        .await
}

/// pending → stopped: a pending run with a stop request is stopped without
/// dispatch; journals `run.stopped`.
pub async fn stop_pending(tx: &mut dyn Tx, run: &Run, now: DateTime<Utc>) -> StoreResult<Run> {
    let r = tx
        .transition_run(
            run.id,
            run.attempt,
            RunStatus::Pending,
            RunStatus::Stopped,
            &RunUpdate::default(),
            now,
        )
        .await?;
    tx.append_event(topic::RUN_STOPPED, stopped_payload(&r, json!({})), now)
        .await?;
    Ok(r)
}

/// `run.stopped`'s payload, naming as `actor` who asked for the stop
/// (`Run::stopped_by`, kept by the request) — the event is
/// journaled outside that request.
fn stopped_payload(run: &Run, extra: serde_json::Value) -> serde_json::Value {
    let mut p = payload::run(run, extra);
    if let Some(actor) = &run.stopped_by {
        p["actor"] = actor.clone();
    }
    p
}

/// The dispatch timeout fired (OQ-15): pending → failed, never restarted.
/// The reason is `no_eligible_host` when no eligible host matched the
/// run's target while it waited (`eligible_host_seen`, or `matched_now`),
/// else `dispatch_timeout`. `why`: the run's last `Scheduled` message,
/// kept as its failure message.
pub async fn time_out(
    tx: &mut dyn Tx,
    run: &Run,
    matched_now: bool,
    why: &str,
    now: DateTime<Utc>,
) -> StoreResult<Run> {
    let reason = if run.eligible_host_seen || matched_now {
        FailureReason::DispatchTimeout
    } else {
        FailureReason::NoEligibleHost
    };
    fail(tx, run, Some(reason), Some(why), None, true, now).await
}

/// Records that an eligible host matched these pending runs' targets while
/// they waited (decides `no_eligible_host` vs `dispatch_timeout`, OQ-15).
pub async fn note_eligible_host(tx: &mut dyn Tx, ids: &[Uuid]) -> StoreResult<()> {
    tx.mark_eligible_host_seen(ids).await
}

/// The restart requeue (failed → pending, the only way back from failed):
/// `attempt` + 1, the per-attempt columns reset, `pending_since = now` — a
/// fresh dispatch-timeout window (OQ-15). The next attempt may land on any
/// eligible host, including after `host_lost` (OQ-12).
///
/// Journals `run.requeued` (a topic beyond the seed's list, which has none
/// for this edge): the new attempt, its `pending_since`, and what ended
/// the previous attempt (`previous_failure_reason`, `previous_exit_code`).
pub async fn requeue(tx: &mut dyn Tx, run: &Run, now: DateTime<Utc>) -> StoreResult<Run> {
    let r = tx.requeue_run(run.id, run.attempt, now).await?;
    let extra = json!({
        "pending_since": ts(r.pending_since),
        "previous_attempt": run.attempt,
        "previous_failure_reason": run.failure_reason.map(FailureReason::as_str),
        "previous_exit_code": run.exit_code,
    });
    tx.append_event(topic::RUN_REQUEUED, payload::run(&r, extra), now)
        .await?;
    Ok(r)
}
