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
//!    NOTHING`); `progress` is ordered by `seq > last_progress_seq` instead;
//!    an `orphan` is journaled once per (host, session name): a report of a
//!    session the journal already names for the host is a `duplicate`.
//!
//! # Caveats
//! The orphan dedup reads the journal, so an orphan whose event retention
//! purged is journaled again when it is reported again (a still-live
//! orphan is worth a fresh event by then); two batches of one host racing
//! with the same orphan could both journal it (a worker sends one batch
//! at a time).
//!
//! A batch is one transaction. If any signal is rejected, nothing of the
//! batch is applied and the caller answers 4xx with every signal's outcome,
//! so the worker can drop the rejected ones and resend the rest. Events are
//! published only after commit.
//!
//! # Set-based
//! A batch costs a fixed handful of statements, not several per signal
//! (`controller/tests/set_based.rs` counts them: the same for
//! 2 signals as for 32):
//! 0. a worker's batch reads its host in the same transaction
//!    ([`ingest_as`]);
//! 1. one read locks the batch's runs (`FOR UPDATE`, in id order), one
//!    fetches their one-shot markers — with the rows locked, no concurrent
//!    batch, loop or API write can move these runs or add their markers
//!    until this transaction ends;
//! 2. every signal is decided in order against that state in memory
//!    ([`Staged`]) by the same rule functions every other path uses
//!    ([`crate::rules::runs::lifecycle`], each status step through the
//!    state-machine gate), a later signal of a run seeing what an earlier
//!    one did;
//! 3. one `INSERT … ON CONFLICT DO NOTHING` writes the new markers (and
//!    must insert every one of them: anything else is a Conflict and the
//!    batch is retried), one `UPDATE … FROM UNNEST` writes the changed
//!    runs guarded on their resource_version, one insert journals the
//!    events in signal order.

mod staged;

use chrono::{DateTime, Utc};
use pam_manifests::protocol::{Signal, SignalKind, SignalOutcome, SignalResult};
use pam_manifests::state::{FailureReason, RunStatus};
use serde_json::json;
use uuid::Uuid;

use pam_store::prelude::*;
use pam_store::{Host, Run, StoreError, StoreResult};

use crate::ctx::Ctx;
use crate::events::{payload, topic};
use crate::rules::runs::usage;
use crate::rules::runs::{self, lifecycle, RunWrites};
use staged::Staged;

/// The result of a batch.
#[derive(Debug)]
pub enum BatchOutcome {
    /// Committed; one result per signal. `budget_stops`: live runs the
    /// batch's usage reports took to their budget, stopped in the same
    /// transaction — the caller hands the stops to the workers.
    Applied {
        results: Vec<SignalResult>,
        budget_stops: usize,
    },
    /// Rolled back because at least one signal was rejected; results only
    /// for the rejected ones (the rest stay pending in the outbox).
    /// `foreign`: one of them is about a run of another host (the API
    /// answers 403 rather than 422).
    Rejected {
        results: Vec<SignalResult>,
        foreign: bool,
    },
}

/// How often a batch is decided again after a Conflict on write (the runs
/// are locked while it is decided, so this needs a write from outside the
/// locking discipline; retrying is still cheaper than failing the worker).
const CONFLICT_RETRIES: usize = 3;

pub async fn ingest(ctx: &Ctx, host: &Host, signals: &[Signal]) -> anyhow::Result<BatchOutcome> {
    let outcome = ingest_as(ctx, Err(host), signals).await?;
    Ok(outcome.expect("the host is given"))
}

/// [`ingest`] for `host` given (`Err`) or named (`Ok`): a named host is
/// read in the batch's own transaction (a worker's request: no
/// transaction of its own for the lookup); `None` when no such host is
/// registered.
pub async fn ingest_as(
    ctx: &Ctx,
    host: Result<&str, &Host>,
    signals: &[Signal],
) -> StoreResult<Option<BatchOutcome>> {
    let mut tries = 0;
    loop {
        tries += 1;
        match ingest_once(ctx, host, signals).await {
            Err(StoreError::Conflict(why)) if tries < CONFLICT_RETRIES => {
                tracing::debug!(%why, "signal batch conflicted; deciding it again");
            }
            r => return r,
        }
    }
}

