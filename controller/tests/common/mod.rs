//! Helpers shared by the in-process API tests (`mod common;`).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use pam_controller::api::{router, AppState};
use pam_store::Host;
use serde_json::{json, Value};
use tower::ServiceExt;

/// One request through the router, in process: status and JSON body
/// (a non-JSON body as a JSON string, an empty one as null).
#[allow(dead_code)] // not every test binary that shares this module uses it
pub async fn request(
    state: AppState,
    token: Option<&str>,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = Request::builder().method(method).uri(uri);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let req = json_request(req, body);
    let resp = router(state).oneshot(req).await.unwrap();
    let status = resp.status();
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    let v = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|_| json!(String::from_utf8_lossy(&bytes)))
    };
    (status, v)
}

/// `req` with `body` as its JSON body (an empty body for None).
#[allow(dead_code)]
pub fn json_request(req: axum::http::request::Builder, body: Option<Value>) -> Request<Body> {
    match body {
        Some(b) => req
            .header("content-type", "application/json")
            .body(Body::from(b.to_string())),
        None => req.body(Body::empty()),
    }
    .unwrap()
}

/// Mints an operator token named `ops` in `state`'s store.
#[allow(dead_code)] // not every test binary that shares this module uses it
pub async fn operator_token(state: &AppState) -> String {
    token(state, pam_store::TokenKind::Operator, "ops", None).await
}

/// Mints a token of `kind` named `name` (a worker's for `host`).
#[allow(dead_code)]
pub async fn token(
    state: &AppState,
    kind: pam_store::TokenKind,
    name: &str,
    host: Option<&str>,
) -> String {
    token_with_id(state, kind, name, host).await.1
}

/// [`token`], and the token's id (to revoke it).
#[allow(dead_code)]
pub async fn token_with_id(
    state: &AppState,
    kind: pam_store::TokenKind,
    name: &str,
    host: Option<&str>,
) -> (uuid::Uuid, String) {
    let mut tx = state.ctx.store.begin().await.unwrap();
    let (t, token) = pam_controller::rules::tokens::mint(
        &mut *tx,
        kind,
        name.into(),
        host.map(str::to_string),
        chrono::Utc::now(),
    )
    .await
    .unwrap();
    state.ctx.commit(tx).await.unwrap();
    (t.id, token)
}

/// An API over a fresh database, its clock stopped at 2026-03-01 12:00 UTC
/// (moved by the test).
#[allow(dead_code)]
pub async fn pg_state() -> (AppState, std::sync::Arc<pam_controller::clock::ManualClock>) {
    use chrono::TimeZone;
    let clock = std::sync::Arc::new(pam_controller::clock::ManualClock::new(
        chrono::Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap(),
    ));
    let store = pam_store::postgres::PgStore::new(pam_testkit::testdb::fresh_pool().await.unwrap());
    let state = AppState::new(
        std::sync::Arc::new(store),
        clock.clone(),
        Default::default(),
    );
    (state, clock)
}

/// An operator's API over a fresh database ([`pg_state`]): what most API
/// tests start from (each adds its own calls in an `impl` of its own).
#[allow(dead_code)]
pub struct OpsApi {
    pub state: AppState,
    /// An operator token, `ops`.
    pub token: String,
    pub clock: std::sync::Arc<pam_controller::clock::ManualClock>,
}

#[allow(dead_code)]
impl OpsApi {
    pub async fn new() -> OpsApi {
        let (state, clock) = pg_state().await;
        let token = operator_token(&state).await;
        OpsApi {
            state,
            token,
            clock,
        }
    }

    /// One request as `token` (none: anonymous).
    pub async fn call_as(
        &self,
        token: Option<&str>,
        method: &str,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        request(self.state.clone(), token, method, uri, body).await
    }

    /// Applies Runs `names` of task cart in project web (which the test's
    /// tree made).
    pub async fn apply_runs(&self, names: &[&str]) {
        let runs: Vec<String> = names
            .iter()
            .map(|n| format!("apiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {n}, project: web}}\nspec: {{task: cart, provider: claude, prompt: hi, cwd: /tmp}}\n"))
            .collect();
        let (s, v) = apply(&self.state, &self.token, "runs.yaml", &runs.join("---\n")).await;
        assert_eq!(s, StatusCode::OK, "{v}");
    }

