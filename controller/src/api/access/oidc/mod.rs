//! Dashboard sign-in with OIDC: the authorization code flow
//! with PKCE (S256), state and nonce, against `[oidc]` (config/oidc.rs).
//!
//! - `GET /auth/login` remembers a state, nonce and PKCE verifier (in
//!   memory, [`PENDING_TTL_SECONDS`], one use) and redirects to the
//!   issuer; the state is also set as the short-lived `pam_oidc_state`
//!   cookie so a callback only completes in the browser that started it.
//! - `GET /auth/callback` takes the pending sign-in back (an unknown,
//!   used or expired state is refused: a replayed callback too), trades
//!   the code at the token endpoint, verifies the ID token
//!   ([`issuer::Issuer::verify`]), maps its groups to a grant
//!   ([`Settings::grant`]) and starts a session ([`session`]).
//! - `POST /auth/logout` ends the session server-side.
//!
//! A refused sign-in answers with the API's one JSON error shape (also in
//! the browser) and an info log line naming why, never a code, token or
//! secret.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Duration, Utc};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::api::{ApiError, AppState};
use crate::rules::access::{Grant, Role};

pub mod issuer;
pub mod session;

use session::{random_token, Session, Sessions};

/// How long a started sign-in may take to come back.
pub const PENDING_TTL_SECONDS: i64 = 600;
/// Sign-ins started and not finished that one pamd keeps at most.
const MAX_PENDING: usize = 10_000;
const STATE_COOKIE: &str = "pam_oidc_state";

/// What `[oidc.groups]` gives one group.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupGrant {
    pub role: Role,
    pub projects: Vec<String>,
}

/// The client secret: never in a `Debug` (the config is printed).
#[derive(Clone, PartialEq)]
pub struct ClientSecret(pub String);

impl std::fmt::Debug for ClientSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientSecret(..)")
    }
}

/// `[oidc]`, resolved (config/oidc.rs reads it).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub issuer: String,
    pub client_id: String,
    /// Read from `client_secret_file` at start; None: a public client
    /// (PKCE alone).
    pub client_secret: Option<ClientSecret>,
    pub groups_claim: String,
    pub redirect_url: String,
    pub session_ttl: Duration,
    pub groups: BTreeMap<String, GroupGrant>,
    /// pamd serves TLS: cookies are `Secure`.
    pub secure_cookies: bool,
}

impl Settings {
    /// The grant of a user in `groups`: the union of every mapped group
    /// (admin if any is admin; else operator in the operator groups'
    /// projects and viewer in the rest); None when no group is mapped.
    pub fn grant(&self, groups: &[String]) -> Option<Grant> {
        let mapped: Vec<&GroupGrant> = groups.iter().filter_map(|g| self.groups.get(g)).collect();
        if mapped.is_empty() {
            return None;
        }
        if mapped.iter().any(|m| m.role == Role::Admin) {
            return Some(Grant {
                role: Role::Admin,
                projects: Vec::new(),
                read_only: Vec::new(),
            });
        }
        let of = |role: Role| -> Vec<String> {
            let mut p: Vec<String> = mapped
                .iter()
                .filter(|m| m.role == role)
                .flat_map(|m| m.projects.iter().cloned())
                .collect();
            p.sort();
            p.dedup();
            p
        };
        let (operate, view) = (of(Role::Operator), of(Role::Viewer));
        let read_only: Vec<String> = view.into_iter().filter(|p| !operate.contains(p)).collect();
        let (role, mut projects) = if operate.is_empty() {
            (Role::Viewer, Vec::new())
        } else {
            (Role::Operator, operate)
        };
        projects.extend(read_only.iter().cloned());
        let read_only = if role == Role::Operator {
            read_only
        } else {
            Vec::new()
        };
        Some(Grant {
            role,
            projects,
            read_only,
        })
    }
}

/// A sign-in between `/auth/login` and its callback.
struct Pending {
    verifier: String,
    nonce: String,
    started: DateTime<Utc>,
}

/// The OIDC side of one pamd.
pub struct Oidc {
    pub settings: Settings,
    pub issuer: issuer::Issuer,
    pending: Mutex<HashMap<String, Pending>>,
    pub sessions: Sessions,
}

impl Oidc {
    pub fn new(settings: Settings) -> anyhow::Result<Oidc> {
        let issuer = issuer::Issuer::new(settings.issuer.clone(), settings.client_id.clone())?;
        Ok(Oidc {
            settings,
            issuer,
            pending: Mutex::new(HashMap::new()),
            sessions: Sessions::default(),
        })
    }

    fn remember(&self, state: String, p: Pending, now: DateTime<Utc>) {
        let mut pending = self.pending.lock().expect("pending lock");
        pending.retain(|_, p| (now - p.started).num_seconds() < PENDING_TTL_SECONDS);
        session::make_room(&mut pending, MAX_PENDING, |p| p.started);
        pending.insert(state, p);
    }

