//! Push receivers: `POST /api/v1/sources/{source}/hooks/{provider}`
//! — a git host announces a push, and a Source whose ref it moved syncs at
//! once instead of at its next interval (Flux's Receiver, Argo CD's
//! webhook). No bearer token: each provider proves itself with its own
//! scheme against the Source's `spec.receiver.secretRef`:
//!
//! | provider  | proof | event | delivery id |
//! |-----------|-------|-------|-------------|
//! | `github`  | `X-Hub-Signature-256: sha256=<HMAC-SHA256(secret, body)>` | `X-GitHub-Event: push` | `X-GitHub-Delivery` |
//! | `gitea`   | `X-Gitea-Signature: <hex HMAC-SHA256(secret, body)>` | `X-Gitea-Event: push` | `X-Gitea-Delivery` |
//! | `gitlab`  | `X-Gitlab-Token: <secret>` | `X-Gitlab-Event: Push Hook` | `X-Gitlab-Event-UUID` |
//! | `generic` | `X-Signature-256: sha256=<HMAC-SHA256(secret, body)>` | (always a push) | `X-Delivery` |
//!
//! Compared in constant time. A verified push whose `ref` is the Source's
//! (`refs/heads/<ref>` or `refs/tags/<ref>`; for `HEAD`, the repository's
//! default branch as the payload names it) asks for a sync (the same rule
//! as `pamctl sync`) and wakes the loops: 202. A `ping` (GitHub, Gitea) is
//! answered 200 and syncs nothing. Anything else is refused and syncs
//! nothing: no receiver or no such Source 404, an unknown provider 400, a
//! bad or missing proof 401, another event, another ref, a body that is
//! not JSON or a delivery id seen before (a replay) 400, a suspended
//! Source 409, a body over [`MAX_BODY`] 413, more than the worker
//! budget's rate per Source 429.
//! Every answer is counted in `pam_source_hooks_total{provider,outcome}`.

use std::collections::VecDeque;
use std::sync::Mutex;

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use hmac::{Hmac, Mac};
use pam_manifests::kinds::SourceSpec;
use pam_store::Source;
use serde_json::{json, Value};
use sha2::Sha256;

use crate::api::operator::served::one;
use crate::api::{ApiError, AppState};

type ApiResult<T> = Result<T, ApiError>;
use crate::rules::sources;

/// The largest push payload read (GitHub caps theirs at 25 MB; a push of
/// a few commits is kilobytes).
pub const MAX_BODY: usize = 1 << 20;

/// Delivery ids remembered per pamd, for refusing replays.
const REMEMBERED: usize = 4096;

/// The providers, as the path names them.
pub const PROVIDERS: [&str; 4] = ["github", "gitlab", "gitea", "generic"];

/// What one hook request came to (the metric's `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    Ping,
    NoReceiver,
    UnknownProvider,
    BadSignature,
    NotPush,
    OtherRef,
    Replayed,
    BadPayload,
    TooLarge,
    RateLimited,
    Suspended,
    /// The database failed the request (5xx): nothing was decided.
    Error,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Accepted => "accepted",
            Outcome::Ping => "ping",
            Outcome::NoReceiver => "no_receiver",
            Outcome::UnknownProvider => "unknown_provider",
            Outcome::BadSignature => "bad_signature",
            Outcome::NotPush => "not_push",
            Outcome::OtherRef => "other_ref",
            Outcome::Replayed => "replayed",
            Outcome::BadPayload => "bad_payload",
            Outcome::TooLarge => "too_large",
            Outcome::RateLimited => "rate_limited",
            Outcome::Suspended => "suspended",
            Outcome::Error => "error",
        }
    }
}

/// The delivery ids seen lately, per Source (this pamd's memory: a replay
/// sent to another replica would sync once more, which is harmless).
#[derive(Debug, Default)]
pub struct Seen(Mutex<VecDeque<String>>);

impl Seen {
    /// Whether `key` was seen; remembers it.
    fn replayed(&self, key: String) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if seen.contains(&key) {
            return true;
        }
        if seen.len() >= REMEMBERED {
            seen.pop_front();
        }
        seen.push_back(key);
        false
    }
}

fn header<'h>(h: &'h HeaderMap, name: &str) -> Option<&'h str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// `hex(HMAC-SHA256(secret, body))` equals `given` (hex, any case), in
/// constant time.
fn hmac_ok(secret: &[u8], body: &[u8], given: &str) -> bool {
    let Ok(given) = hex::decode(given.trim()) else {
        return false;
    };
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&given).is_ok()
}