async fn ingest_once(
    ctx: &Ctx,
    host: Result<&str, &Host>,
    signals: &[Signal],
) -> StoreResult<Option<BatchOutcome>> {
    let mut tx = ctx.store.begin().await?;
    // After the connection is ours: under load begin() waits for the pool,
    // and the events' times should say when the batch was applied.
    let now = ctx.now();
    let read = match host {
        Ok(name) => tx.by_name::<Host>((), name).await?,
        Err(_) => None,
    };
    let Some(host) = read.as_ref().or(host.err()) else {
        return Ok(None);
    };
    let mut ids: Vec<Uuid> = signals
        .iter()
        .filter(|s| s.kind != SignalKind::Orphan)
        .map(|s| s.run_id)
        .collect();
    ids.sort_unstable();
    ids.dedup();
    let (locked, markers) = tx.lock_runs_with_signals(&ids).await?;
    let mut staged = Staged::new(locked, markers, ctx.prices.clone());
    let mut orphans: Vec<String> = signals
        .iter()
        .filter(|s| s.kind == SignalKind::Orphan)
        .filter_map(|s| s.session_name.clone())
        .collect();
    orphans.sort_unstable();
    orphans.dedup();
    staged.orphans = tx
        .sessions_journaled(topic::RUN_ORPHAN_DETECTED, host.id, &orphans)
        .await?
        .into_iter()
        .collect();
    let mut results = Vec::with_capacity(signals.len());
    let mut rejected = false;
    for (index, sig) in signals.iter().enumerate() {
        let (outcome, message) = apply_one(tx.as_mut(), &mut staged, host, sig, now).await?;
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
        let foreign = results.iter().any(|r| {
            let sig = &signals[r.index];
            sig.kind != SignalKind::Orphan
                && staged
                    .runs
                    .get(&sig.run_id)
                    .is_some_and(|run| !run.is_on_host(host.id))
        });
        return Ok(Some(BatchOutcome::Rejected { results, foreign }));
    }
    let usage_deltas = std::mem::take(&mut staged.usage_deltas);
    // The runs this batch's reports took to their budget, as the
    // batch leaves them (their written resource_version is the guard).
    let mut over: Vec<Run> = usage_deltas
        .iter()
        .filter_map(|(id, ..)| staged.run(*id))
        .filter(|r| usage::run_over_budget(r).is_some())
        .collect();
    over.sort_by_key(|r| r.id);
    over.dedup_by_key(|r| r.id);
    staged.write(tx.as_mut(), now).await?;
    // Stopped through the normal stop path in the batch's own transaction:
    // the usage that crossed the budget and the stop commit together.
    let mut budget_stops = 0;
    for run in over {
        if runs::stop_over_budget(tx.as_mut(), run, now)
            .await?
            .is_some()
        {
            budget_stops += 1;
        }
    }
    ctx.commit(tx).await?;
    for (_, provider, project, delta) in &usage_deltas {
        ctx.metrics.usage(provider, *project, delta);
    }
    for r in &results {
        ctx.metrics.signal(r.outcome);
    }
    if results.iter().any(|r| r.outcome == SignalOutcome::Applied) {
        // A finished or failed run frees capacity on this host: its own
        // long-poll claims may claim again (not the whole fleet's). A
        // requeue or an unblocked dependent is the loops' to announce.
        ctx.host_freed(host.id);
        ctx.wakeups.loops.notify_one();
    }
    if budget_stops > 0 {
        ctx.wakeups.loops.notify_one();
    }
    Ok(Some(BatchOutcome::Applied {
        results,
        budget_stops,
    }))
}

type Applied = (SignalOutcome, Option<String>);

fn stale(why: &str) -> Applied {
    (SignalOutcome::Stale, Some(why.to_string()))
}

