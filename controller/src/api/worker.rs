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
//! Every body is checked by [`super::validate`] first (sizes, label rules,
//! session names in the protocol's format).

use std::time::Duration;

use crate::api::extract::{Json, Query};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pam_manifests::protocol::{
    DesiredRun, DesiredSet, Heartbeat, OutputSnapshot, RegisterRequest, RegisterResponse,
    SignalAck, SignalBatch, SignalResult,
};
use pam_manifests::state::RunStatus;
use pam_store::prelude::*;
use pam_store::{Host, Run};
use serde::Deserialize;
use serde_json::json;

use super::auth::Worker;
use super::retry::retry_conflicts;
use super::{validate, ApiError, AppState};
use crate::reconcile::{dispatch, ingest};
use crate::rules::runs::env;
use crate::rules::secrets::{Keyring, ResolveError};
use crate::rules::{hosts, runs};

/// The longest a claim long-poll may wait.
const MAX_CLAIM_WAIT: Duration = Duration::from_secs(60);

pub(super) async fn host_of(tx: &mut dyn Tx, w: &Worker) -> Result<Host, ApiError> {
    tx.by_name::<Host>((), &w.host)
        .await?
        .ok_or_else(|| not_registered(&w.host))
}

/// 409: the worker's host has no row yet (it registers first).
pub(super) fn not_registered(host: &str) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "not_registered",
        format!("host {host:?} has not registered yet"),
    )
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
/// ([`super::heartbeats`]).
pub async fn heartbeat(
    State(st): State<AppState>,
    w: Worker,
    Json(hb): Json<Heartbeat>,
) -> Result<Json<DesiredSet>, ApiError> {
    Ok(Json(heartbeat_of(&st, &w.host, hb).await?))
}

/// The heartbeat `hb` of `host`'s worker, sent as a request or on its
/// watch ([`super::watch`]): its desired set.
pub(super) async fn heartbeat_of(
    st: &AppState,
    host: &str,
    hb: Heartbeat,
) -> Result<DesiredSet, ApiError> {
    validate::heartbeat(&hb)?;
    super::heartbeats::beat(st, host, hb.instance_id).await
}

pub async fn desired(State(st): State<AppState>, w: Worker) -> Result<Json<DesiredSet>, ApiError> {
    Ok(Json(desired_of(&st, &w.host).await?))
}

/// The desired set of `host`, read by a request or on its worker's watch
/// ([`super::watch`]).
pub(super) async fn desired_of(st: &AppState, host: &str) -> Result<DesiredSet, ApiError> {
    let mut tx = st.ctx.store.begin().await?;
    let host = tx
        .by_name::<Host>((), host)
        .await?
        .ok_or_else(|| not_registered(host))?;
    let mut desired = desired_set(tx.as_mut(), &st.ctx.secrets, &host).await?;
    signals_into(st, &host, &mut desired);
    if !desired.runs.is_empty() {
        // In the read's transaction: no second one (issue 33).
        let runs: Vec<(uuid::Uuid, i32)> =
            desired.runs.iter().map(|r| (r.run_id, r.attempt)).collect();
        let mut input = tx.take_attach_input(&runs).await?;
        st.ctx.commit(tx).await?;
        attach_input(&mut desired, &mut input);
    }
    Ok(desired)
}

/// Puts the operator signals of each live run (all of them, every time:
/// the worker delivers each id once) into the set, and forgets those of
/// runs no longer in it.
pub(super) fn signals_into(st: &AppState, host: &Host, desired: &mut DesiredSet) {
    let live = desired.runs.iter().map(|r| r.run_id).collect();
    st.signals.forget_ended(host.id, &live);
    for r in &mut desired.runs {
        r.signals = st.signals.for_run(r.run_id, r.attempt);
    }
}

/// Puts the attach input taken from the store (handed out once, to
/// whichever request read the set first) into the set.
pub(super) fn attach_input(
    desired: &mut DesiredSet,
    input: &mut std::collections::HashMap<uuid::Uuid, Vec<String>>,
) {
    for r in &mut desired.runs {
        r.input = input.remove(&r.run_id).unwrap_or_default();
    }
}

/// The runs that should exist on a host: its spawning and running runs.
async fn desired_set(tx: &mut dyn Tx, ring: &Keyring, host: &Host) -> Result<DesiredSet, ApiError> {
    let live = runs::live(tx, Some(host.id)).await?;
    let mut runs = Vec::with_capacity(live.len());
    for r in &live {
        runs.push(with_env(tx, ring, r).await?);
    }
    Ok(DesiredSet { runs })
}

