//! [`PgStore`]: the production [`Store`] on PostgreSQL.
//!
//! Runtime `sqlx::query` throughout (there is no database at compile time).
//! Status writes are `UPDATE … WHERE status = $from` after the state-machine
//! gate; spec writes are `UPDATE … WHERE resource_version = $expected`.
//!
//! # Caveats
//! - PostgreSQL aborts a transaction on a constraint error. Inserts run under
//!   a savepoint, so an `insert_*` that fails (AlreadyExists, NotFound,
//!   Invalid) leaves the transaction usable; after any other error from the
//!   database, drop the transaction and begin again.
//! - Text ordering uses `COLLATE "C"` (byte order), so it matches
//!   [`crate::memory::MemStore`] whatever the database's collation.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::{transition, HostStatus, RunStatus, WorkItemStatus};
use serde_json::{json, Value};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, Row, Transaction};
use uuid::Uuid;

#[allow(unused_imports)]
pub(crate) use crate::prelude::*;
#[allow(unused_imports)]
pub(crate) use crate::{
    short_id, ApiToken, Event, Host, Journaled, Labels, Meta, OwnedObject, PendingRun, Project,
    Role, Run, RunFilter, RunUpdate, RunUsage, SignalMarker, Source, SourceObject, SourceStatus,
    StoreError, StoreResult, Target, TokenKind, Usage, WorkItem,
};

#[allow(unused_imports)]
use rows::*;

pub use pool::PoolSettings;

/// Key of the transaction-scoped advisory lock every journaling
/// transaction holds *shared* from its first append to its end (so
/// appends never wait for one another), and the rare writes that must
/// come between appends take exclusively ([`EventTx::event_high_water`]:
/// a Webhook's change). Any constant unused elsewhere ("pamevent").
const EVENT_LOCK_KEY: i64 = 0x7061_6d65_7665_6e74;

/// Connections kept, beside the pool, for [`Store::begin_priority`]
/// (heartbeats, the re-check of held tokens, the hosts of opening
/// watches) and [`Store::tokens_by_fingerprints`]: what every request and
/// every worker's liveness waits for, read in batches, never
/// behind the pool's other work.
pub const PRIORITY_CONNECTIONS: u32 = 2;

/// The PostgreSQL store.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// [`PRIORITY_CONNECTIONS`] with the pool's options, opened when
    /// first used: liveness never waits behind the pool's other work.
    priority: PgPool,
    /// This process's id in journal notifications: its own commits'
    /// notifications wake no one of its own (it published them already).
    instance: Uuid,
}

impl PgStore {
    pub fn new(pool: PgPool) -> Self {
        let priority = sqlx::postgres::PgPoolOptions::new()
            .max_connections(PRIORITY_CONNECTIONS)
            .acquire_timeout(pool.options().get_acquire_timeout())
            .connect_lazy_with((*pool.connect_options()).clone());
        PgStore {
            pool,
            priority,
            instance: Uuid::new_v4(),
        }
    }

    /// Connects to `url` with the pool and session `settings` (pool.rs)
    /// and applies every pending migration ([`crate::db::MIGRATOR`])
    /// before returning: nothing is served on an older schema.
    pub async fn connect(url: &str, settings: &PoolSettings) -> anyhow::Result<PgStore> {
        Ok(PgStore::new(pool::open(url, settings).await?))
    }

    /// Closes the pools (waits for connections in use to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
        self.priority.close().await;
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A transaction on a connection of `pool` (the pool, or the
    /// connections kept for liveness).
    async fn begin_on(&self, pool: &PgPool) -> StoreResult<Box<dyn Tx>> {
        let tx = pool.begin().await.map_err(db_err)?;
        Ok(Box::new(PgTx {
            tx,
            events: Journaled::default(),
            event_lock: false,
            instance: self.instance,
        }))
    }
}

/// The channel journaling commits notify, for the other replicas.
const JOURNAL_CHANNEL: &str = "pam_events";

#[async_trait]
impl Store for PgStore {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn begin(&self) -> StoreResult<Box<dyn Tx>> {
        self.begin_on(&self.pool).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn begin_priority(&self) -> StoreResult<Box<dyn Tx>> {
        self.begin_on(&self.priority).await
    }