/// Constant-time equality of two byte strings.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The provider's proof of `body` holds.
pub fn verified(provider: &str, h: &HeaderMap, secret: &[u8], body: &[u8]) -> bool {
    let prefixed = |name: &str| {
        header(h, name)
            .and_then(|v| v.strip_prefix("sha256="))
            .is_some_and(|sig| hmac_ok(secret, body, sig))
    };
    match provider {
        "github" => prefixed("x-hub-signature-256"),
        "generic" => prefixed("x-signature-256"),
        "gitea" => header(h, "x-gitea-signature").is_some_and(|sig| hmac_ok(secret, body, sig)),
        "gitlab" => header(h, "x-gitlab-token").is_some_and(|t| same(t.as_bytes(), secret)),
        _ => false,
    }
}

/// (event, delivery id) as the provider's headers say.
fn event_of<'h>(provider: &str, h: &'h HeaderMap) -> (Option<&'h str>, Option<&'h str>) {
    match provider {
        "github" => (header(h, "x-github-event"), header(h, "x-github-delivery")),
        "gitea" => (header(h, "x-gitea-event"), header(h, "x-gitea-delivery")),
        "gitlab" => (
            header(h, "x-gitlab-event"),
            header(h, "x-gitlab-event-uuid"),
        ),
        _ => (Some("push"), header(h, "x-delivery")),
    }
}

/// Whether a push of `pushed` (`refs/heads/main`) moves the Source's ref;
/// `default_branch` is the repository's, from the payload.
pub fn moves(spec: &SourceSpec, pushed: &str, default_branch: Option<&str>) -> bool {
    let Some(git) = &spec.git else {
        return false;
    };
    let want = if git.reference == "HEAD" {
        match default_branch {
            Some(b) => b,
            None => return false,
        }
    } else {
        git.reference.as_str()
    };
    pushed == format!("refs/heads/{want}")
        || pushed == format!("refs/tags/{want}")
        || pushed == want
}

#[tracing::instrument(skip_all, fields(source = %name, provider = %provider))]
pub async fn receive(
    State(st): State<AppState>,
    Path((name, provider)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let counted: &'static str = PROVIDERS
        .iter()
        .find(|p| **p == provider)
        .copied()
        .unwrap_or("other");
    // Read here, at most MAX_BODY (the route sets no limit of its own, so
    // an oversized push is counted like any other refusal).
    let answer = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(body) => handle(&st, &name, &provider, &headers, &body).await,
        Err(_) => Err((
            Outcome::TooLarge,
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!("a push payload over {MAX_BODY} bytes"),
            ),
        )),
    };
    let outcome = match &answer {
        Ok((o, _)) | Err((o, _)) => *o,
    };
    st.ctx.metrics.source_hook(counted, outcome.as_str());
    match answer {
        Ok((_, ok)) => Ok(ok),
        Err((o, e)) => {
            tracing::info!(outcome = o.as_str(), "push hook refused");
            Err(e)
        }
    }
}

type Answer = (StatusCode, Json<Value>);