/// Decides one signal against the batch's staged state. `tx` only serves
/// reads outside the batch's runs (an orphan's session owner).
async fn apply_one(
    tx: &mut dyn Tx,
    st: &mut Staged,
    host: &Host,
    sig: &Signal,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    if sig.kind == SignalKind::Orphan {
        return orphan(tx, st, host, sig.session_name.as_deref(), now).await;
    }
    if let Err(e) = sig.validate() {
        return Ok((SignalOutcome::Rejected, Some(e.to_string())));
    }
    let Some(run) = st.run(sig.run_id) else {
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
    if !run.is_on_host(host.id) {
        return Ok((
            SignalOutcome::Rejected,
            Some(format!(
                "run {} is not assigned to host {}",
                run.name, host.name
            )),
        ));
    }
    match sig.kind {
        SignalKind::Progress => progress(st, &run, sig, now).await,
        SignalKind::Started => started(st, &run, now).await,
        SignalKind::Finished => finished(st, run, sig, now).await,
        SignalKind::Failed => failed(st, &run, sig, now).await,
        SignalKind::Lost => lost(st, &run, now).await,
        SignalKind::Orphan => unreachable!("handled above"),
    }
}

/// The one-shot dedup marker; `false` means already applied.
fn first_time(st: &mut Staged, run: &Run, kind: &str) -> bool {
    st.mark_processed(run, kind)
}

/// A one-shot signal for a run that is no longer live: a redelivery of one
/// that was applied is a `duplicate` (it ended the run), anything else is
/// `stale`. Read-only: no marker is written for a stale signal.
fn not_live(st: &Staged, run: &Run, kind: &str) -> Applied {
    if st.processed(run, kind) {
        DUPLICATE
    } else {
        stale("run is no longer live")
    }
}

const DUPLICATE: Applied = (SignalOutcome::Duplicate, None);
const APPLIED: Applied = (SignalOutcome::Applied, None);

/// `progress`: applied once per seq (above `last_progress_seq`): its
/// usage, what the agent did (activity, refused tool calls, the session
/// id).
async fn progress(
    st: &mut Staged,
    run: &Run,
    sig: &Signal,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    let Some(seq) = sig.seq else {
        return Ok((SignalOutcome::Rejected, Some("progress needs seq".into())));
    };
    if !run.status.is_live() {
        return Ok(stale("run is no longer live"));
    }
    if !st.advance_progress(run.id, run.attempt, seq) {
        return Ok(DUPLICATE);
    }
    // The attempt's usage so far replaces what was counted (the worker
    // counts each model call once); an older worker's step adds.
    match &sig.attempt_usage {
        Some(so_far) => st.record_usage(run.id, Some(so_far), true),
        None => st.record_usage(run.id, sig.usage.as_ref(), false),
    }
    st.record_activity(run.id, sig, now).await?;
    Ok(APPLIED)
}

async fn started(st: &mut Staged, run: &Run, now: DateTime<Utc>) -> StoreResult<Applied> {
    if run.status != RunStatus::Spawning {
        return Ok(if run.status == RunStatus::Running {
            DUPLICATE
        } else {
            not_live(st, run, "started")
        });
    }
    if !first_time(st, run, "started") {
        return Ok(DUPLICATE);
    }
    lifecycle::mark_running(st, run, now).await?;
    Ok(APPLIED)
}

/// `finished`: the wrapper exited ([`lifecycle::finish`]).
async fn finished(
    st: &mut Staged,
    run: Run,
    sig: &Signal,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    if !run.status.is_live() {
        return Ok(not_live(st, &run, "finished"));
    }
    if !first_time(st, &run, "finished") {
        return Ok(DUPLICATE);
    }
    st.record_usage(run.id, sig.usage.as_ref(), true);
    if sig.session_id.is_some() {
        st.record_activity(run.id, sig, now).await?;
    }
    let run = st.run(run.id).expect("locked above");
    // A provider that reported failure this attempt (`failed` with
    // provider_failed, applied before) never ends as a plain success.
    let provider_failed = st.processed(&run, "failed");
    let code = sig.exit_code.unwrap_or(-1);
    let how = (provider_failed, sig.message.as_deref());
    let done = lifecycle::finish(st, &run, code, how, now).await?;
    if let Some(r) = &sig.result {
        let row = runs::result::record(st, &done, sig.attempt, r, now).await?;
        st.results.push(row);
    }
    Ok(APPLIED)
}

/// `failed`: a spawn failure (the session or command never started) fails
/// the run with `spawn_failed`; a provider completion hook reporting
/// failure journals `run.failed` and leaves the status to the `finished`
/// that follows.
async fn failed(
    st: &mut Staged,
    run: &Run,
    sig: &Signal,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    let provider_hook = sig.reason.as_deref() == Some("provider_failed");
    let live = if provider_hook {
        run.status == RunStatus::Running
    } else {
        run.status.is_live()
    };
    if !live {
        return Ok(not_live(st, run, "failed"));
    }
    if !first_time(st, run, "failed") {
        return Ok(DUPLICATE);
    }
    if provider_hook {
        // The provider's own words: the run's message from now on.
        st.note_failure_message(run.id, sig.message.as_deref());
        lifecycle::provider_failed(st, run, sig.message.as_deref(), now).await?;
    } else {
        // The worker's words for why, carried into the run's
        // status and its run.failed event.
        let message = sig.message.as_deref();
        runs::fail(
            st,
            run,
            Some(FailureReason::SpawnFailed),
            message,
            None,
            true,
            now,
        )
        .await?;
    }
    Ok(APPLIED)
}

/// `lost`: the worker found the session gone without a `finished`.
async fn lost(st: &mut Staged, run: &Run, now: DateTime<Utc>) -> StoreResult<Applied> {
    if !run.status.is_live() {
        return Ok(not_live(st, run, "lost"));
    }
    if !first_time(st, run, "lost") {
        return Ok(DUPLICATE);
    }
    runs::fail(
        st,
        run,
        Some(FailureReason::SessionLost),
        None,
        None,
        true,
        now,
    )
    .await?;
    Ok(APPLIED)
}

/// An unmapped `pam-*` session on the worker's host: journaled once per
/// session (a repeated report is a `duplicate`), never killed by the
/// controller. The payload names the run when the session
/// name belongs to a run of this host (e.g. an older attempt).
async fn orphan(
    tx: &mut dyn Tx,
    st: &mut Staged,
    host: &Host,
    session: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<Applied> {
    let Some(session) = session else {
        return Ok((
            SignalOutcome::Rejected,
            Some("orphan needs session_name".into()),
        ));
    };
    if !st.orphans.insert(session.to_string()) {
        return Ok(DUPLICATE);
    }
    let owner = tx.get_run_by_session(host.id, session).await?;
    let p = payload::host(
        host,
        json!({
            "run_id": owner.as_ref().map(|r| r.id),
            "attempt": owner.as_ref().map(|r| r.attempt),
            "run": owner.as_ref().map(|r| r.name.as_str()),
            "session_name": session,
        }),
    );
    st.journal(topic::RUN_ORPHAN_DETECTED, p, now).await?;
    Ok(APPLIED)
}