    async fn tokens_by_fingerprints(&self, fps: &[String]) -> StoreResult<Vec<ApiToken>> {
        tokens::tokens_by_fingerprints(&self.priority, fps).await
    }

    async fn read_journal(
        &self,
        after: crate::Position,
        limit: i64,
    ) -> StoreResult<crate::JournalPage> {
        events::read_journal(&self.pool, after, limit).await
    }

    async fn journal_barrier(&self, limit: std::time::Duration) -> StoreResult<()> {
        events::journal_barrier(&self.pool, limit).await
    }

    async fn refresh_statistics(&self) -> StoreResult<()> {
        sqlx::query("ANALYZE runs")
            .execute(&self.pool)
            .await
            .map_err(db_err)?;
        Ok(())
    }

    async fn journal_wakeups(&self) -> StoreResult<Option<tokio::sync::mpsc::Receiver<()>>> {
        let mut listener = sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(db_err)?;
        listener.listen(JOURNAL_CHANNEL).await.map_err(db_err)?;
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let own = self.instance.to_string();
        tokio::spawn(async move {
            loop {
                let woke = match listener.try_recv().await {
                    // Another process's commit, or the connection lost
                    // (reconnected at the next call; notifications may
                    // have been missed): look.
                    Ok(Some(n)) => !n.payload().starts_with(&own),
                    Ok(None) => true,
                    Err(sqlx::Error::PoolClosed) => return,
                    Err(e) => {
                        tracing::debug!(error = %e, "journal listener: reconnecting");
                        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
                        true
                    }
                };
                // Full: a wake-up is pending already (they coalesce).
                if woke && tx.try_send(()).is_err() && tx.is_closed() {
                    return;
                }
            }
        });
        Ok(Some(rx))
    }

    async fn ready(&self) -> Result<(), String> {
        let applied: Vec<i64> = sqlx::query_scalar(
            "SELECT version FROM _sqlx_migrations WHERE success ORDER BY version",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(|e| format!("database: {e}"))?;
        let missing: Vec<i64> = crate::db::MIGRATOR
            .iter()
            .map(|m| m.version)
            .filter(|v| !applied.contains(v))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(format!("migrations not applied: {missing:?}"))
        }
    }
}

struct PgTx {
    tx: Transaction<'static, Postgres>,
    /// Events appended so far, returned by commit.
    events: Journaled,
    /// Whether this transaction holds the append lock (shared).
    event_lock: bool,
    /// The store's [`PgStore::instance`].
    instance: Uuid,
}

// ---- errors -------------------------------------------------------------------

/// Maps a database error: unique violation → AlreadyExists, FK violation →
/// NotFound (a referenced row is missing), check violation → Invalid.
fn db_err(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e {
        let what = d.constraint().unwrap_or("").to_string();
        match d.code().as_deref() {
            Some("23505") => return StoreError::AlreadyExists(what),
            Some("23503") => return StoreError::NotFound(format!("referenced row ({what})")),
            Some("23514") => return StoreError::Invalid(format!("check {what} failed")),
            // The transaction lost a race PostgreSQL could only break by
            // aborting it: like a guarded update that matched nothing, the
            // caller decides again in a new transaction (ingest retries;
            // a loop waits for its next pass).
            Some("40P01") => return StoreError::Conflict(format!("deadlock: {}", d.message())),
            Some("40001") => {
                return StoreError::Conflict(format!("serialization failure: {}", d.message()))
            }
            // Waits cut short by the session timeouts (pool.rs), and a
            // server shutting down or not accepting yet: try again later.
            Some("55P03") => {
                return StoreError::Unavailable(format!("lock wait timed out: {}", d.message()))
            }
            Some("57014" | "25P03" | "57P01" | "57P02" | "57P03") => {
                return StoreError::Unavailable(d.message().to_string())
            }
            Some(c) if c.starts_with("08") => {
                return StoreError::Unavailable(d.message().to_string())
            }
            _ => {}
        }
    }
    match e {
        // No connection within the acquire timeout, or none can be made:
        // the database is down, unreachable or saturated.
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::Io(_) => {
            StoreError::Unavailable(e.to_string())
        }
        _ => StoreError::Database(e.to_string()),
    }
}

/// Like [`db_err`], but an FK violation on delete means the row is still
/// referenced: Invalid.
fn db_err_delete(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e {
        if d.code().as_deref() == Some("23503") {
            // No database names in answers: the constraint goes to the
            // debug log only.
            tracing::debug!(
                constraint = d.constraint().unwrap_or(""),
                "delete refused: still referenced"
            );
            return StoreError::Invalid("still referenced by other objects".into());
        }
    }
    db_err(e)
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Database(format!("corrupt {what} in database: {e}"))
}

/// Binds the seven meta columns in [`META_COLS`] order.
macro_rules! bind_meta {
    ($q:expr, $m:expr) => {
        $q.bind(&$m.spec)
            .bind(labels_to_json(&$m.labels))
            .bind(labels_to_json(&$m.annotations))
            .bind($m.generation)
            .bind($m.resource_version)
            .bind($m.observed_generation)
            .bind(&$m.conditions)
    };
}

impl PgTx {
    fn conn(&mut self) -> &mut sqlx::PgConnection {
        &mut self.tx
    }

