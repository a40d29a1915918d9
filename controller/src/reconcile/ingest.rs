//! Signal ingest: how worker reports change runs (pam-data-model.txt,
//! processed_signals and Run topic rules).
//!
//! For each signal, strictly before any status write or event:
//! 1. the stale-epoch guard — an attempt lower than the run's comes from a
//!    dead incarnation: dropped (`stale`), no write, no event; a higher one
//!    is impossible under central issuance: a protocol error (`rejected`);
//! 2. ownership — a worker may only report on runs of its own host;
//! 3. dedup — one-shot kinds (`started`, `finished`, `failed`, `lost`) are
//!    exactly-once through `processed_signals` (`INSERT … ON CONFLICT DO
//!    NOTHING`); `progress` is ordered by `seq > last_progress_seq` instead.
//!
//! A batch is one transaction. If any signal is rejected, nothing of the
//! batch is applied and the caller answers 4xx with every signal's outcome,
//! so the worker can drop the rejected ones and resend the rest. Events are
//! published only after commit.

use chrono::{DateTime, Utc};
use pam_manifests::protocol::{Signal, SignalKind, SignalOutcome, SignalResult};
use pam_manifests::state::{FailureReason, RunStatus};
use serde_json::json;

use super::{runs, Ctx};
use crate::events::topic;
use crate::store::{Host, Run, RunUpdate, StoreResult, Tx};

/// The result of a batch.
#[derive(Debug)]
pub enum BatchOutcome {
    /// Committed; one result per signal.
    Applied(Vec<SignalResult>),
    /// Rolled back because at least one signal was rejected; results only
    /// for the rejected ones (the rest stay pending in the outbox).
    Rejected(Vec<SignalResult>),
}

pub async fn ingest(ctx: &Ctx, host: &Host, signals: &[Signal]) -> anyhow::Result<BatchOutcome> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let mut results = Vec::with_capacity(signals.len());
    let mut rejected = false;
    for (index, sig) in signals.iter().enumerate() {
        let (outcome, message) = apply_one(tx.as_mut(), host, sig, now).await?;
        rejected |= outcome == SignalOutcome::Rejected;
        results.push(SignalResult {
            index,
            outcome,
            message,
        });
    }
    if rejected {
        drop(tx);
        // Only the rejected signals get a result: the others were not
        // applied and stay in the worker's outbox (a short ack).
        results.retain(|r| r.outcome == SignalOutcome::Rejected);
        for r in &results {
            ctx.metrics.signal(r.outcome);
        }
        return Ok(BatchOutcome::Rejected(results));
    }
    ctx.commit(tx).await?;
    for r in &results {
        ctx.metrics.signal(r.outcome);
    }
    if results.iter().any(|r| r.outcome == SignalOutcome::Applied) {
        // A finished or failed run frees capacity and may be requeued.
        ctx.claimable.notify_waiters();
        ctx.wake.notify_one();
    }
    Ok(BatchOutcome::Applied(results))
}

type Applied = (SignalOutcome, Option<String>);

fn stale(why: &str) -> Applied {
    (SignalOutcome::Stale, Some(why.to_string()))
}

async fn apply_one(
    tx: &mut dyn Tx,
    host: &Host,
    sig: &Signal,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    if sig.kind == SignalKind::Orphan {
        return orphan(tx, host, sig, now).await;
    }
    if let Err(e) = sig.validate() {
        return Ok((SignalOutcome::Rejected, Some(e.to_string())));
    }
    let Some(run) = tx.get_run(sig.run_id).await? else {
        // Deleted since: nothing to apply, and nothing to keep retrying.
        return Ok(stale("run no longer exists"));
    };
    if sig.attempt < run.attempt {
        return Ok(stale("attempt is older than the run's: a dead incarnation"));
    }
    if sig.attempt > run.attempt {
        return Ok((
            SignalOutcome::Rejected,
            Some(format!(
                "attempt {} is ahead of the run's attempt {}: attempts are issued by the controller",
                sig.attempt, run.attempt
            )),
        ));
    }
    if run.host_id != Some(host.id) {
        return Ok((
            SignalOutcome::Rejected,
            Some(format!(
                "run {} is not assigned to host {}",
                run.name, host.name
            )),
        ));
    }
    match sig.kind {
        SignalKind::Progress => progress(tx, &run, sig).await,
        SignalKind::Started => started(tx, &run, now).await,
        SignalKind::Finished => finished(tx, run, sig, now).await,
        SignalKind::Failed => failed(tx, &run, sig, now).await,
        SignalKind::Lost => lost(tx, &run, now).await,
        SignalKind::Orphan => unreachable!("handled above"),
    }
}

/// The one-shot dedup marker; `false` means already applied.
async fn first_time(
    tx: &mut dyn Tx,
    run: &Run,
    kind: &str,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    tx.mark_signal_processed(run.id, run.attempt, kind, now)
        .await
}

/// A one-shot signal for a run that is no longer live: a redelivery of one
/// that was applied is a `duplicate` (it ended the run), anything else is
/// `stale`. Read-only: no marker is written for a stale signal.
async fn not_live(tx: &mut dyn Tx, run: &Run, kind: &str) -> StoreResult<Applied> {
    if tx.signal_processed(run.id, run.attempt, kind).await? {
        Ok(DUPLICATE)
    } else {
        Ok(stale("run is no longer live"))
    }
}

const DUPLICATE: Applied = (SignalOutcome::Duplicate, None);
const APPLIED: Applied = (SignalOutcome::Applied, None);

