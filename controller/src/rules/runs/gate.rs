//! The dispatch gate of task dependencies.
//!
//! A task is *blocked* while any task of its `spec.dependsOn` is not
//! `done`. A pending run of a blocked task is not dispatched: the store
//! keeps `runs.dispatchable_since` NULL for it and the claim skips it (and
//! checks the links itself, so a dependency reopened a moment ago blocks
//! before this pass notices). The gate is level-triggered: [`pass`] runs in
//! every loop pass and reads only rows that need action (partial indexes
//! `runs_blocked`, `runs_dispatchable`).
//!
//! # Dispatch timeout (OQ-15)
//! The timeout counts from `dispatchable_since`: `pending_since` for a run
//! that was never blocked (the seed's anchor, reset on every requeue), or
//! the moment the last dependency became done. Waiting for dependencies
//! never expires a run; a blocked run has no timeout at all.
//!
//! # A cancelled dependency
//! A pending run waiting for a task that is `cancelled` fails with
//! `dependency_cancelled` (a pam extension to the seed's failure reasons),
//! never restarted, journaled in `run.failed` with the cancelled task's
//! name in `message`. The check is level-triggered too: a dependency
//! reopened (cancelled → todo) before the next pass keeps the run waiting.

use chrono::{DateTime, Utc};
use pam_manifests::state::FailureReason;
use pam_store::prelude::*;
use pam_store::{Meta, StoreResult};
use serde_json::json;
use uuid::Uuid;

use super::lifecycle;
use crate::clock::ts;
use crate::events::{payload, topic};
use crate::rules::meta;

/// The condition a pending run of a blocked task shows.
pub use pam_manifests::conditions::BLOCKED;

/// Runs failed for a cancelled dependency per pass (oldest ids first; the
/// rest next pass).
const BATCH: i64 = 1000;

/// What one gating pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct GatePass {
    /// Runs whose last dependency became done.
    pub unblocked: usize,
    /// Runs blocked again (a dependency reopened).
    pub blocked: usize,
    /// Runs failed with `dependency_cancelled`.
    pub dependency_cancelled: usize,
}

/// One pass of the gate: marks runs that became dispatchable (journals
/// `run.unblocked`) or blocked again (`run.blocked`), then fails the runs
/// that wait for a cancelled task.
pub async fn pass(tx: &mut dyn Tx, now: DateTime<Utc>) -> StoreResult<GatePass> {
    let gated = tx.refresh_dispatchable(now).await?;
    // One bulk append for the pass (the PostgreSQL store writes it in one
    // statement): a wave of unblocked runs costs one round trip.
    let mut events: Vec<(&'static str, serde_json::Value)> = gated
        .unblocked
        .iter()
        .map(|r| {
            let extra = json!({ "dispatchable_since": ts(now) });
            (topic::RUN_UNBLOCKED, payload::run(r, extra))
        })
        .collect();
    events.extend(
        gated
            .blocked
            .iter()
            .map(|r| (topic::RUN_BLOCKED, payload::run(r, json!({})))),
    );
    if !events.is_empty() {
        tx.append_events(events, now).await?;
    }
    let waiting = tx.runs_waiting_on_cancelled(BATCH).await?;
    for (run, dep) in &waiting {
        let message = format!("task {:?} it depends on was cancelled", dep.name);
        lifecycle::fail(
            tx,
            run,
            Some(FailureReason::DependencyCancelled),
            Some(&message),
            None,
            true,
            now,
        )
        .await?;
    }
    Ok(GatePass {
        unblocked: gated.unblocked.len(),
        blocked: gated.blocked.len(),
        dependency_cancelled: waiting.len(),
    })
}

/// Declares what `task` depends on (apply's writer): the links replace the
/// stored ones. Validation has refused cycles, other projects and the task
/// itself for the whole batch before anything is written.
pub async fn set_dependencies(tx: &mut dyn Tx, task_id: Uuid, on: &[Uuid]) -> StoreResult<()> {
    tx.set_dependencies(task_id, on).await
}

/// `meta` with the Blocked condition of a pending run that waits for
/// `waiting_for` (task names), as the API shows it; unchanged when it
/// waits for nothing. Derived when read, so it always names the tasks that
/// are not done *now*.
pub fn with_blocked_condition(meta: &Meta, waiting_for: &[String], since: DateTime<Utc>) -> Meta {
    let mut m = meta.clone();
    if !waiting_for.is_empty() {
        let message = format!("waiting for {} to be done", waiting_for.join(", "));
        meta::set_condition(
            &mut m,
            BLOCKED,
            true,
            "WaitingForDependencies",
            &message,
            since,
        );
    }
    m
}