async fn handle(
    st: &AppState,
    name: &str,
    provider: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Outcome, Answer), (Outcome, ApiError)> {
    let no_receiver = || {
        (
            Outcome::NoReceiver,
            ApiError::not_found(format!("no Source {name:?} with a push receiver")),
        )
    };
    if !PROVIDERS.contains(&provider) {
        return Err((
            Outcome::UnknownProvider,
            ApiError::bad_request(format!(
                "unknown provider {provider:?}, expected one of {}",
                PROVIDERS.join(", ")
            )),
        ));
    }
    let now = st.ctx.now();
    if let Some(d) = st.limits.check(&format!("hook:{name}"), true, now) {
        if !d.allowed {
            return Err((
                Outcome::RateLimited,
                ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "rate_limited",
                    format!(
                        "too many pushes for Source {name:?}; retry in {} s",
                        d.retry_after
                    ),
                ),
            ));
        }
    }
    let store_err = |e: pam_store::StoreError| (Outcome::Error, ApiError::from(e));
    let mut tx = st.ctx.store.begin().await.map_err(store_err)?;
    let s: Source = match one::<Source>(tx.as_mut(), None, name).await {
        Ok(s) => s,
        Err(_) => return Err(no_receiver()),
    };
    let spec: Option<SourceSpec> = serde_json::from_value(s.meta.spec.clone()).ok();
    let Some((spec, receiver)) = spec.and_then(|sp| sp.receiver.clone().map(|r| (sp, r))) else {
        return Err(no_receiver());
    };
    let secret = st
        .ctx
        .webhooks
        .keys
        .resolve(tx.as_mut(), &receiver.secret_ref)
        .await
        .map_err(store_err)?;
    let bad_proof = || {
        (
            Outcome::BadSignature,
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                format!("the {provider} push is not signed with Source {name:?}'s receiver secret"),
            ),
        )
    };
    match &secret {
        Some(secret) if verified(provider, headers, secret, body) => {}
        _ => return Err(bad_proof()),
    }
    let (event, delivery) = event_of(provider, headers);
    if matches!(event, Some("ping")) {
        return Ok((
            Outcome::Ping,
            (
                StatusCode::OK,
                Json(json!({ "triggered": false, "event": "ping" })),
            ),
        ));
    }
    if !matches!(event, Some("push" | "Push Hook" | "Tag Push Hook")) {
        return Err((
            Outcome::NotPush,
            ApiError::bad_request(format!(
                "event {:?} is not a push",
                event.unwrap_or("(none)")
            )),
        ));
    }
    let payload: Value = serde_json::from_slice(body).map_err(|e| {
        (
            Outcome::BadPayload,
            ApiError::bad_request(format!("the push payload is not JSON: {e}")),
        )
    })?;
    let pushed = payload["ref"].as_str().unwrap_or_default();
    let default_branch = payload["repository"]["default_branch"]
        .as_str()
        .or_else(|| payload["project"]["default_branch"].as_str());
    if !moves(&spec, pushed, default_branch) {
        return Err((
            Outcome::OtherRef,
            ApiError::bad_request(format!("a push of {pushed:?}, not Source {name:?}'s ref")),
        ));
    }
    if let Some(id) = delivery {
        if st
            .hook_deliveries
            .replayed(format!("{name}/{provider}/{id}"))
        {
            return Err((
                Outcome::Replayed,
                ApiError::bad_request(format!("delivery {id:?} was received before")),
            ));
        }
    }
    let s = match sources::request_sync(tx.as_mut(), &s, now)
        .await
        .map_err(store_err)?
    {
        Ok(s) => s,
        Err(why) => {
            return Err((
                Outcome::Suspended,
                ApiError::new(StatusCode::CONFLICT, "suspended", why),
            ))
        }
    };
    st.ctx
        .commit(tx)
        .await
        .map_err(|e| (Outcome::Error, e.into()))?;
    st.ctx.wakeups.loops.notify_one();
    Ok((
        Outcome::Accepted,
        (
            StatusCode::ACCEPTED,
            Json(json!({ "triggered": true, "source": s.name, "ref": pushed })),
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(secret: &[u8], body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret).unwrap();
        mac.update(body);
        hex::encode(mac.finalize().into_bytes())
    }

    #[test]
    fn each_provider_checks_its_own_proof() {
        let (secret, body) = (
            b"s3cret".as_slice(),
            br#"{"ref":"refs/heads/main"}"#.as_slice(),
        );
        let good = sign(secret, body);
        let mut h = HeaderMap::new();
        h.insert(
            "x-hub-signature-256",
            format!("sha256={good}").parse().unwrap(),
        );
        assert!(verified("github", &h, secret, body));
        assert!(!verified("github", &h, b"other", body));
        assert!(!verified("github", &h, secret, b"{}"));
        assert!(!verified("generic", &h, secret, body), "another header");
        let mut h = HeaderMap::new();
        h.insert("x-gitea-signature", good.parse().unwrap());
        assert!(verified("gitea", &h, secret, body));
        let mut h = HeaderMap::new();
        h.insert("x-gitlab-token", "s3cret".parse().unwrap());
        assert!(verified("gitlab", &h, secret, body));
        h.insert("x-gitlab-token", "s3cre".parse().unwrap());
        assert!(!verified("gitlab", &h, secret, body));
        assert!(!verified("bitbucket", &h, secret, body));
    }

    #[test]
    fn a_push_moves_the_sources_ref_or_the_default_branch() {
        let spec: SourceSpec = serde_json::from_value(json!({
            "git": { "url": "https://example.com/r.git", "ref": "main" },
            "projects": ["web"],
        }))
        .unwrap();
        assert!(moves(&spec, "refs/heads/main", None));
        assert!(!moves(&spec, "refs/heads/dev", Some("main")));
        let head: SourceSpec = serde_json::from_value(json!({
            "git": { "url": "https://example.com/r.git" },
            "projects": ["web"],
        }))
        .unwrap();
        assert!(moves(&head, "refs/heads/trunk", Some("trunk")));
        assert!(!moves(&head, "refs/heads/trunk", None));
    }

    #[test]
    fn a_delivery_id_counts_once() {
        let seen = Seen::default();
        assert!(!seen.replayed("a".into()));
        assert!(seen.replayed("a".into()));
        assert!(!seen.replayed("b".into()));
    }
}
