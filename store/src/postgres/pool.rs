//! How pamd's connections to PostgreSQL are opened: the pool's size and
//! acquire timeout, and the session timeouts every connection starts with
//! (docs/operations.md "Database timeouts").
//!
//! # Why every session carries timeouts
//! Replicas share one database, and one session can make the others wait:
//! row locks are held to commit, and so is the journal's append lock — but
//! journaling transactions hold that one *shared* (they never wait for
//! each other: no lock orders the journal's commits), and
//! only a Webhook's change takes it exclusively, waiting for every append
//! in flight and making new ones wait for it. A pamd that stops in the
//! middle of a transaction (SIGSTOP, a VM pause, a stuck runtime) would
//! hold its locks for as long as it is stopped, and the writes that need
//! them would queue behind it. It would also hold back the journal's
//! horizon (`pg_snapshot_xmin`, events.rs): a transaction with an id still
//! in flight delays the delivery — not the commits — of every event
//! journaled after it began, on every replica, until it ends.
//! - `idle_in_transaction_session_timeout` ends such a session (PostgreSQL
//!   terminates it and rolls back), which releases its locks and lets the
//!   journal's horizon move on;
//! - `lock_timeout` bounds every lock wait, the append lock's included (it
//!   is a heavyweight lock like any other): a waiter gets SQLSTATE
//!   55P03, which [`super::db_err`] maps to [`crate::StoreError::Unavailable`]
//!   (the API answers 503 with `Retry-After`; a loop tries at its next
//!   pass) instead of waiting for a process that may never come back;
//! - `statement_timeout` bounds one statement (a runaway query), and so
//!   how long one transaction can hold the journal's horizon back while
//!   it works.
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

/// A pooled connection idle longer than this is pinged before it is
/// handed out (one used more recently was pinged when it was released).
const PING_IDLE_AFTER: Duration = Duration::from_secs(1);

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
        // sqlx pings every connection when it is released and, by default,
        // again when it is acquired: a round trip per transaction that,
        // under load, follows a release by microseconds (seven
        // of the ~60 round trips of a bench-queue claim and report). Only
        // a connection idle for a while (the server may have gone away
        // since) is pinged first.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for < PING_IDLE_AFTER {
                    return Ok(true);
                }
                // A failed ping discards the connection; the pool opens
                // another.
                Ok(conn.ping().await.is_ok())
            })
        })
        .connect_with(base.options(settings.session_options()))
        .await
        .context("connect to PostgreSQL")
}