    /// As worker token `wt`, registers host box-a with room for
    /// `capacity` runs and claims once: the claimed run ids, asserted to
    /// be `n`.
    pub async fn register_and_claim(&self, wt: &str, capacity: usize, n: usize) -> Vec<String> {
        let register = json!({"name": "box-a", "platform": "linux", "instance_id": uuid::Uuid::new_v4(), "capacity": capacity, "labels": {}, "version": "t"});
        let (s, v) = self
            .call_as(Some(wt), "POST", "/api/v1/workers/register", Some(register))
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let (_, v) = self
            .call_as(Some(wt), "POST", "/api/v1/workers/claim?wait=0", None)
            .await;
        let ids: Vec<String> = v["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["run_id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ids.len(), n, "{v}");
        ids
    }
}

/// `POST /api/v1/apply` of one file `name` holding `yaml`.
#[allow(dead_code)]
pub async fn apply(state: &AppState, token: &str, name: &str, yaml: &str) -> (StatusCode, Value) {
    let body = json!({ "files": [{ "name": name, "content": yaml }] });
    request(
        state.clone(),
        Some(token),
        "POST",
        "/api/v1/apply",
        Some(body),
    )
    .await
}

/// What signals leave on a run, to compare two worlds that took the same
/// signals (ids and names differ between them).
#[allow(dead_code)]
pub fn signal_state(r: &pam_store::Run) -> impl std::fmt::Debug + PartialEq {
    (
        r.status,
        r.attempt,
        r.last_progress_seq,
        r.exit_code,
        r.failure_reason,
        r.started_at,
        r.finished_at,
        r.requeue_at,
        r.meta.resource_version,
    )
}

/// A small deterministic generator (xorshift): a stress test's choices,
/// the same on every run and, from the same seed, in two worlds.
#[allow(dead_code)]
pub struct Rng(pub u64);

#[allow(dead_code)]
impl Rng {
    /// The next number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    /// [`Rng::below`] for an index or a count.
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }
}

/// Disables host `id` (what `spec.disabled: true` applied writes).
#[allow(dead_code)]
pub async fn disable_host(ctx: &pam_controller::ctx::Ctx, id: uuid::Uuid) {
    let mut tx = ctx.store.begin().await.unwrap();
    let mut h = tx.get::<Host>(id).await.unwrap().unwrap();
    let rv = h.meta.resource_version;
    h.disabled = true;
    tx.update(&h, rv).await.unwrap();
    ctx.commit(tx).await.unwrap();
}

/// The message of an API error body (the one JSON error shape).
#[allow(dead_code)]
pub fn error_message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_default()
}

/// The next chunk of an open event stream (20 s at most); panics when
/// the stream goes silent or ends.
#[allow(dead_code)]
pub async fn next_chunk(resp: &mut reqwest::Response) -> String {
    let chunk = tokio::time::timeout(std::time::Duration::from_secs(20), resp.chunk())
        .await
        .expect("the stream went silent")
        .unwrap()
        .expect("the stream ended");
    String::from_utf8_lossy(&chunk).into_owned()
}

/// Each of a batch answer's `results`' `field` (an apply's `action`, a
/// signal batch's `outcome`), in order.
#[allow(dead_code)]
pub fn results<'a>(v: &'a Value, field: &str) -> Vec<&'a str> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[field].as_str().unwrap())
        .collect()
}

/// Asserts that an answer is the one JSON error shape, with `status`,
/// `code` and a message that contains `part`.
#[allow(dead_code)]
pub fn assert_error(got: (StatusCode, &Value), status: StatusCode, code: &str, part: &str) {
    let (s, v) = got;
    assert_eq!(s, status, "{v}");
    assert_eq!(v["error"]["code"], code, "{v}");
    assert!(error_message(v).contains(part), "{v}");
}

/// Project web, its Task t and Run r1 of t (claude, in /tmp).
#[allow(dead_code)]
pub const WEB_T_R1: &str = "\
apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {displayName: Web}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: t, project: web}
spec: {title: T}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: r1, project: web}
spec: {task: t, provider: claude, prompt: hi, cwd: /tmp}
";