    /// The pending sign-in of `state`, taken (one use).
    fn take(&self, state: &str, now: DateTime<Utc>) -> Option<Pending> {
        let p = self.pending.lock().expect("pending lock").remove(state)?;
        ((now - p.started).num_seconds() < PENDING_TTL_SECONDS).then_some(p)
    }
}

fn not_configured() -> ApiError {
    ApiError::not_found("OIDC sign-in is not configured on this pamd ([oidc] in its config)")
}

/// A refused sign-in: counted, logged with its reason, answered 401.
fn refuse(st: &AppState, why: impl std::fmt::Display) -> ApiError {
    crate::api::access::auth::refused_name(st, "oidc", StatusCode::UNAUTHORIZED);
    tracing::info!(reason = %why, "OIDC sign-in refused");
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        format!("sign-in refused: {why}"),
    )
}

fn oidc(st: &AppState) -> Result<&Arc<Oidc>, ApiError> {
    st.oidc.as_ref().ok_or_else(not_configured)
}

fn b64url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn redirect(to: &str, cookies: &[String]) -> Response {
    let mut resp = StatusCode::SEE_OTHER.into_response();
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(to) {
        h.insert(header::LOCATION, v);
    }
    for c in cookies {
        if let Ok(v) = HeaderValue::from_str(c) {
            h.append(header::SET_COOKIE, v);
        }
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// `GET /auth/info`: whether the dashboard offers "Sign in with SSO".
pub async fn info(State(st): State<AppState>) -> crate::api::extract::Json<serde_json::Value> {
    crate::api::extract::Json(serde_json::json!({ "oidc": st.oidc.is_some() }))
}

/// `GET /auth/login`: to the issuer.
pub async fn login(State(st): State<AppState>) -> Result<Response, ApiError> {
    let o = oidc(&st)?;
    let provider = o.issuer.provider().await.map_err(|e| refuse(&st, e))?;
    let (state, nonce, verifier) = (random_token(), random_token(), random_token());
    let challenge = b64url(&Sha256::digest(verifier.as_bytes()));
    let mut url = provider.authorization_endpoint.clone();
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &o.settings.client_id)
        .append_pair("redirect_uri", &o.settings.redirect_url)
        .append_pair("scope", "openid email profile")
        .append_pair("state", &state)
        .append_pair("nonce", &nonce)
        .append_pair("code_challenge", &challenge)
        .append_pair("code_challenge_method", "S256");
    let now = st.ctx.now();
    let cookie = session::set_cookie(
        STATE_COOKIE,
        &state,
        PENDING_TTL_SECONDS,
        true,
        o.settings.secure_cookies,
    );
    o.remember(
        state,
        Pending {
            verifier,
            nonce,
            started: now,
        },
        now,
    );
    Ok(redirect(url.as_str(), &[cookie]))
}

/// The callback's query: the issuer's answer.
#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct TokenAnswer {
    id_token: String,
}

/// `GET /auth/callback`: the issuer's redirect back.
pub async fn callback(
    State(st): State<AppState>,
    headers: HeaderMap,
    Query(q): Query<CallbackQuery>,
) -> Result<Response, ApiError> {
    let o = oidc(&st)?;
    if let Some(e) = q.error.as_deref() {
        // The issuer's own error code (access_denied, …): a short word
        // from the OAuth spec, kept short in case it is not.
        let e: String = e.chars().take(64).collect();
        return Err(refuse(&st, format!("the issuer answered {e:?}")));
    }
    let Some(state) = q.state.as_deref().filter(|s| !s.is_empty()) else {
        return Err(refuse(&st, "the callback has no state"));
    };
    let now = st.ctx.now();
    // The state must be one this pamd handed out, unused, and the
    // browser's own (its cookie): else someone else's sign-in.
    let browser = session::cookie(&headers, STATE_COOKIE);
    let same = browser.is_some_and(|b| session::same(b, state));
    let Some(pending) = o.take(state, now) else {
        return Err(refuse(
            &st,
            "unknown, used or expired state: start again at /auth/login",
        ));
    };
    if !same {
        return Err(refuse(
            &st,
            "the state is not this browser's: start again at /auth/login",
        ));
    }
    let Some(code) = q.code.as_deref().filter(|c| !c.is_empty()) else {
        return Err(refuse(&st, "the callback has no code"));
    };
    let identity = exchange(o, code, &pending, now)
        .await
        .map_err(|e| refuse(&st, e))?;
    let Some(grant) = o.settings.grant(&identity.groups) else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{} is in no group [oidc.groups] maps to a role: ask an admin to map one of your groups",
                identity.name
            ),
        ))
        .inspect_err(|_| {
            // The label is bounded: never the user's name or e-mail.
            crate::api::access::auth::refused_name(&st, "oidc", StatusCode::FORBIDDEN);
            tracing::info!(subject = %identity.subject, "OIDC sign-in refused: no mapped group");
        });
    };
    // Never beyond the ID token's exp (there is no refresh).
    let expires_at = (now + o.settings.session_ttl).min(identity.expires_at);
    let csrf = random_token();
    tracing::info!(subject = %identity.subject, name = %identity.name, role = grant.role.as_str(), "OIDC sign-in");
    let id = o.sessions.insert(
        Session {
            id: uuid::Uuid::new_v4(),
            subject: identity.subject,
            name: identity.name,
            grant,
            csrf: csrf.clone(),
            created_at: now,
            expires_at,
        },
        now,
    );
    let max_age = (expires_at - now).num_seconds().max(0);
    let secure = o.settings.secure_cookies;
    Ok(redirect(
        "/",
        &[
            session::set_cookie(session::COOKIE, &id, max_age, true, secure),
            session::set_cookie(session::CSRF_COOKIE, &csrf, max_age, false, secure),
            session::set_cookie(STATE_COOKIE, "", 0, true, secure),
        ],
    ))
}

