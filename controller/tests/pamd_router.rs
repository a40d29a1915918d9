//! The API skeleton through `tower::ServiceExt::oneshot`, and the startup
//! retention purge moved by a manual clock.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use chrono::{Duration, TimeZone, Utc};
use http_body_util::BodyExt;
use pam_controller::api::{router, AppState};
use pam_controller::clock::ManualClock;
use serde_json::Value;
use std::sync::Arc;
use tower::ServiceExt;

async fn state() -> AppState {
    state_and_pool().await.0
}

/// The state and its database (for SQL behind the API's back).
async fn state_and_pool() -> (AppState, sqlx::PgPool) {
    let start = Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap();
    let pool = pam_testkit::testdb::fresh_pool().await.unwrap();
    let state = AppState::new(
        Arc::new(pam_store::postgres::PgStore::new(pool.clone())),
        Arc::new(ManualClock::new(start)),
        Default::default(),
    );
    (state, pool)
}

async fn call(state: &AppState, method: &str, uri: &str) -> (StatusCode, Value) {
    let response = router(state.clone())
        .oneshot(
            Request::builder()
                .method(method)
                .uri(uri)
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap())
}

#[tokio::test]
async fn healthz_version_and_readyz() {
    let state = state().await;
    let (status, body) = call(&state, "GET", "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, serde_json::json!({"status": "ok"}));

    let (status, body) = call(&state, "GET", "/api/v1/version").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["name"], "pamd");

    let (status, body) = call(&state, "GET", "/readyz").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ready");
}

#[tokio::test]
async fn readyz_is_503_when_a_migration_is_missing() {
    let (state, pool) = state_and_pool().await;
    sqlx::query(
        "DELETE FROM _sqlx_migrations WHERE version = (SELECT max(version) FROM _sqlx_migrations)",
    )
    .execute(&pool)
    .await
    .unwrap();
    let (status, body) = call(&state, "GET", "/readyz").await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(body["error"]["code"], "not_ready");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("migrations"));
}

#[tokio::test]
async fn unknown_routes_and_methods_are_json_errors() {
    let state = state().await;
    let (status, body) = call(&state, "GET", "/api/v1/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("/api/v1/nope"));

    let (status, body) = call(&state, "DELETE", "/healthz").await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(body["error"]["code"], "method_not_allowed");
}

#[tokio::test]
async fn startup_purge_deletes_only_events_past_retention() {
    let (state, pool) = state_and_pool().await;
    let now = state.ctx.now();
    for (topic, age_days) in [("old", 31), ("edge", 29), ("new", 0)] {
        sqlx::query("INSERT INTO events (topic, payload, created_at) VALUES ($1, '{}', $2)")
            .bind(topic)
            .bind(now - Duration::days(age_days))
            .execute(&pool)
            .await
            .unwrap();
    }
    let purged = pam_controller::reconcile::retention::purge(&state.ctx, 30)
        .await
        .unwrap();
    assert_eq!(purged, 1);
    let left: Vec<String> = sqlx::query_scalar("SELECT topic FROM events ORDER BY seq")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(left, ["edge", "new"]);
}
