//! The worker protocol, controller side (worker tokens only; a worker may
//! only act for the host its token is bound to):
//!
//! - `POST /api/v1/workers/register` — introduce the host (created on first
//!   registration), OQ-14 instance check, → online.
//! - `POST /api/v1/workers/heartbeat` — liveness + OQ-14; answers with the
//!   desired set.
//! - `GET  /api/v1/workers/desired` — the runs that should exist on this
//!   host, with attempt and stop flag.
//! - `POST /api/v1/workers/claim?wait=SECONDS` — long-poll: returns as soon
//!   as a run is claimable for this host (not on the next poll tick).
//! - `POST /api/v1/workers/signals` — a batch, applied in one transaction;
//!   per-signal applied / duplicate / stale (200), or 422 with the rejected
//!   ones when any is a protocol error (nothing applied), 403 when one is
//!   about a run of another host.
//! - `POST /api/v1/workers/snapshots` — pane text for the in-memory cache;
//!   the journal gets only line and byte counts; another host's run is 403.
//!
//! Every body is checked by [`crate::api::validate`] first (sizes, label rules,
//! session names in the protocol's format).

use std::time::Duration;

use crate::api::extract::{Json, Query};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pam_manifests::protocol::{
    DesiredSet, Heartbeat, OutputSnapshot, RegisterRequest, RegisterResponse, SignalAck,
    SignalBatch, SignalResult,
};
use pam_store::prelude::*;
use pam_store::Host;
use serde::Deserialize;
use serde_json::json;

use crate::api::access::auth::Worker;
use crate::api::{validate, ApiError, AppState};
use crate::fleet::FleetError;
use crate::reconcile::ingest;
use crate::retry::retry_conflicts;
use crate::rules::{hosts, runs};

/// The longest a claim long-poll may wait.
const MAX_CLAIM_WAIT: Duration = Duration::from_secs(60);

pub(crate) async fn host_of(tx: &mut dyn Tx, w: &Worker) -> Result<Host, ApiError> {
    tx.by_name::<Host>((), &w.host)
        .await?
        .ok_or_else(|| not_registered(&w.host))
}

/// 409: the worker's host has no row yet (it registers first).
pub(crate) fn not_registered(host: &str) -> ApiError {
    FleetError::NotRegistered(host.to_string()).into()
}

pub async fn register(
    State(st): State<AppState>,
    w: Worker,
    Json(req): Json<RegisterRequest>,
) -> Result<Json<RegisterResponse>, ApiError> {
    validate::register(&req)?;
    retry_conflicts(|| register_once(&st, &w, &req)).await
}

async fn register_once(
    st: &AppState,
    w: &Worker,
    req: &RegisterRequest,
) -> Result<Json<RegisterResponse>, ApiError> {
    if req.name != w.host {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "this worker token is for host {:?}, not {:?}",
                w.host, req.name
            ),
        ));
    }
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let host = hosts::register(tx.as_mut(), req, st.ctx.thresholds.offline_after, now).await?;
    st.ctx.commit(tx).await?;
    st.ctx.host_may_take_runs();
    Ok(Json(RegisterResponse {
        host_id: host.id,
        heartbeat_seconds: st.ctx.thresholds.heartbeat.as_secs(),
        instance_suspect: host.instance_suspect,
        protocol: Some(pam_manifests::protocol::PROTOCOL_VERSION),
    }))
}

/// Written with the other heartbeats waiting, in one transaction
/// ([`crate::fleet`]).
pub async fn heartbeat(
    State(st): State<AppState>,
    w: Worker,
    Json(hb): Json<Heartbeat>,
) -> Result<Json<DesiredSet>, ApiError> {
    Ok(Json(heartbeat_of(&st, &w.host, hb).await?))
}

/// The heartbeat `hb` of `host`'s worker, sent as a request or on its
/// watch ([`crate::api::workers::watch`]): its desired set.
pub(crate) async fn heartbeat_of(
    st: &AppState,
    host: &str,
    hb: Heartbeat,
) -> Result<DesiredSet, ApiError> {
    validate::heartbeat(&hb)?;
    Ok(st.fleet.heartbeat(&st.ctx, host, hb.instance_id).await?)
}

