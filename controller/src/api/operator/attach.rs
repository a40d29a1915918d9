//! Attach endpoints (operator tokens), over [`crate::rules::leases`]:
//!
//! - `POST /api/v1/projects/{p}/runs/{name}/attach` `{"holder"?, "ttlSeconds"?}`
//!   → 201 the lease; 409 `lease_held` naming the holder when someone else
//!   holds it; 409 `conflict` when the run is not live.
//! - `POST …/attach/renew` `{"leaseId"}` → 200 the lease with a new expiry;
//!   404 `lease_not_held` when it expired or was released.
//! - `POST …/attach/release` `{"leaseId"}` → 204.
//! - `POST …/attach/input` `{"leaseId", "text"}` → 202; the text is typed
//!   into the run's pane (then Enter) by its worker.
//!
//! The pane streams back through `GET …/runs/{name}/output`.
//!
//! A lease ends with its acquirer's token: revoking the token releases it
//! within a second, journaled `run.lease_released` with `reason: revoked`
//! ([`release_revoked`]).

use std::time::Duration;

use crate::api::extract::{Json, Path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::api::access::auth::Operator;
use crate::rules::leases::{self, Lease, LeaseError, DEFAULT_TTL, MAX_TTL};

use crate::api::operator::runs::{must_be_live, run_named};
use crate::api::{ApiError, AppState};
use crate::clock::ts;

type ApiResult<T> = Result<T, ApiError>;

/// Most bytes of one input line.
const MAX_INPUT: usize = 64 * 1024;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AcquireBody {
    holder: Option<String>,
    ttl_seconds: Option<u64>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaseBody {
    lease_id: Uuid,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct InputBody {
    lease_id: Uuid,
    text: String,
}

fn lease_json(l: &Lease) -> Value {
    json!({
        "leaseId": l.id,
        "runId": l.run_id,
        "attempt": l.attempt,
        "holder": l.holder,
        "ttlSeconds": l.ttl.as_secs(),
        "acquiredAt": ts(l.acquired_at),
        "expiresAt": ts(l.expires_at),
    })
}

fn lease_error(e: LeaseError) -> ApiError {
    match e {
        LeaseError::Held(l) => ApiError::new(
            StatusCode::CONFLICT,
            "lease_held",
            format!(
                "run is attached by {:?} until {} (lease {})",
                l.holder,
                ts(l.expires_at),
                l.id
            ),
        ),
        LeaseError::NotHeld => ApiError::new(
            StatusCode::NOT_FOUND,
            "lease_not_held",
            "no such lease on this run: it expired or was released",
        ),
        LeaseError::Backlog => ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "input_backlog",
            "too much input is waiting for the run's worker",
        ),
    }
}

pub async fn acquire(
    State(st): State<AppState>,
    Operator(op): Operator,
    Path((slug, name)): Path<(String, String)>,
    body: Option<Json<AcquireBody>>,
) -> ApiResult<Response> {
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let ttl = match body.ttl_seconds {
        None => DEFAULT_TTL,
        Some(s) if s >= 1 && Duration::from_secs(s) <= MAX_TTL => Duration::from_secs(s),
        Some(s) => {
            return Err(ApiError::bad_request(format!(
                "ttlSeconds {s} is out of range, expected 1..={}",
                MAX_TTL.as_secs()
            )))
        }
    };
    let holder = match body.holder.map(|h| h.trim().to_string()) {
        Some(h) if !h.is_empty() && h.len() <= 200 => h,
        Some(_) => return Err(ApiError::bad_request("holder must be 1 to 200 characters")),
        None => op.name().to_string(),
    };
    let run = run_named(&st, &slug, &name).await?;
    must_be_live(&run, &name, "attached")?;
    let mut tx = st.ctx.store.begin().await?;
    let lease = leases::acquire(
        tx.as_mut(),
        leases::Acquirer {
            run_id: run.id,
            attempt: run.attempt,
            holder: &holder,
            token_id: op.token_id(),
            ttl,
        },
        st.ctx.now(),
    )
    .await?
    .map_err(lease_error)?;
    st.ctx.commit(tx).await?;
    Ok((StatusCode::CREATED, Json(lease_json(&lease))).into_response())
}

pub async fn renew(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Json(body): Json<LeaseBody>,
) -> ApiResult<Json<Value>> {
    let run = run_named(&st, &slug, &name).await?;
    let mut tx = st.ctx.store.begin().await?;
    let lease = leases::renew(tx.as_mut(), run.id, body.lease_id, st.ctx.now())
        .await?
        .map_err(lease_error)?;
    st.ctx.commit(tx).await?;
    Ok(Json(lease_json(&lease)))
}

pub async fn release(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Json(body): Json<LeaseBody>,
) -> ApiResult<StatusCode> {
    let run = run_named(&st, &slug, &name).await?;
    let mut tx = st.ctx.store.begin().await?;
    leases::release(tx.as_mut(), run.id, body.lease_id, st.ctx.now())
        .await?
        .map_err(lease_error)?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn input(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Json(body): Json<InputBody>,
) -> ApiResult<Response> {
    if body.text.len() > MAX_INPUT || body.text.contains(['\n', '\r']) {
        return Err(ApiError::bad_request(format!(
            "text must be one line of at most {MAX_INPUT} bytes (Enter is sent after it)"
        )));
    }
    let run = run_named(&st, &slug, &name).await?;
    let mut tx = st.ctx.store.begin().await?;
    leases::push_input(tx.as_mut(), run.id, body.lease_id, &body.text, st.ctx.now())
        .await?
        .map_err(lease_error)?;
    st.ctx.commit(tx).await?;
    // Input journals nothing: its host's watch is woken from here.
    if let Some(h) = run.host_id {
        st.ctx.wakeups.watches.changed(h);
    }
    st.ctx.wakeups.nudge.notify_waiters();
    Ok((StatusCode::ACCEPTED, Json(json!({ "accepted": true }))).into_response())
}

/// Releases the leases that ran out (journaled `run.lease_released`,
/// reason `expired`) once a second, and the leases of revoked tokens as
/// soon as one is found revoked ([`release_revoked`]), until the task is
/// aborted.
pub async fn expire_loop(st: AppState) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = st.revocations.revoked_any() => {}
        }
        if let Err(e) = end_leases(&st, Ending::Expired).await {
            tracing::debug!(error = %e.message, "releasing expired attach leases failed; retrying");
        }
        release_revoked(&st).await;
    }
}

