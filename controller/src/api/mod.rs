//! The HTTP API (axum). [`router`] builds the whole app from an
//! [`AppState`], so tests drive it with `tower::ServiceExt::oneshot` and
//! pamd serves the same router on its listener.
//!
//! Every error leaves as [`ApiError`]: `{"error": {"code", "message"}}`.
//!
//! HTTP only: a handler parses the request, looks objects up
//! ([`lookup`]), calls a rule (`crate::rules`), apply or the loops'
//! entry points, commits through [`Ctx::commit`] and renders
//! ([`objects`]). No handler changes a row by hand.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use extract::Json;
use pam_store::{Store, StoreError};
use serde_json::json;

use crate::clock::SharedClock;
use crate::ctx::{Ctx, Thresholds};

pub mod access;
pub mod chunks;
pub mod dashboard;
pub mod extract;
pub mod guard;
pub mod idempotency;
pub mod logs;
pub mod metrics;
pub mod operator;
pub mod routes;
pub mod snapshots;
pub mod source_hooks;
pub mod stream;
pub mod upgraded;
pub mod validate;
pub mod workers;

/// What every handler can reach.
#[derive(Clone)]
pub struct AppState {
    /// Store, the clock, event bus, thresholds and wake-ups, shared with
    /// the loops.
    pub ctx: Ctx,
    /// Latest output per run (memory only).
    pub snapshots: snapshots::SnapshotCache,
    /// Runs' logs and transcripts read from their workers: the reads in
    /// flight, the cache, the archive (`[logs]`).
    pub logs: Arc<logs::Logs>,
    /// What the workers see: desired sets, claims, heartbeats, operator
    /// signals waiting for their worker.
    pub fleet: crate::fleet::Fleet,
    /// The tokens open streams and leases hold: revoking one ends them.
    pub revocations: access::revocation::Revocations,
    /// The per-token rate limits (this replica's buckets).
    pub limits: Arc<access::rate_limit::Limiter>,
    /// The largest body apply and diff accept (`[api] max_body_bytes`).
    pub max_body_bytes: usize,
    /// Push deliveries seen lately (a replay is refused).
    pub hook_deliveries: Arc<source_hooks::Seen>,
    /// Where the Sources' trees are read from (pamd's; `None` in an
    /// in-process router): `diff source` reads through it.
    pub repos: Option<crate::sync::fetch::Repos>,
    /// Dashboard sign-in with OIDC (`[oidc]`), with this pamd's
    /// sessions; None: bearer tokens only.
    pub oidc: Option<Arc<access::oidc::Oidc>>,
    /// `[metrics] require_token`: `/metrics` needs an admin or metrics
    /// token.
    pub metrics_require_token: bool,
    /// Tokens' uses waiting to be written.
    pub token_uses: Arc<access::token_uses::TokenUses>,
    /// Bearer tokens waiting to be looked up, by fingerprint
    /// ([`access::auth::authenticate`]).
    pub token_reads: Arc<crate::batch::Reads<String, pam_store::ApiToken, ApiError>>,
}

impl AppState {
    /// State over a store (PostgreSQL in pamd, memory in unit tests).
    pub fn new(store: Arc<dyn Store>, clock: SharedClock, thresholds: Thresholds) -> AppState {
        AppState {
            ctx: Ctx::new(store, clock, thresholds),
            fleet: Default::default(),
            snapshots: Default::default(),
            logs: Default::default(),
            revocations: Default::default(),
            limits: Default::default(),
            max_body_bytes: routes::DEFAULT_MAX_BODY_BYTES,
            hook_deliveries: Default::default(),
            repos: None,
            oidc: None,
            metrics_require_token: false,
            token_uses: Default::default(),
            token_reads: Default::default(),
        }
    }
}

pub fn router(state: AppState) -> Router {
    let metrics = state.ctx.metrics.clone();
    let idempotent = axum::middleware::from_fn_with_state(state.clone(), idempotency::layer);
    let limited = axum::middleware::from_fn_with_state(state.clone(), access::rate_limit::layer);
    Router::new()
        // Every route is an entry of the route table (routes.rs).
        .merge(routes::router(&state))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(idempotent)
        .layer(limited)
        .layer(axum::middleware::from_fn(guard::check_uri))
        .layer(axum::middleware::from_fn(guard::json_errors))
        .layer(axum::middleware::from_fn_with_state(
            metrics,
            metrics::track,
        ))
        .with_state(state)
}

