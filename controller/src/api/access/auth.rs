//! Bearer-token authentication. Every `/api/v1` call except version needs
//! `Authorization: Bearer <token>`. Tokens are random, shown once, and
//! stored only as their SHA-256 fingerprint ([`crate::rules::tokens`]) (`api_tokens.fingerprint`,
//! `hosts.token_fingerprint`); a revoked token is refused at once because
//! every request looks its fingerprint up. What outlives its request (an
//! event stream, an attach lease) holds its token in
//! [`crate::api::access::revocation::Revocations`], which ends it when the token is
//! revoked.
//!
//! Two kinds: operator tokens (the API, pamctl, the dashboard) and worker
//! tokens, each bound to one host name, which may only call the worker
//! endpoints and only act for that host.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::request::Parts;
use axum::http::StatusCode;
use pam_store::{ApiToken, TokenKind};
use uuid::Uuid;

use crate::api::access::revocation::Hold;
use crate::api::{ApiError, AppState};
use crate::rules::access::{Grant, Role};
use crate::rules::tokens::{self, fingerprint};

/// Who is calling, and with which token (its id and fingerprint, to hold
/// it: [`Principal::hold`]).
#[derive(Debug, Clone)]
pub enum Principal {
    Operator {
        token_id: Uuid,
        fingerprint: String,
        name: String,
        /// Its role and projects.
        grant: Grant,
    },
    Worker {
        token_id: Uuid,
        fingerprint: String,
        host: String,
    },
    /// A dashboard session of an OIDC sign-in (api/oidc): its
    /// grant from the user's groups, checked by the same
    /// [`crate::rules::access::authorize`].
    Session {
        /// The session's own id (stream holds end with it).
        session: Uuid,
        /// The ID token's `sub`: what the audit trail records.
        subject: String,
        name: String,
        grant: Grant,
    },
}

impl Principal {
    /// The token's name (workers: `worker-HOST`): what logs and metrics
    /// may say of it.
    pub fn name(&self) -> &str {
        match self {
            Principal::Operator { name, .. } | Principal::Session { name, .. } => name,
            Principal::Worker { host, .. } => host,
        }
    }

    /// What `pam_api_refused_total` counts a refusal of it under: the
    /// token's name, or `session` for a dashboard session (a label never
    /// carries what a user supplied, such as a sign-in's name or e-mail:
    /// personal data, and without bound).
    pub fn metric_label(&self) -> &str {
        match self {
            Principal::Session { .. } => "session",
            _ => self.name(),
        }
    }

    /// An operator-side token's role and projects; None for a worker.
    pub fn grant(&self) -> Option<&Grant> {
        match self {
            Principal::Operator { grant, .. } | Principal::Session { grant, .. } => Some(grant),
            Principal::Worker { .. } => None,
        }
    }

    /// The caller's token (None: a session, which has none).
    pub fn token_id(&self) -> Option<Uuid> {
        match self {
            Principal::Operator { token_id, .. } | Principal::Worker { token_id, .. } => {
                Some(*token_id)
            }
            Principal::Session { .. } => None,
        }
    }

    /// The OIDC subject of a session.
    pub fn subject(&self) -> Option<&str> {
        match self {
            Principal::Session { subject, .. } => Some(subject),
            _ => None,
        }
    }

    /// Holds the caller's token for something that outlives this request
    /// (a stream, a lease): it ends when the token is revoked.
    pub fn hold(&self, state: &AppState) -> Hold {
        if let (Principal::Session { session, .. }, Some(o)) = (self, state.oidc.as_ref()) {
            return state.revocations.hold_session(
                *session,
                o.sessions.clone(),
                state.ctx.clock.clone(),
            );
        }
        if let Principal::Worker {
            token_id,
            fingerprint,
            host,
        } = self
        {
            return state
                .revocations
                .hold_worker(&state.ctx.store, *token_id, fingerprint, host);
        }
        let (id, fp) = match self {
            Principal::Operator {
                token_id,
                fingerprint,
                ..
            }
            | Principal::Worker {
                token_id,
                fingerprint,
                ..
            } => (*token_id, fingerprint.as_str()),
            // Without [oidc] there are no sessions; held as nothing.
            Principal::Session { session, .. } => (*session, ""),
        };
        state.revocations.hold(&state.ctx.store, id, fp)
    }
}

