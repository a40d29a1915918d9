//! Dashboard sessions: what a completed OIDC sign-in leaves.
//!
//! The browser holds a random session id in the `pam_session` cookie
//! (`HttpOnly`, `SameSite=Lax`, `Path=/`, `Secure` when pamd serves TLS);
//! this pamd keeps, in memory, the session under the id's SHA-256 (the id
//! itself is never kept, logged or journaled): who signed in, the role and
//! projects their groups map to, the CSRF value and when it ends. Replicas
//! do not share sessions (docs/operations.md, "Signing in with OIDC"): a
//! restart or another replica means signing in again.
//!
//! A request authenticated by the cookie that changes something (any
//! method but GET, HEAD, OPTIONS) must carry the session's CSRF value in
//! `X-PAM-CSRF` (double submit: the dashboard reads it from the
//! `pam_csrf` cookie, which is not `HttpOnly`, or from whoami).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, Method, StatusCode};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::api::ApiError;
use crate::rules::access::Grant;
use crate::rules::tokens::fingerprint;

/// The session cookie.
pub const COOKIE: &str = "pam_session";
/// The CSRF value, readable by the dashboard's script.
pub const CSRF_COOKIE: &str = "pam_csrf";
/// The header a cookie-authenticated change carries.
pub const CSRF_HEADER: &str = "x-pam-csrf";
/// Sessions one pamd keeps at most: past it the oldest is dropped (a
/// flood of sign-ins cannot grow pamd without bound).
const MAX_SESSIONS: usize = 50_000;

/// One signed-in browser.
#[derive(Debug, Clone)]
pub struct Session {
    /// Stands for the session where a token's id would (stream holds).
    pub id: Uuid,
    /// The ID token's `sub`.
    pub subject: String,
    /// What logs and the audit trail call them: email, else
    /// preferred_username, else the subject.
    pub name: String,
    pub grant: Grant,
    pub csrf: String,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// This pamd's sessions.
#[derive(Clone, Default)]
pub struct Sessions {
    by_key: Arc<Mutex<HashMap<String, Session>>>,
}

/// 256 random bits, URL-safe base64: session ids, CSRF values, OIDC
/// states, nonces and PKCE verifiers.
pub fn random_token() -> String {
    use base64::Engine;
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).expect("the OS random source works");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

/// Room for one more in a map kept to `max` entries: the oldest (by
/// `born`) goes.
pub(super) fn make_room<V>(
    map: &mut HashMap<String, V>,
    max: usize,
    born: impl Fn(&V) -> DateTime<Utc>,
) {
    if map.len() < max {
        return;
    }
    if let Some(oldest) = map
        .iter()
        .min_by_key(|(_, v)| born(v))
        .map(|(k, _)| k.clone())
    {
        map.remove(&oldest);
    }
}

impl Sessions {
    /// Keeps `session`; returns the cookie value that finds it.
    pub fn insert(&self, session: Session, now: DateTime<Utc>) -> String {
        let cookie = random_token();
        let mut map = self.by_key.lock().expect("sessions lock");
        if map.len() >= MAX_SESSIONS {
            map.retain(|_, s| s.expires_at > now);
        }
        make_room(&mut map, MAX_SESSIONS, |s| s.created_at);
        map.insert(fingerprint(&cookie), session);
        cookie
    }

    /// The live session of a cookie value; an expired one is dropped.
    pub fn get(&self, cookie: &str, now: DateTime<Utc>) -> Option<Session> {
        let key = fingerprint(cookie);
        let mut map = self.by_key.lock().expect("sessions lock");
        match map.get(&key) {
            Some(s) if s.expires_at > now => Some(s.clone()),
            Some(_) => {
                map.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Whether the session `id` is still live (a stream's re-check).
    pub fn live(&self, id: Uuid, now: DateTime<Utc>) -> bool {
        let map = self.by_key.lock().expect("sessions lock");
        map.values().any(|s| s.id == id && s.expires_at > now)
    }

    /// Ends the session of a cookie value (logout).
    pub fn remove(&self, cookie: &str) -> Option<Session> {
        let mut map = self.by_key.lock().expect("sessions lock");
        map.remove(&fingerprint(cookie))
    }
}

/// Whether two secrets (CSRF values, states, nonces) are equal, in time
/// that does not depend on where they differ: their SHA-256 digests are
/// compared.
pub fn same(a: &str, b: &str) -> bool {
    use sha2::{Digest, Sha256};
    Sha256::digest(a.as_bytes()) == Sha256::digest(b.as_bytes())
}

/// A cookie's value from the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A `Set-Cookie` value: `http_only` for the session, not for the CSRF
/// value the script reads; `max_age` 0 deletes it.
pub fn set_cookie(name: &str, value: &str, max_age: i64, http_only: bool, secure: bool) -> String {
    let mut c = format!("{name}={value}; Path=/; SameSite=Lax; Max-Age={max_age}");
    if http_only {
        c.push_str("; HttpOnly");
    }
    if secure {
        c.push_str("; Secure");
    }
    c
}

/// Whether a method changes nothing (no CSRF value needed).
pub fn safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

fn unauthorized(msg: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", msg)
}

/// The session of a request carrying `cookie_value`, its CSRF value
/// checked for a change. Neither the cookie nor a CSRF value is echoed.
pub fn authenticate(
    sessions: &Sessions,
    cookie_value: &str,
    method: &Method,
    headers: &HeaderMap,
    now: DateTime<Utc>,
) -> Result<Session, ApiError> {
    let Some(s) = sessions.get(cookie_value, now) else {
        return Err(unauthorized(
            "the session has expired or is unknown: sign in again (/auth/login)",
        ));
    };
    if !safe(method) {
        let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        let ok = sent.is_some_and(|v| same(v, &s.csrf));
        if !ok {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "a change made with the session cookie needs the session's X-PAM-CSRF header (the pam_csrf cookie's value)",
            ));
        }
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_read_by_exact_name() {
        let mut h = HeaderMap::new();
        h.append(
            "cookie",
            "a=1; pam_session_x=no; pam_session=yes".parse().unwrap(),
        );
        h.append("cookie", "pam_csrf=c".parse().unwrap());
        assert_eq!(cookie(&h, COOKIE), Some("yes"));
        assert_eq!(cookie(&h, CSRF_COOKIE), Some("c"));
        assert_eq!(cookie(&h, "pam"), None);
    }

    #[test]
    fn a_full_map_drops_its_oldest() {
        let t = |s| DateTime::from_timestamp(s, 0).unwrap();
        let mut m: HashMap<String, DateTime<Utc>> = [("b", t(2)), ("a", t(1)), ("c", t(3))]
            .map(|(k, v)| (k.to_string(), v))
            .into();
        make_room(&mut m, 4, |v| *v);
        assert_eq!(m.len(), 3);
        make_room(&mut m, 3, |v| *v);
        assert!(!m.contains_key("a") && m.len() == 2, "{m:?}");
    }
}