/// The one error type of the API.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    /// Machine-readable, stable: `not_found`, `bad_request`, …
    pub code: &'static str,
    pub message: String,
    /// Extra structured detail, sent as `errors` next to `error` (e.g. every
    /// positioned manifest problem).
    pub details: Option<serde_json::Value>,
    /// Seconds, sent as `Retry-After`: the request may succeed if sent
    /// again then (a database that cannot serve now).
    pub retry_after: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: None,
            retry_after: None,
        }
    }

    /// A transient failure: 503 `unavailable` with `Retry-After` (the database
    /// is down or a lock wait was cut short). The detail is logged, not sent.
    pub fn unavailable(detail: impl std::fmt::Display) -> Self {
        tracing::warn!(error = %detail, "database unavailable");
        let mut e = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "the database cannot serve this request now; retry shortly",
        );
        e.retry_after = Some(1);
        e
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// A failure that is not the caller's fault. The detail is logged here,
    /// where it is handled, and never sent: 500s leak nothing.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(error = %detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error (see the pamd log)",
        )
    }
}

/// The body of every error answer (what an `ApiError` sends; the OpenAPI
/// document's `Error` schema).
#[derive(serde::Serialize, schemars::JsonSchema)]
#[schemars(rename = "Error")]
pub struct ErrorBody {
    pub error: ErrorDetail,
    /// Every problem, where there are several (invalid manifests).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub errors: Option<serde_json::Value>,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct ErrorDetail {
    /// Machine-readable and stable: `not_found`, `bad_request`,
    /// `unauthorized`, `conflict`, `invalid`, `unavailable`, …
    pub code: String,
    /// For people; never a secret's value.
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
            errors: self.details,
        };
        let mut resp = (self.status, Json(body)).into_response();
        if let Some(s) = self.retry_after {
            resp.headers_mut()
                .insert(axum::http::header::RETRY_AFTER, s.into());
        }
        resp
    }
}

/// Liveness: the process serves HTTP.
async fn healthz() -> Json<serde_json::Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: the database answers (within
/// [`crate::metrics::DATABASE_PROBE`]) and every migration pamd knows is
/// applied.
async fn readyz(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let probe = crate::metrics::DATABASE_PROBE;
    let ready = tokio::time::timeout(probe, state.ctx.store.ready())
        .await
        .unwrap_or_else(|_| Err("database: no answer within 800 ms".to_string()));
    ready.map_err(|why| {
        let mut e = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "not_ready", why);
        e.retry_after = Some(1);
        e
    })?;
    Ok(Json(json!({"status": "ready"})))
}

async fn version() -> Json<serde_json::Value> {
    let schema = pam_store::db::schema_version();
    Json(json!({
        "name": "pamd",
        "version": env!("CARGO_PKG_VERSION"),
        "apiVersion": "pam.dev/v1",
        "schemaVersion": schema,
    }))
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route for {}", uri.path()))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}

impl From<crate::batch::Dropped> for ApiError {
    fn from(_: crate::batch::Dropped) -> Self {
        ApiError::unavailable("the request was not served; send it again")
    }
}

impl crate::retry::Conflict for ApiError {
    fn is_conflict(&self) -> bool {
        self.status == StatusCode::CONFLICT && self.code == "conflict"
    }
}

/// A worker's request the fleet could not serve: 409 `not_registered`
/// for a host without a row, else the store's answer.
impl From<crate::fleet::FleetError> for ApiError {
    fn from(e: crate::fleet::FleetError) -> Self {
        use crate::fleet::FleetError;
        match e {
            FleetError::NotRegistered(host) => ApiError::new(
                StatusCode::CONFLICT,
                "not_registered",
                format!("host {host:?} has not registered yet"),
            ),
            FleetError::Store(e) => e.into(),
            FleetError::Dropped => crate::batch::Dropped.into(),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            StoreError::AlreadyExists(m) => ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("already exists: {m}"),
            ),
            StoreError::NotFound(m) => ApiError::not_found(format!("not found: {m}")),
            StoreError::Illegal(t) => t.into(),
            StoreError::Invalid(m) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", m),
            // The API is not fenced; a request reaching a fenced write
            // (a sync run on behalf of a request) retries on the leader.
            StoreError::Fenced(m) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", m)
            }
            StoreError::Unavailable(m) => ApiError::unavailable(m),
            StoreError::Database(m) => ApiError::internal(m),
        }
    }
}

impl From<pam_manifests::state::IllegalTransition> for ApiError {
    fn from(t: pam_manifests::state::IllegalTransition) -> Self {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "illegal_transition",
            t.to_string(),
        )
    }
}