fn unauthorized(msg: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", msg)
}

/// Looks a bearer token up; revoked and unknown tokens are refused. `peer`
/// is the client's address, whose failed attempts are limited
/// (rate_limit.rs, "Failed authentication"); None (an in-process router)
/// limits nothing.
pub async fn authenticate(
    state: &AppState,
    header: Option<&str>,
    peer: Option<IpAddr>,
) -> Result<Principal, ApiError> {
    let Some(value) = header else {
        refused_name(state, "none", StatusCode::UNAUTHORIZED);
        return Err(unauthorized(
            "missing Authorization: Bearer <token> (pamctl: --token, PAM_TOKEN or the config file)",
        ));
    };
    let Some(token) = value.strip_prefix("Bearer ").map(str::trim) else {
        refused_name(state, "none", StatusCode::UNAUTHORIZED);
        return Err(unauthorized(
            "the Authorization header must be `Bearer <token>`",
        ));
    };
    let fp = fingerprint(token);
    let now = state.ctx.now();
    if let Some(wait) = peer.and_then(|ip| state.limits.auth_refused(ip, &fp, now)) {
        state.ctx.metrics.auth_failures_limited.inc();
        let mut e = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!("too many failed authentications from this address; retry after {wait} s"),
        );
        e.retry_after = Some(wait);
        return Err(e);
    }
    // A worker token its host's watch holds: from memory, as current as
    // the stream ([`crate::api::access::revocation`]).
    if let Some((token_id, host)) = held_worker(state, &fp, now) {
        state.limits.auth_succeeded(&fp);
        return Ok(Principal::Worker {
            token_id,
            fingerprint: fp,
            host,
        });
    }
    // Looked up with the other requests waiting: one statement for a
    // burst of them ([`crate::batch::read`]).
    let store = state.ctx.store.clone();
    let found: Option<ApiToken> = crate::batch::read(&state.token_reads, fp.clone(), move |fps| {
        let store = store.clone();
        async move {
            let found = store.tokens_by_fingerprints(&fps).await?;
            Ok(found
                .into_iter()
                .map(|t| (t.fingerprint.clone(), t))
                .collect())
        }
    })
    .await?;
    let failed = |name: &str, why: &str| {
        if let Some(ip) = peer {
            state.limits.auth_failed(ip, now);
        }
        refused_name(state, name, StatusCode::UNAUTHORIZED);
        Err(unauthorized(why))
    };
    match found {
        None => failed("unknown", "unknown token"),
        Some(t) if t.revoked_at.is_some() => failed(&t.name, "this token has been revoked"),
        Some(t) => {
            state.limits.auth_succeeded(&fp);
            record_use(state, &t);
            principal(state, t, fp).await
        }
    }
}

