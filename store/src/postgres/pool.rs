//! How pamd's connections to PostgreSQL are opened: the pool's size and
//! acquire timeout, and the session timeouts every connection starts with
//! (issue 30, docs/operations.md "Database timeouts").
//!
//! # Why every session carries timeouts
//! Replicas share one database, and one session can make the others wait:
//! the journal's order lock (`pg_advisory_xact_lock`, events.rs) is held
//! from a transaction's first event to its commit, and row locks likewise.
//! A pamd that stops in the middle of a transaction (SIGSTOP, a VM pause, a
//! stuck runtime) would hold them for as long as it is stopped, and every
//! other replica's writes and the leader's loops would queue behind it.
//! - `idle_in_transaction_session_timeout` ends such a session (PostgreSQL
//!   terminates it and rolls back), which releases its locks;
//! - `lock_timeout` bounds every lock wait, the advisory lock's included
//!   (it is a heavyweight lock like any other): a waiter gets SQLSTATE
//!   55P03, which [`super::db_err`] maps to [`crate::StoreError::Unavailable`]
//!   (the API answers 503 with `Retry-After`; a loop tries at its next
//!   pass) instead of waiting for a process that may never come back;
//! - `statement_timeout` bounds one statement (a runaway query).
//!
//! One set for every kind of transaction (API, apply, loops, stream
//! catch-up): no role needs a lock for longer than a few seconds, no role
//! keeps a transaction open while it does something else, and the one
//! role with long statements (a big apply's bulk inserts) sets the
//! statement ceiling for all.
//!
//! Migrations run on a connection of their own without these timeouts:
//! sqlx's migration lock waits for another replica migrating at the same
//! start, and a schema change may wait for running queries.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions as _, Connection as _, PgPool};

/// The pool and session settings (`[database]` in pamd.toml).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PoolSettings {
    /// The most connections this pamd opens.
    pub max_connections: u32,
    /// How long a request waits for a connection: a database that is down
    /// (or a pool exhausted) answers 503 after this, not after 10 s.
    pub acquire_timeout: Duration,
    /// `idle_in_transaction_session_timeout`: a session idle this long
    /// inside a transaction is ended by PostgreSQL (its locks released).
    pub idle_in_transaction_timeout: Duration,
    /// `lock_timeout`: the longest any statement waits for a lock.
    pub lock_timeout: Duration,
    /// `statement_timeout`: the longest one statement may run.
    pub statement_timeout: Duration,
}

impl Default for PoolSettings {
    fn default() -> Self {
        PoolSettings {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(1),
            idle_in_transaction_timeout: Duration::from_secs(5),
            lock_timeout: Duration::from_secs(3),
            statement_timeout: Duration::from_secs(60),
        }
    }
}

impl PoolSettings {
    /// The session parameters every pool connection starts with (sent at
    /// connect time, so no connection is ever without them). 0 would mean
    /// "no limit" to PostgreSQL: a zero duration is sent as 1 ms.
    fn session_options(&self) -> [(&'static str, String); 3] {
        let ms = |d: Duration| format!("{}ms", d.as_millis().max(1));
        [
            (
                "idle_in_transaction_session_timeout",
                ms(self.idle_in_transaction_timeout),
            ),
            ("lock_timeout", ms(self.lock_timeout)),
            ("statement_timeout", ms(self.statement_timeout)),
        ]
    }
}

/// Applies the migrations on a connection of their own (no timeouts: see
/// the module doc), then opens the pool with `settings`. Connections are
/// named `pamd <pid>` in `pg_stat_activity` (unless the URL names them:
/// `application_name=`), so an operator can tell which process a session
/// belongs to.
pub(super) async fn open(url: &str, settings: &PoolSettings) -> anyhow::Result<PgPool> {
    use anyhow::Context as _;
    let base: PgConnectOptions = url.parse().context("parse the database URL")?;
    // The URL's own name, when it gives one, wins.
    let base = match base.get_application_name() {
        Some(_) => base,
        None => base.application_name(&format!("pamd {}", std::process::id())),
    };
    let mut conn = base.connect().await.context("connect to PostgreSQL")?;
    crate::db::MIGRATOR
        .run(&mut conn)
        .await
        .context("apply migrations")?;
    conn.close()
        .await
        .context("close the migration connection")?;
    PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        .connect_with(base.options(settings.session_options()))
        .await
        .context("connect to PostgreSQL")
}