/// Releases every lease whose acquirer's token has been revoked, journaling
/// `run.lease_released` with `reason: revoked`. Called by the revoke
/// handler (this pamd's revocations, at once) and by [`expire_loop`] (the
/// token re-check's, e.g. a revocation through another replica).
pub async fn release_revoked(st: &AppState) {
    match end_leases(st, Ending::Revoked).await {
        Ok(gone) => {
            for lease in gone {
                tracing::info!(run_id = %lease.run_id, holder = %lease.holder, "attach lease released: its token was revoked");
            }
        }
        Err(e) => {
            tracing::debug!(error = %e.message, "releasing revoked attach leases failed; retrying")
        }
    }
}

/// Which leases [`end_leases`] ends.
enum Ending {
    Expired,
    Revoked,
}

/// Ends leases (each journaled by its rule) in one committed transaction.
async fn end_leases(st: &AppState, which: Ending) -> ApiResult<Vec<Lease>> {
    let mut tx = st.ctx.store.begin().await?;
    let now = st.ctx.now();
    let gone = match which {
        Ending::Expired => leases::expire(tx.as_mut(), now).await?,
        Ending::Revoked => leases::release_revoked(tx.as_mut(), now).await?,
    };
    st.ctx.commit(tx).await?;
    Ok(gone)
}