pub async fn desired(State(st): State<AppState>, w: Worker) -> Result<Json<DesiredSet>, ApiError> {
    Ok(Json(st.fleet.desired(&st.ctx, &w.host).await?))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimQuery {
    /// Seconds to wait for a claimable run (0 = don't wait).
    #[serde(default)]
    wait: Option<u64>,
    /// Most runs to claim at once.
    #[serde(default)]
    max: Option<i64>,
}

pub async fn claim(
    State(st): State<AppState>,
    w: Worker,
    Query(q): Query<ClaimQuery>,
) -> Result<Json<DesiredSet>, ApiError> {
    let host = {
        let mut tx = st.ctx.store.begin().await?;
        host_of(tx.as_mut(), &w).await?
    };
    if q.max.is_some_and(|m| m < 1) {
        return Err(ApiError::bad_request("max: must be at least 1"));
    }
    let wait = Duration::from_secs(q.wait.unwrap_or(0)).min(MAX_CLAIM_WAIT);
    let nudged = st.ctx.wakeups.nudge.notified();
    tokio::select! {
        r = st.fleet.claim(&st.ctx, &host, q.max.unwrap_or(16), wait) => Ok(Json(r?)),
        // Something for the worker's desired set (a stop, a signal, attach
        // input): answer now, empty, so it fetches the set.
        _ = nudged => Ok(Json(DesiredSet::default())),
    }
}

pub async fn signals(
    State(st): State<AppState>,
    w: Worker,
    Json(batch): Json<SignalBatch>,
) -> Result<Response, ApiError> {
    let invalid = validate::signal_batch(&batch)?;
    if !invalid.is_empty() {
        return Ok(rejected(StatusCode::UNPROCESSABLE_ENTITY, &invalid));
    }
    // The host is read in the batch's transaction (no
    // transaction of its own per request).
    let outcome = ingest::ingest_as(&st.ctx, Ok(&w.host), &batch.signals).await?;
    match outcome.ok_or_else(|| not_registered(&w.host))? {
        ingest::BatchOutcome::Applied {
            results,
            budget_stops,
        } => {
            if budget_stops > 0 {
                // Runs stopped at their budget: wake the
                // workers' long-polls so the stops reach them now.
                st.ctx.wakeups.nudge.notify_waiters();
            }
            Ok(Json(SignalAck { results }).into_response())
        }
        ingest::BatchOutcome::Rejected { results, foreign } => {
            let status = if foreign {
                StatusCode::FORBIDDEN
            } else {
                StatusCode::UNPROCESSABLE_ENTITY
            };
            Ok(rejected(status, &results))
        }
    }
}

/// The answer to a batch with rejected signals: the error shape, plus every
/// rejected signal's result (the worker settles its outbox from them).
fn rejected(status: StatusCode, results: &[SignalResult]) -> Response {
    let message = results
        .iter()
        .map(|r| {
            format!(
                "signal {}: {}",
                r.index,
                r.message.as_deref().unwrap_or("rejected")
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    let code = if status == StatusCode::FORBIDDEN {
        "forbidden"
    } else {
        "signal_rejected"
    };
    let body = json!({
        "error": { "code": code, "message": message },
        "results": results,
    });
    (status, Json(body)).into_response()
}

pub async fn snapshot(
    State(st): State<AppState>,
    w: Worker,
    Json(snap): Json<OutputSnapshot>,
) -> Result<StatusCode, ApiError> {
    validate::snapshot(&snap)?;
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let host = host_of(tx.as_mut(), &w).await?;
    let Some(run) = tx.get_run(snap.run_id).await? else {
        return Err(ApiError::not_found(format!(
            "run {} not found",
            snap.run_id
        )));
    };
    if !run.is_on_host(host.id) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!("run {} is not assigned to host {:?}", snap.run_id, w.host),
        ));
    }
    if snap.attempt != run.attempt {
        // An old attempt's output: not this run's now.
        return Ok(StatusCode::ACCEPTED);
    }
    // Output text never enters the events table: counts only.
    runs::output_appended(tx.as_mut(), &run, snap.lines, snap.bytes, now).await?;
    st.ctx.commit(tx).await?;
    st.snapshots.put(snap, now);
    Ok(StatusCode::NO_CONTENT)
}