/// Whether [`with_env`] may read the store for `r`; when not, it is
/// [`desired_run`] alone.
fn reads_store(r: &Run) -> bool {
    let (vars, from) = env::env_of(&r.meta.spec);
    r.status == RunStatus::Spawning
        && (runs::workspace::may_have(r) || !vars.is_empty() || !from.is_empty())
}

/// A run as its worker gets it, with its environment (issue 18) while it
/// is spawning — the attempt about to start, on the host it was claimed
/// for; never once it runs. Values are opened here, in this request's
/// transaction. A Secret or key missing by now, or unreadable, is the
/// spawn's failure (`envError`): the run never starts without it.
pub(super) async fn with_env(
    tx: &mut dyn Tx,
    ring: &Keyring,
    r: &Run,
) -> Result<DesiredRun, ApiError> {
    let mut d = desired_run(r);
    if r.status != RunStatus::Spawning {
        return Ok(d);
    }
    // Issue 32: the worktree to prepare; a workspace that cannot be is
    // the spawn's failure, like an environment that cannot be built.
    match runs::workspace::order(tx, r).await? {
        Some(Ok((mut order, secret_ref))) => {
            if let Some(s) = secret_ref {
                match repository_credentials(tx, ring, r, &s).await {
                    Ok(c) => order.credentials = Some(c),
                    Err(ResolveError::Store(e)) => return Err(e.into()),
                    Err(e) => {
                        d.env_error = Some(format!("the repository's credentials: {e}"));
                        return Ok(d);
                    }
                }
            }
            d.workspace = Some(order);
        }
        Some(Err(why)) => d.env_error = Some(why),
        None => {}
    }
    let (vars, from) = env::env_of(&r.meta.spec);
    if vars.is_empty() && from.is_empty() {
        return Ok(d);
    }
    match env::environment(tx, ring, r).await {
        Ok(values) => d.env = values,
        Err(env::EnvError::Resolve(ResolveError::Store(e))) => return Err(e.into()),
        Err(e) => d.env_error = Some(e.to_string()),
    }
    Ok(d)
}

/// The two keys of a Project's repository `secretRef` (issue 32), opened
/// in this request's transaction like a run's environment.
async fn repository_credentials(
    tx: &mut dyn Tx,
    ring: &Keyring,
    r: &Run,
    s: &pam_manifests::kinds::RepositorySecretRef,
) -> Result<pam_manifests::protocol::GitCredentials, ResolveError> {
    let mut key = async |key: &str| {
        crate::rules::secrets::resolve(tx, ring, r.project_id, s.name.as_str(), key)
            .await
            .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    };
    let username = key(&s.username_key).await?;
    let password = key(&s.password_key).await?;
    Ok(pam_manifests::protocol::GitCredentials { username, password })
}

pub fn desired_run(r: &Run) -> DesiredRun {
    let command = r.meta.spec.get("command").and_then(|c| {
        c.as_array().map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
    });
    DesiredRun {
        run_id: r.id,
        attempt: r.attempt,
        session_name: r.session_name.clone(),
        provider: r.provider.clone(),
        prompt: r.prompt.clone(),
        cwd: r.cwd.clone(),
        command,
        env: Default::default(),
        env_error: None,
        stop: r.stop_requested,
        signals: Vec::new(),
        input: Vec::new(),
        workspace: None,
        permissions: r.permissions.as_ref().map(|p| p.permissions.clone()),
    }
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
    let runs = tokio::select! {
        r = dispatch::claim_wait(&st.ctx, host.id, q.max.unwrap_or(16), wait) => {
            r.map_err(ApiError::internal)?
        }
        // Something for the worker's desired set (a stop, a signal, attach
        // input): answer now, empty, so it fetches the set.
        _ = nudged => Vec::new(),
    };
    let mut set = DesiredSet {
        runs: Vec::with_capacity(runs.len()),
    };
    // A transaction only if some run's workspace or environment is read
    // (issue 33: a claim of plain runs costs no second one).
    let mut tx = None;
    for r in &runs {
        if !reads_store(r) {
            set.runs.push(desired_run(r));
            continue;
        }
        let tx = match &mut tx {
            Some(tx) => tx,
            None => tx.insert(st.ctx.store.begin().await?),
        };
        set.runs
            .push(with_env(tx.as_mut(), &st.ctx.secrets, r).await?);
    }
    Ok(Json(set))
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
    // The host is read in the batch's transaction (issue 33: no
    // transaction of its own per request).
    let outcome = ingest::ingest_as(&st.ctx, Ok(&w.host), &batch.signals).await?;
    match outcome.ok_or_else(|| not_registered(&w.host))? {
        ingest::BatchOutcome::Applied {
            results,
            budget_stops,
        } => {
            if budget_stops > 0 {
                // Issue 21: runs stopped at their budget: wake the
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