    /// Takes the append lock, shared, before this transaction's first
    /// append; held until it ends. Shared holders never wait for each
    /// other: journaling transactions commit concurrently, and the
    /// journal's order comes from the readers' horizon instead
    /// ([`crate::Position`]). Only an exclusive taker
    /// ([`EventTx::event_high_water`]) waits for them, and they for it.
    async fn lock_event_order(&mut self) -> StoreResult<()> {
        if !self.event_lock {
            let q = sqlx::query("SELECT pg_advisory_xact_lock_shared($1)").bind(EVENT_LOCK_KEY);
            self.exec(q).await?;
            self.event_lock = true;
        }
        Ok(())
    }

    /// Runs `COPY … FROM STDIN` with `data` (text format) in this
    /// transaction.
    async fn copy_in(&mut self, statement: &str, data: &[u8]) -> Result<u64, sqlx::Error> {
        let mut copy = self.conn().copy_in_raw(statement).await?;
        if let Err(e) = copy.send(data).await {
            let _ = copy.abort(e.to_string()).await;
            return Err(e);
        }
        copy.finish().await
    }

    async fn savepoint(&mut self) -> StoreResult<()> {
        self.exec(sqlx::query("SAVEPOINT pam_write")).await?;
        Ok(())
    }

    /// Ends the savepoint taken by [`Self::savepoint`]: released on success,
    /// rolled back to on error (so the transaction stays usable).
    async fn end_savepoint<T>(&mut self, r: Result<T, sqlx::Error>) -> StoreResult<T> {
        match r {
            Ok(v) => {
                self.exec(sqlx::query("RELEASE SAVEPOINT pam_write"))
                    .await?;
                Ok(v)
            }
            Err(e) => {
                self.undo_savepoint().await?;
                Err(db_err(e))
            }
        }
    }

    async fn undo_savepoint(&mut self) -> StoreResult<()> {
        for sql in [
            "ROLLBACK TO SAVEPOINT pam_write",
            "RELEASE SAVEPOINT pam_write",
        ] {
            self.exec(sqlx::query(sql)).await?;
        }
        Ok(())
    }

    async fn exists(&mut self, table: &str, id: Uuid) -> StoreResult<bool> {
        let q = format!("SELECT EXISTS (SELECT 1 FROM {table} WHERE id = $1)");
        sqlx::query_scalar(&q)
            .bind(id)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)
    }

