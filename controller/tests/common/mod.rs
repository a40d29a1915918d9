//! Helpers shared by the in-process API tests (`mod common;`).

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use pam_controller::api::{router, AppState};
use serde_json::{json, Value};
use tower::ServiceExt;

/// One request through the router, in process: status and JSON body
/// (a non-JSON body as a JSON string, an empty one as null).
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
    let mut tx = state.ctx.store.begin().await.unwrap();
    let (_, token) = pam_controller::rules::tokens::mint(
        &mut *tx,
        kind,
        name.into(),
        host.map(str::to_string),
        chrono::Utc::now(),
    )
    .await
    .unwrap();
    state.ctx.commit(tx).await.unwrap();
    token
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