/// The code for an ID token at the token endpoint, verified.
async fn exchange(
    o: &Oidc,
    code: &str,
    pending: &Pending,
    now: DateTime<Utc>,
) -> Result<issuer::Identity, issuer::Refused> {
    let provider = o.issuer.provider().await?;
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", o.settings.redirect_url.as_str()),
        ("client_id", o.settings.client_id.as_str()),
        ("code_verifier", pending.verifier.as_str()),
    ];
    if let Some(secret) = o.settings.client_secret.as_ref() {
        form.push(("client_secret", secret.0.as_str()));
    }
    let req = o.issuer.http().post(provider.token_endpoint).form(&form);
    let body = o.issuer.fetch(req, "token request").await?;
    let answer: TokenAnswer = serde_json::from_slice(&body)
        .map_err(|_| issuer::Refused("the issuer's token answer has no id_token".to_string()))?;
    o.issuer
        .verify(
            &answer.id_token,
            &pending.nonce,
            &o.settings.groups_claim,
            now,
        )
        .await
}

/// `POST /auth/logout`: ends the session here (its cookie and CSRF value
/// are cleared too). Without a live session there is nothing to end: 204
/// all the same.
pub async fn logout(
    State(st): State<AppState>,
    method: axum::http::Method,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let o = oidc(&st)?;
    if let Some(c) = session::cookie(&headers, session::COOKIE) {
        match session::authenticate(&o.sessions, c, &method, &headers, st.ctx.now()) {
            Ok(s) => {
                o.sessions.remove(c);
                // Its open event streams end too.
                st.revocations.revoke(s.id);
                tracing::info!(subject = %s.subject, "OIDC sign-out");
            }
            // A live session without its CSRF value: a page of another
            // site cannot sign the user out either.
            Err(e) if e.status == StatusCode::FORBIDDEN => return Err(e),
            // Expired or unknown: nothing to end.
            Err(_) => {}
        }
    }
    let secure = o.settings.secure_cookies;
    let mut resp = StatusCode::NO_CONTENT.into_response();
    for c in [
        session::set_cookie(session::COOKIE, "", 0, true, secure),
        session::set_cookie(session::CSRF_COOKIE, "", 0, false, secure),
    ] {
        if let Ok(v) = HeaderValue::from_str(&c) {
            resp.headers_mut().append(header::SET_COOKIE, v);
        }
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(groups: &[(&str, Role, &[&str])]) -> Settings {
        Settings {
            issuer: "https://id.example".into(),
            client_id: "pam".into(),
            client_secret: None,
            groups_claim: "groups".into(),
            redirect_url: "https://pam.example/auth/callback".into(),
            session_ttl: Duration::hours(8),
            groups: groups
                .iter()
                .map(|(g, role, projects)| {
                    let projects = projects.iter().map(|p| p.to_string()).collect();
                    (
                        g.to_string(),
                        GroupGrant {
                            role: role.clone(),
                            projects,
                        },
                    )
                })
                .collect(),
            secure_cookies: false,
        }
    }

    fn groups(g: &[&str]) -> Vec<String> {
        g.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn groups_map_to_their_union() {
        let s = settings(&[
            ("web-ops", Role::Operator, &["web"]),
            ("api-ops", Role::Operator, &["api"]),
            ("readers", Role::Viewer, &["web", "docs"]),
            ("admins", Role::Admin, &[]),
        ]);
        assert_eq!(s.grant(&groups(&["strangers"])), None);
        assert_eq!(s.grant(&[]), None);
        let g = s
            .grant(&groups(&["readers", "web-ops", "api-ops"]))
            .unwrap();
        assert_eq!(g.role, Role::Operator);
        assert_eq!(g.projects, ["api", "web", "docs"]);
        assert_eq!(g.read_only, ["docs"]);
        let g = s.grant(&groups(&["readers", "other"])).unwrap();
        assert_eq!(
            (g.role, g.projects.as_slice()),
            (Role::Viewer, &["docs".to_string(), "web".to_string()][..])
        );
        assert!(g.read_only.is_empty());
        let g = s.grant(&groups(&["readers", "admins"])).unwrap();
        assert_eq!((g.role, g.projects.len()), (Role::Admin, 0));
    }
}