/// The worker token with fingerprint `fp` that its host's watch holds
/// ([`crate::api::access::revocation::Revocations::held_worker`]): its id and host,
/// its use at `now` recorded (at most once a minute, through the hold).
fn held_worker(
    state: &AppState,
    fp: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Option<(Uuid, String)> {
    let (id, host, record) = state.revocations.held_worker(fp, now)?;
    if record {
        crate::api::access::token_uses::record(&state.ctx, &state.token_uses, id, now);
    }
    Some((id, host))
}

/// `lastUsedAt`, written off the request's path and at most once
/// a minute per token: the row just read says whether it is stale, so a
/// fresh token costs nothing more; stale ones are written together
/// ([`crate::api::access::token_uses`]).
fn record_use(state: &AppState, t: &ApiToken) {
    let now = state.ctx.now();
    if tokens::last_used_is_stale(t.last_used_at, now) {
        crate::api::access::token_uses::record(&state.ctx, &state.token_uses, t.id, now);
    }
}

/// The principal of token `t`; a custom role's grant is resolved from
/// its Role object now (one more read, for such tokens only:
/// [`tokens::grant_of`]), so a change to it holds from the next request.
async fn principal(state: &AppState, t: ApiToken, fp: String) -> Result<Principal, ApiError> {
    Ok(match t.kind {
        TokenKind::Operator => {
            let grant = match t.role {
                Role::Custom(_) => {
                    let mut tx = state.ctx.store.begin().await?;
                    tokens::grant_of(tx.as_mut(), &t).await?
                }
                _ => Grant {
                    role: t.role,
                    projects: t.projects,
                    read_only: Vec::new(),
                },
            };
            Principal::Operator {
                token_id: t.id,
                fingerprint: fp,
                name: t.name,
                grant,
            }
        }
        TokenKind::Worker => Principal::Worker {
            token_id: t.id,
            fingerprint: fp,
            host: t.host_name.unwrap_or_default(),
        },
    })
}

/// The caller of a request: its bearer token, else (with `[oidc]`) its
/// dashboard session cookie, whose changes need the CSRF header
/// ([`crate::api::access::oidc::session::authenticate`]). A bearer token wins: its
/// requests never need a CSRF value.
pub async fn authenticate_parts(state: &AppState, parts: &Parts) -> Result<Principal, ApiError> {
    let header = auth_header(parts);
    if header.is_none() {
        use crate::api::access::oidc::session;
        if let (Some(o), Some(c)) = (
            state.oidc.as_ref(),
            session::cookie(&parts.headers, session::COOKIE),
        ) {
            let now = state.ctx.now();
            return match session::authenticate(&o.sessions, c, &parts.method, &parts.headers, now) {
                Ok(s) => Ok(Principal::Session {
                    session: s.id,
                    subject: s.subject,
                    name: s.name,
                    grant: s.grant,
                }),
                Err(e) => {
                    refused_name(state, "session", e.status);
                    Err(e)
                }
            };
        }
    }
    authenticate(state, header, peer(&parts.extensions)).await
}

/// The token of an `Authorization: Bearer` header, trimmed, for the layers
/// that key on it before authentication (rate limits, idempotency).
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

pub fn auth_header(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}

/// The client's address, as pamd's listener saw it (none in an in-process
/// router).
pub fn peer(extensions: &axum::http::Extensions) -> Option<IpAddr> {
    extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// Extractor for operator endpoints.
pub struct Operator(pub Principal);

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        // The route's permission check ([`crate::api::access::authz::enforce`]) has
        // authenticated the caller already.
        if let Some(p) = parts.extensions.get::<Principal>() {
            return Ok(Operator(p.clone()));
        }
        match authenticate_parts(state, parts).await? {
            p @ (Principal::Operator { .. } | Principal::Session { .. }) => Ok(Operator(p)),
            Principal::Worker { .. } => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "worker tokens may only call the worker endpoints",
            )),
        }
    }
}

/// Extractor for worker endpoints: the host name the token is bound to.
pub struct Worker {
    pub host: String,
    /// The worker's token, for what outlives the request (the watch).
    principal: Principal,
}

impl Worker {
    /// Holds the worker's token for a stream: it ends when the token is
    /// revoked ([`crate::api::access::revocation`]).
    pub fn hold(&self, state: &AppState) -> Hold {
        self.principal.hold(state)
    }

    /// A request the worker wrote on its watch: authenticated
    /// by the stream, which holds its token (revoking it ends the
    /// stream), and its use recorded as a request authenticated through
    /// the hold would record it ([`held_worker`]).
    pub fn used_on_watch(&self, state: &AppState) {
        if let Principal::Worker { fingerprint, .. } = &self.principal {
            let _ = held_worker(state, fingerprint, state.ctx.now());
        }
    }
}

impl FromRequestParts<AppState> for Worker {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match authenticate_parts(state, parts).await? {
            Principal::Worker {
                token_id,
                fingerprint,
                host,
            } => Ok(Worker {
                host: host.clone(),
                principal: Principal::Worker {
                    token_id,
                    fingerprint,
                    host,
                },
            }),
            Principal::Operator { .. } | Principal::Session { .. } => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "this endpoint is for worker tokens (pamctl token create --worker HOST)",
            )),
        }
    }
}

/// Counts and logs a refusal of the token named `token` (its name,
/// never its value).
pub fn refused_name(st: &AppState, token: &str, status: StatusCode) {
    st.ctx.metrics.api_refused(token, status.as_u16());
    tracing::info!(token = %token, status = status.as_u16(), "request refused");
}
