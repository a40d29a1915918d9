//! The API skeleton through `tower::ServiceExt::oneshot`, and the startup
//! retention purge moved by a manual clock.

mod common;

use axum::http::StatusCode;
use chrono::{Duration, TimeZone, Utc};
use pam_controller::api::AppState;
use pam_controller::clock::ManualClock;
use serde_json::Value;
use std::sync::Arc;

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
    common::request(state.clone(), None, method, uri, None).await
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
    let unavailable = StatusCode::SERVICE_UNAVAILABLE;
    common::assert_error((status, &body), unavailable, "not_ready", "migrations");
}

#[tokio::test]
async fn unknown_routes_and_methods_are_json_errors() {
    let state = state().await;
    let (status, body) = call(&state, "GET", "/api/v1/nope").await;
    let not_found = StatusCode::NOT_FOUND;
    common::assert_error((status, &body), not_found, "not_found", "/api/v1/nope");

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
