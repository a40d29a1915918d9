//! A request that reads a row and writes it back under its
//! resourceVersion guard, racing a write it did not cause (a loop's
//! condition update, another request), runs again instead of answering
//! the operator 409 (api::retry). Made deterministic on real PostgreSQL:
//! a second connection holds the row changed and locked while the request
//! reads it, and commits once the request waits on the lock — the
//! request's guarded write then finds the version moved.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use common::request;
use pam_controller::api::AppState;
use pam_controller::clock::SystemClock;
use pam_store::TokenKind;
use serde_json::json;
use sqlx::PgPool;

async fn setup() -> (AppState, PgPool, String) {
    let pool = pam_testkit::testdb::fresh_pool().await.unwrap();
    let store = Arc::new(pam_store::postgres::PgStore::new(pool.clone()));
    let state = AppState::new(store, Arc::new(SystemClock), Default::default());
    let token = common::token(&state, TokenKind::Operator, "ops", None).await;
    let (status, body) = common::apply(&state, &token, "tree.yaml", common::WEB_T_R1).await;
    assert!(status.is_success(), "{status} {body}");
    (state, pool, token)
}

/// On a fresh [`common::WEB_T_R1`], runs `uri` (a POST with `body`) while another
/// transaction bumps the row `bump` updates and holds it until the request
/// waits on its lock; returns the request's answer.
async fn racing(
    bump: &str,
    uri: &str,
    body: Option<serde_json::Value>,
) -> (StatusCode, serde_json::Value) {
    let (st, pool, token) = setup().await;
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query(bump).execute(&mut *blocker).await.unwrap();
    let (st2, token2, uri2) = (st.clone(), token.to_string(), uri.to_string());
    let call = tokio::spawn(async move { request(st2, Some(&token2), "POST", &uri2, body).await });
    // Until the request waits on the row the blocker holds.
    let waiting = async {
        loop {
            let n: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_locks WHERE locktype IN ('transactionid', 'tuple') AND NOT granted",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            if n > 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the request never waited on the locked row");
    blocker.commit().await.unwrap();
    call.await.unwrap()
}

#[tokio::test]
async fn a_stop_that_loses_a_race_to_a_loop_runs_again() {
    let bump = "UPDATE runs SET resource_version = resource_version + 1";
    let (status, body) = racing(bump, "/api/v1/projects/web/runs/r1/stop", None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["spec"]["stopped"], true, "{body}");
}

/// A task's move does not lose this race (it passed before api::retry
/// too): kept so that stays true.
#[tokio::test]
async fn a_task_move_that_loses_a_race_to_a_loop_runs_again() {
    let bump = "UPDATE work_items SET resource_version = resource_version + 1";
    let (status, body) = racing(
        bump,
        "/api/v1/projects/web/tasks/t/transition",
        Some(json!({ "to": "doing" })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["task"]["spec"]["status"], "doing", "{body}");
}
