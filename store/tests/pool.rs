//! pamd's pool (store/src/postgres/pool.rs) pings a connection before
//! handing it out only when it sat idle for over a second: a
//! connection whose server session ended while it was idle is still
//! replaced, not handed to a transaction that would fail on it.

use std::time::Duration;

use pam_store::postgres::{PgStore, PoolSettings};
use pam_store::prelude::*;
use pam_testkit::testdb::fresh_database_url;

async fn backend_pid(store: &PgStore) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(store.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_connection_whose_session_ended_while_idle_is_replaced() {
    let url = fresh_database_url().await.unwrap();
    let one = PoolSettings {
        max_connections: 1,
        ..PoolSettings::default()
    };
    let store = PgStore::connect(&url, &one).await.unwrap();
    let other = PgStore::connect(&url, &one).await.unwrap();
    let pid = backend_pid(&store).await;
    let ended: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(pid)
        .fetch_one(other.pool())
        .await
        .unwrap();
    assert!(ended);
    // sqlx's idle time is its own monotonic clock: no clock to move.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut tx = store.begin().await.expect("a live connection");
    tx.count_runs_by_status().await.unwrap();
    tx.commit().await.unwrap();
    assert_ne!(backend_pid(&store).await, pid, "a new session");
}
