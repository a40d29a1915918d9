//! Throwaway databases for tests: each call gives a fresh, migrated, empty
//! database on the test server — `DATABASE_URL` when set.

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgPool};
use std::str::FromStr;

/// A fresh migrated database; the pool is small (tests are many).
pub async fn fresh_pool() -> anyhow::Result<PgPool> {
    let url = std::env::var("DATABASE_URL")
        .context("DATABASE_URL is not set (the embedded test cluster is not wired yet)")?;
    let admin = PgConnectOptions::from_str(&url)?;
    let name = format!("pam_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = admin
        .connect()
        .await
        .context("connect to the test server")?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .connect_with(admin.database(&name))
        .await?;
    crate::db::MIGRATOR.run(&pool).await.context("migrate")?;
    Ok(pool)
}