async fn progress(tx: &mut dyn Tx, run: &Run, sig: &Signal) -> StoreResult<Applied> {
    let Some(seq) = sig.seq else {
        return Ok((SignalOutcome::Rejected, Some("progress needs seq".into())));
    };
    if !matches!(run.status, RunStatus::Spawning | RunStatus::Running) {
        return Ok(stale("run is no longer live"));
    }
    if tx.advance_progress(run.id, run.attempt, seq).await? {
        Ok(APPLIED)
    } else {
        Ok(DUPLICATE)
    }
}

async fn started(tx: &mut dyn Tx, run: &Run, now: DateTime<Utc>) -> StoreResult<Applied> {
    if run.status != RunStatus::Spawning {
        return if run.status == RunStatus::Running {
            Ok(DUPLICATE)
        } else {
            not_live(tx, run, "started").await
        };
    }
    if !first_time(tx, run, "started", now).await? {
        return Ok(DUPLICATE);
    }
    mark_running(tx, run, now).await?;
    Ok(APPLIED)
}

async fn mark_running(tx: &mut dyn Tx, run: &Run, now: DateTime<Utc>) -> StoreResult<Run> {
    let update = RunUpdate {
        started_at: Some(now),
        ..RunUpdate::default()
    };
    let r = tx
        .transition_run(
            run.id,
            run.attempt,
            RunStatus::Spawning,
            RunStatus::Running,
            &update,
            now,
        )
        .await?;
    tx.append_event(topic::RUN_STARTED, runs::payload(&r, json!({})), now)
        .await?;
    Ok(r)
}

/// `finished` always journals `run.finished` (any exit code). Exit 0 →
/// exited; non-zero → failed with no `run.failed` (one rule, no overlap); a
/// run with a stop request → stopped (the worker confirming the stop).
async fn finished(
    tx: &mut dyn Tx,
    mut run: Run,
    sig: &Signal,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    if !matches!(run.status, RunStatus::Spawning | RunStatus::Running) {
        return not_live(tx, &run, "finished").await;
    }
    if !first_time(tx, &run, "finished", now).await? {
        return Ok(DUPLICATE);
    }
    if run.status == RunStatus::Spawning {
        // `started` was lost or merged away; the wrapper did run.
        run = mark_running(tx, &run, now).await?;
    }
    let code = sig.exit_code.unwrap_or(-1);
    let to = if run.stop_requested {
        RunStatus::Stopped
    } else if code == 0 {
        RunStatus::Exited
    } else {
        RunStatus::Failed
    };
    let done = if to == RunStatus::Failed {
        runs::fail(tx, &run, None, Some(code), false, now).await?
    } else {
        let update = RunUpdate {
            exit_code: Some(code),
            finished_at: Some(now),
            ..RunUpdate::default()
        };
        tx.transition_run(run.id, run.attempt, RunStatus::Running, to, &update, now)
            .await?
    };
    tx.append_event(
        topic::RUN_FINISHED,
        runs::payload(&done, json!({ "exit_code": code })),
        now,
    )
    .await?;
    if to == RunStatus::Stopped {
        tx.append_event(
            topic::RUN_STOPPED,
            runs::payload(&done, json!({ "exit_code": code })),
            now,
        )
        .await?;
    }
    Ok(APPLIED)
}

/// `failed`: a spawn failure (the session or command never started) fails
/// the run with `spawn_failed`; a provider completion hook reporting
/// failure journals `run.failed` and leaves the status to the `finished`
/// that follows.
async fn failed(
    tx: &mut dyn Tx,
    run: &Run,
    sig: &Signal,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    let provider_hook = sig.reason.as_deref() == Some("provider_failed");
    let live = if provider_hook {
        run.status == RunStatus::Running
    } else {
        matches!(run.status, RunStatus::Spawning | RunStatus::Running)
    };
    if !live {
        return not_live(tx, run, "failed").await;
    }
    if !first_time(tx, run, "failed", now).await? {
        return Ok(DUPLICATE);
    }
    if provider_hook {
        tx.append_event(
            topic::RUN_FAILED,
            runs::payload(run, json!({ "cause": "provider_failed" })),
            now,
        )
        .await?;
    } else {
        runs::fail(tx, run, Some(FailureReason::SpawnFailed), None, true, now).await?;
    }
    Ok(APPLIED)
}

/// `lost`: the worker found the session gone without a `finished`.
async fn lost(tx: &mut dyn Tx, run: &Run, now: DateTime<Utc>) -> StoreResult<Applied> {
    if !matches!(run.status, RunStatus::Spawning | RunStatus::Running) {
        return not_live(tx, run, "lost").await;
    }
    if !first_time(tx, run, "lost", now).await? {
        return Ok(DUPLICATE);
    }
    runs::fail(tx, run, Some(FailureReason::SessionLost), None, true, now).await?;
    Ok(APPLIED)
}

/// An unmapped `pam-*` session on the worker's host: journaled, never
/// killed by the controller. The payload names the run when the session
/// name belongs to a run of this host (e.g. an older attempt).
async fn orphan(
    tx: &mut dyn Tx,
    host: &Host,
    sig: &Signal,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    let Some(session) = sig.session_name.as_deref() else {
        return Ok((
            SignalOutcome::Rejected,
            Some("orphan needs session_name".into()),
        ));
    };
    let owner = tx.get_run_by_session(host.id, session).await?;
    let payload = json!({
        "run_id": owner.as_ref().map(|r| r.id),
        "attempt": owner.as_ref().map(|r| r.attempt),
        "host_id": host.id,
        "host": host.name,
        "session_name": session,
    });
    tx.append_event(topic::RUN_ORPHAN_DETECTED, payload, now)
        .await?;
    Ok(APPLIED)
}
