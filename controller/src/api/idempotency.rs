//! `Idempotency-Key`: a POST carrying the header is done once
//! per (caller, key). The layer claims the key in PostgreSQL before the
//! handler runs and stores the answer after; a retry with the same key
//! and the same request (method, path and query, body) within 24 h gets
//! the stored status and body back (`Idempotent-Replayed: true`) without
//! the work being done again — through any pamd replica, after a restart.
//!
//! # Answers
//! - The same key with a different request: 422 `idempotency_key_reused`.
//! - The same request while the first is still being worked on (a client
//!   that timed out and retried at once): 409 `idempotency_in_progress`
//!   with `Retry-After: 1`; retrying later gets the stored answer.
//! - An answer that holds a credential (`POST /api/v1/tokens`) is never
//!   stored (the agent-platform seed's rule): its replay is 409
//!   `idempotency_conflict` saying so.
//! - A 5xx (and a 401 or 429: nothing was done) is not stored: the key is
//!   released and a retry does the work.
//!
//! # Caveats
//! - A pamd that dies between the handler's commit and storing the answer
//!   leaves the key claimed; after [`CLAIM_LEASE`] a retry takes it over
//!   and does the work again (apply is idempotent by itself; a second
//!   `run start` would start a second run).
//! - The caller is its bearer token (its fingerprint): another token's
//!   keys never collide with it, and a revoked token gets no replay (the
//!   token is checked before the key).

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use pam_store::{Claimed, IdempotencyClaim};
use sha2::{Digest, Sha256};

use crate::api::{ApiError, AppState};
use crate::rules::tokens::fingerprint;

/// How long an answer is replayed.
pub const REPLAY_WINDOW: chrono::Duration = chrono::Duration::hours(24);
/// A claim without an answer this old is abandoned (its pamd died).
pub const CLAIM_LEASE: chrono::Duration = chrono::Duration::minutes(5);
/// The longest key accepted.
pub const KEY_MAX_BYTES: usize = 255;
/// Routes whose answers hold a credential: never stored.
const CREDENTIAL_ROUTES: [&str; 1] = ["/api/v1/tokens"];