    /// The error for a guarded update that matched no row.
    async fn zero_rows(&mut self, table: &str, id: Uuid, why: String) -> StoreError {
        match self.exists(table, id).await {
            Ok(true) => StoreError::Conflict(why),
            Ok(false) => StoreError::NotFound(format!("{table} {id}")),
            Err(e) => e,
        }
    }

    /// Runs statement `q`: how many rows it touched.
    async fn exec(
        &mut self,
        q: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
    ) -> StoreResult<u64> {
        let r = q.execute(self.conn()).await.map_err(db_err)?;
        Ok(r.rows_affected())
    }

    /// Every row of `q`, each mapped by `f`.
    async fn rows<T>(
        &mut self,
        q: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
        f: fn(&PgRow) -> StoreResult<T>,
    ) -> StoreResult<Vec<T>> {
        let rows = q.fetch_all(self.conn()).await.map_err(db_err)?;
        all(rows, f)
    }

    /// The row of `q`, if any, mapped by `f`.
    async fn row<T>(
        &mut self,
        q: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
        f: fn(&PgRow) -> StoreResult<T>,
    ) -> StoreResult<Option<T>> {
        let row = q.fetch_optional(self.conn()).await.map_err(db_err)?;
        row.as_ref().map(f).transpose()
    }

    /// The row an unguarded `UPDATE … WHERE id = $1 RETURNING` of `table`
    /// wrote, mapped by `f`; `NotFound` when there is no row `id`.
    async fn written<T>(
        &mut self,
        q: sqlx::query::Query<'_, Postgres, sqlx::postgres::PgArguments>,
        (table, id): (&str, Uuid),
        f: fn(&PgRow) -> StoreResult<T>,
    ) -> StoreResult<T> {
        self.row(q, f)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("{table} {id}")))
    }

    /// How many rows of `table` are in each status (statuses with none are
    /// left out), in status order.
    async fn count_by_status<S>(&mut self, table: &str) -> StoreResult<Vec<(S, i64)>>
    where
        S: std::str::FromStr,
        S::Err: std::fmt::Display,
    {
        let sql = format!("SELECT status, count(*) FROM {table} GROUP BY status ORDER BY status");
        let rows: Vec<(String, i64)> = sqlx::query_as(&sql)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        let what = format!("{table}.status");
        rows.into_iter()
            .map(|(s, n)| Ok((s.parse().map_err(|e| corrupt(&what, e))?, n)))
            .collect()
    }

    async fn one_run(&mut self, sql: &str, id: Uuid) -> StoreResult<Option<Run>> {
        self.row(sqlx::query(sql).bind(id), run_from_row).await
    }
}

#[async_trait]
impl Tx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn commit(self: Box<Self>) -> StoreResult<Journaled> {
        let mut me = *self;
        if let Some(last) = me.events.last_seq() {
            // Delivered at commit: other pamd replicas read the journal
            // after what they have (Store::journal_wakeups).
            sqlx::query("SELECT pg_notify($1, $2)")
                .bind(JOURNAL_CHANNEL)
                .bind(format!("{} {}", me.instance, last))
                .execute(&mut *me.tx)
                .await
                .map_err(db_err)?;
        }
        me.tx.commit().await.map_err(db_err)?;
        Ok(me.events)
    }

    fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    fn pending_events(&self) -> &Journaled {
        &self.events
    }
}

// The aggregates' parts of the transaction (after the helpers and
// macros above, which they use), and the row mapping they share.
mod activity;
mod applysets;
mod attach;
mod charts;
mod deps;
mod dispatch;
mod events;
mod hosts;
mod idempotency;
mod leader;
mod managed;
mod named;
mod objects;
mod pool;
mod results;
mod rows;
mod runs;
mod schedules;
mod secrets;
mod sources;
mod tables;
mod tokens;
mod usage;
mod webhooks;
mod work_items;