fn hex_sha256(parts: &[&[u8]]) -> String {
    let mut h = Sha256::new();
    for p in parts {
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    hex::encode(h.finalize())
}

fn error(status: StatusCode, code: &'static str, message: String) -> Response {
    ApiError::new(status, code, message).into_response()
}

/// The layer (see the module doc); every request that is not a POST
/// with the header passes untouched.
pub async fn layer(State(st): State<AppState>, req: Request, next: Next) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let Some(key) = req.headers().get("idempotency-key") else {
        return next.run(req).await;
    };
    let key = match key.to_str() {
        Ok(k)
            if !k.is_empty()
                && k.len() <= KEY_MAX_BYTES
                && k.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            k.to_string()
        }
        _ => {
            return ApiError::bad_request(format!(
                "Idempotency-Key: expected 1 to {KEY_MAX_BYTES} visible ASCII characters (a UUID)"
            ))
            .into_response()
        }
    };
    let bearer = crate::api::access::auth::bearer(req.headers());
    let Some(principal) = bearer.map(fingerprint) else {
        // Unauthenticated: the handler refuses it.
        return next.run(req).await;
    };
    // A revoked or unknown token gets no stored answer either.
    let header = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let peer = crate::api::access::auth::peer(req.extensions());
    if let Err(e) = crate::api::access::auth::authenticate(&st, header.as_deref(), peer).await {
        return e.into_response();
    }
    let (parts, body) = req.into_parts();
    let bytes = match axum::body::to_bytes(body, st.max_body_bytes).await {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("cannot read the request body: {e}"),
            )
        }
    };
    let path = parts.uri.path().to_string();
    let target = parts
        .uri
        .path_and_query()
        .map_or(path.as_str(), |p| p.as_str())
        .to_string();
    let claim = IdempotencyClaim {
        principal,
        key_hash: hex_sha256(&[key.as_bytes()]),
        request_hash: hex_sha256(&[parts.method.as_str().as_bytes(), target.as_bytes(), &bytes]),
        now: st.ctx.now(),
        expires_at: st.ctx.now() + REPLAY_WINDOW,
        stale_before: st.ctx.now() - CLAIM_LEASE,
    };
    let claimed = async {
        let mut tx = st.ctx.store.begin().await?;
        let c = tx.claim_idempotency_key(&claim).await?;
        st.ctx.commit(tx).await?;
        pam_store::StoreResult::Ok(c)
    };
    let claimed = match claimed.await {
        Ok(c) => c,
        Err(e) => return ApiError::from(e).into_response(),
    };
    match claimed {
        Claimed::New => {}
        Claimed::Answered {
            status,
            body: Some(body),
            content_type,
        } => {
            let mut resp = Response::new(Body::from(body));
            *resp.status_mut() =
                StatusCode::from_u16(u16::try_from(status).unwrap_or(500)).unwrap_or(StatusCode::OK);
            if let Some(ct) = content_type.and_then(|c| HeaderValue::from_str(&c).ok()) {
                resp.headers_mut().insert("content-type", ct);
            }
            resp.headers_mut()
                .insert("idempotent-replayed", HeaderValue::from_static("true"));
            return resp;
        }
        Claimed::Answered { body: None, .. } => {
            return error(
                StatusCode::CONFLICT,
                "idempotency_conflict",
                format!("Idempotency-Key {key:?} was used for this request already, and its answer held a credential, which pamd never stores; use a new key"),
            )
        }
        Claimed::InProgress => {
            let mut resp = error(
                StatusCode::CONFLICT,
                "idempotency_in_progress",
                format!("a request with Idempotency-Key {key:?} is still in progress; retry shortly to get its answer"),
            );
            resp.headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            return resp;
        }
        Claimed::Mismatch => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "idempotency_key_reused",
                format!("Idempotency-Key {key:?} was used for a different request (method, path or body) within the last 24 h; use a new key for a new request"),
            )
        }
    }
    // The work and the answer's storing run in their own task: a client
    // that gives up (its timeout) drops this request's future, but the
    // work it started is finished and its answer stored, for the retry.
    let work = tokio::spawn(finish(
        st,
        claim,
        path,
        next,
        Request::from_parts(parts, Body::from(bytes)),
    ));
    match work.await {
        Ok(resp) => resp,
        Err(e) => ApiError::internal(format!("the request's task failed: {e}")).into_response(),
    }
}

/// Runs the handler for a claimed key and stores (or releases) the key
/// with its answer.
async fn finish(
    st: AppState,
    claim: IdempotencyClaim,
    path: String,
    next: Next,
    req: Request,
) -> Response {
    let resp = next.run(req).await;
    let (rparts, rbody) = resp.into_parts();
    let rbytes = match axum::body::to_bytes(rbody, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            release(&st, &claim).await;
            return ApiError::internal(format!("cannot read the answer: {e}")).into_response();
        }
    };
    let status = rparts.status;
    let not_done = status.is_server_error()
        || status == StatusCode::UNAUTHORIZED
        || status == StatusCode::TOO_MANY_REQUESTS;
    if not_done {
        release(&st, &claim).await;
    } else {
        let stored_body = (!CREDENTIAL_ROUTES.contains(&path.as_str())).then_some(&rbytes[..]);
        let ct = rparts
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok());
        let answered = async {
            let mut tx = st.ctx.store.begin().await?;
            tx.answer_idempotency_key(
                &claim.principal,
                &claim.key_hash,
                i32::from(status.as_u16()),
                stored_body,
                ct,
            )
            .await?;
            st.ctx.commit(tx).await?;
            pam_store::StoreResult::Ok(())
        };
        if let Err(e) = answered.await {
            tracing::warn!(error = %e, "cannot store an idempotent answer; a retry will find the key claimed");
        }
    }
    Response::from_parts(rparts, Body::from(rbytes))
}

async fn release(st: &AppState, c: &IdempotencyClaim) {
    let released = async {
        let mut tx = st.ctx.store.begin().await?;
        tx.release_idempotency_key(&c.principal, &c.key_hash)
            .await?;
        st.ctx.commit(tx).await?;
        pam_store::StoreResult::Ok(())
    };
    if let Err(e) = released.await {
        tracing::warn!(error = %e, "cannot release an idempotency key");
    }
}
