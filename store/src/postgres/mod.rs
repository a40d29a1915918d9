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
    short_id, ApiToken, Event, Host, Labels, Meta, Project, Run, RunFilter, RunUpdate,
    SignalMarker, StoreError, StoreResult, Target, TokenKind, WorkItem,
};

/// Key of the transaction-scoped advisory lock that orders event appends
/// (module doc of [`super`]): any constant unused elsewhere ("pamevent").
const EVENT_LOCK_KEY: i64 = 0x7061_6d65_7665_6e74;

const META_COLS: &str =
    "spec, labels, annotations, generation, resource_version, observed_generation, conditions";

fn project_cols() -> String {
    format!("id, name, slug, description, status, {META_COLS}, created_at, updated_at")
}

fn work_item_cols() -> String {
    format!(
        "id, project_id, parent_id, name, kind, title, description, status, assignee, path, \
         sort_order, {META_COLS}, created_at, updated_at"
    )
}

fn run_cols() -> String {
    format!(
        "id, project_id, task_id, name, host_id, provider, prompt, cwd, session_name, status, \
         attempt, last_progress_seq, failure_reason, pending_since, exit_code, started_at, \
         finished_at, target, max_attempts, backoff_seconds, backoff_max_seconds, \
         dispatch_timeout_seconds, stop_requested, requeue_at, eligible_host_seen, {META_COLS}, \
         created_at, updated_at"
    )
}

fn host_cols() -> String {
    format!(
        "id, name, platform, token_fingerprint, status, instance_id, instance_suspect, \
         instance_flagged_at, last_seen_at, capacity, disabled, presented_instance_id, \
         dispatch_labels, {META_COLS}, created_at, updated_at"
    )
}

const TOKEN_COLS: &str =
    "id, name, kind, fingerprint, host_name, created_at, last_used_at, revoked_at";

/// `cols` with every column qualified by `alias` (for joins and CTEs).
fn qualified(alias: &str, cols: &str) -> String {
    cols.split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The PostgreSQL store.
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    pub fn new(pool: PgPool) -> Self {
        PgStore { pool }
    }

    /// Connects to `url` with a pool of up to `max_connections` and applies
    /// every pending migration ([`crate::db::MIGRATOR`]) before returning:
    /// nothing is served on an older schema.
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgStore> {
        use anyhow::Context as _;
        let pool = sqlx::postgres::PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect(url)
            .await
            .context("connect to PostgreSQL")?;
        crate::db::MIGRATOR
            .run(&pool)
            .await
            .context("apply migrations")?;
        Ok(PgStore { pool })
    }

    /// Closes the pool (waits for connections in use to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

#[async_trait]
impl Store for PgStore {
    async fn begin(&self) -> StoreResult<Box<dyn Tx>> {
        let tx = self.pool.begin().await.map_err(db_err)?;
        Ok(Box::new(PgTx {
            tx,
            events: Vec::new(),
            event_lock: false,
        }))
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
    events: Vec<Event>,
    /// Whether this transaction holds the event-order lock.
    event_lock: bool,
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
            _ => {}
        }
    }
    StoreError::Database(e.to_string())
}

/// Like [`db_err`], but an FK violation on delete means the row is still
/// referenced: Invalid.
fn db_err_delete(e: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(d) = &e {
        if d.code().as_deref() == Some("23503") {
            return StoreError::Invalid(format!(
                "still referenced ({})",
                d.constraint().unwrap_or("")
            ));
        }
    }
    db_err(e)
}

fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Database(format!("corrupt {what} in database: {e}"))
}

// ---- row mapping ----------------------------------------------------------------

fn labels_to_json(l: &Labels) -> Value {
    serde_json::to_value(l).expect("a string map serializes")
}

/// Appends `s` to a COPY text-format row, escaped.
fn copy_text(out: &mut String, s: &str) {
    if !s.contains(['\\', '\t', '\n', '\r']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
}

/// Appends a JSON value to a COPY text-format row.
fn copy_json<T: serde::Serialize + ?Sized>(out: &mut String, v: &T) {
    let text = serde_json::to_string(v).expect("JSON serializes");
    copy_text(out, &text);
}

/// A timestamp as PostgreSQL stores it (microseconds, truncated as the
/// binary encoding does).
fn copy_time(out: &mut String, t: DateTime<Utc>) {
    use chrono::SubsecRound;
    out.push_str(
        &t.trunc_subsecs(6)
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    );
}

/// One `work_items` row (columns of [`work_item_cols`]) in COPY text format.
fn copy_work_item_row(out: &mut String, w: &WorkItem, path: &str) {
    use std::fmt::Write as _;
    let _ = write!(out, "{}\t{}\t", w.id, w.project_id);
    match w.parent_id {
        Some(p) => {
            let _ = write!(out, "{p}");
        }
        None => out.push_str("\\N"),
    }
    out.push('\t');
    for s in [
        w.name.as_str(),
        w.kind.as_str(),
        &w.title,
        &w.description,
        w.status.as_str(),
    ] {
        copy_text(out, s);
        out.push('\t');
    }
    match &w.assignee {
        Some(a) => copy_text(out, a),
        None => out.push_str("\\N"),
    }
    out.push('\t');
    copy_text(out, path);
    let _ = write!(out, "\t{}\t", w.sort_order);
    copy_json(out, &w.meta.spec);
    out.push('\t');
    copy_json(out, &w.meta.labels);
    out.push('\t');
    copy_json(out, &w.meta.annotations);
    let _ = write!(
        out,
        "\t{}\t{}\t{}\t",
        w.meta.generation, w.meta.resource_version, w.meta.observed_generation
    );
    copy_json(out, &w.meta.conditions);
    out.push('\t');
    copy_time(out, w.created_at);
    out.push('\t');
    copy_time(out, w.updated_at);
    out.push('\n');
}

fn labels_from_json(v: Value) -> StoreResult<Labels> {
    serde_json::from_value(v).map_err(|e| corrupt("labels", e))
}

fn target_to_json(t: &Target) -> Value {
    match t {
        Target::Any => json!({}),
        Target::Host(h) => json!({ "host": h }),
        Target::Selector(s) => json!({ "selector": s }),
    }
}

fn target_from_json(v: Value) -> StoreResult<Target> {
    let obj = v
        .as_object()
        .ok_or_else(|| corrupt("target", "not an object"))?;
    if obj.is_empty() {
        return Ok(Target::Any);
    }
    if let Some(h) = obj.get("host").and_then(Value::as_str) {
        return Ok(Target::Host(h.to_string()));
    }
    if let Some(s) = obj.get("selector") {
        return Ok(Target::Selector(labels_from_json(s.clone())?));
    }
    Err(corrupt("target", v))
}

fn parse<T: std::str::FromStr>(row: &PgRow, col: &str) -> StoreResult<T>
where
    T::Err: std::fmt::Display,
{
    let s: String = row.try_get(col).map_err(db_err)?;
    s.parse().map_err(|e| corrupt(col, e))
}

fn get<'r, T>(row: &'r PgRow, col: &str) -> StoreResult<T>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(col).map_err(db_err)
}

fn meta_from_row(row: &PgRow) -> StoreResult<Meta> {
    Ok(Meta {
        spec: get(row, "spec")?,
        labels: labels_from_json(get(row, "labels")?)?,
        annotations: labels_from_json(get(row, "annotations")?)?,
        generation: get(row, "generation")?,
        resource_version: get(row, "resource_version")?,
        observed_generation: get(row, "observed_generation")?,
        conditions: get(row, "conditions")?,
    })
}

fn project_from_row(row: &PgRow) -> StoreResult<Project> {
    Ok(Project {
        id: get(row, "id")?,
        name: get(row, "name")?,
        slug: get(row, "slug")?,
        description: get(row, "description")?,
        status: parse(row, "status")?,
        meta: meta_from_row(row)?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

fn work_item_from_row(row: &PgRow) -> StoreResult<WorkItem> {
    Ok(WorkItem {
        id: get(row, "id")?,
        project_id: get(row, "project_id")?,
        parent_id: get(row, "parent_id")?,
        name: get(row, "name")?,
        kind: parse(row, "kind")?,
        title: get(row, "title")?,
        description: get(row, "description")?,
        status: parse(row, "status")?,
        assignee: get(row, "assignee")?,
        path: get(row, "path")?,
        sort_order: get(row, "sort_order")?,
        meta: meta_from_row(row)?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

fn run_from_row(row: &PgRow) -> StoreResult<Run> {
    let failure_reason: Option<String> = get(row, "failure_reason")?;
    Ok(Run {
        id: get(row, "id")?,
        project_id: get(row, "project_id")?,
        task_id: get(row, "task_id")?,
        name: get(row, "name")?,
        host_id: get(row, "host_id")?,
        provider: get(row, "provider")?,
        prompt: get(row, "prompt")?,
        cwd: get(row, "cwd")?,
        session_name: get(row, "session_name")?,
        status: parse(row, "status")?,
        attempt: get(row, "attempt")?,
        last_progress_seq: get(row, "last_progress_seq")?,
        failure_reason: failure_reason
            .map(|s| s.parse().map_err(|e| corrupt("failure_reason", e)))
            .transpose()?,
        pending_since: get(row, "pending_since")?,
        exit_code: get(row, "exit_code")?,
        started_at: get(row, "started_at")?,
        finished_at: get(row, "finished_at")?,
        target: target_from_json(get(row, "target")?)?,
        max_attempts: get(row, "max_attempts")?,
        backoff_seconds: get(row, "backoff_seconds")?,
        backoff_max_seconds: get(row, "backoff_max_seconds")?,
        dispatch_timeout_seconds: get(row, "dispatch_timeout_seconds")?,
        stop_requested: get(row, "stop_requested")?,
        requeue_at: get(row, "requeue_at")?,
        eligible_host_seen: get(row, "eligible_host_seen")?,
        meta: meta_from_row(row)?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

fn host_from_row(row: &PgRow) -> StoreResult<Host> {
    Ok(Host {
        id: get(row, "id")?,
        name: get(row, "name")?,
        platform: parse(row, "platform")?,
        token_fingerprint: get(row, "token_fingerprint")?,
        status: parse(row, "status")?,
        instance_id: get(row, "instance_id")?,
        instance_suspect: get(row, "instance_suspect")?,
        instance_flagged_at: get(row, "instance_flagged_at")?,
        last_seen_at: get(row, "last_seen_at")?,
        capacity: get(row, "capacity")?,
        disabled: get(row, "disabled")?,
        presented_instance_id: get(row, "presented_instance_id")?,
        dispatch_labels: labels_from_json(get(row, "dispatch_labels")?)?,
        meta: meta_from_row(row)?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

fn token_from_row(row: &PgRow) -> StoreResult<ApiToken> {
    let kind: String = get(row, "kind")?;
    Ok(ApiToken {
        id: get(row, "id")?,
        name: get(row, "name")?,
        kind: match kind.as_str() {
            "operator" => TokenKind::Operator,
            "worker" => TokenKind::Worker,
            other => return Err(corrupt("token kind", other)),
        },
        fingerprint: get(row, "fingerprint")?,
        host_name: get(row, "host_name")?,
        created_at: get(row, "created_at")?,
        last_used_at: get(row, "last_used_at")?,
        revoked_at: get(row, "revoked_at")?,
    })
}

fn token_kind_str(k: TokenKind) -> &'static str {
    match k {
        TokenKind::Operator => "operator",
        TokenKind::Worker => "worker",
    }
}

fn event_from_row(row: &PgRow) -> StoreResult<Event> {
    Ok(Event {
        seq: get(row, "seq")?,
        topic: get(row, "topic")?,
        payload: get(row, "payload")?,
        created_at: get(row, "created_at")?,
    })
}

fn all<T>(rows: Vec<PgRow>, f: fn(&PgRow) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(f).collect()
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

    /// Takes the event-order lock before this transaction's first append;
    /// held until commit, so appends commit in seq order (module doc).
    async fn lock_event_order(&mut self) -> StoreResult<()> {
        if !self.event_lock {
            sqlx::query("SELECT pg_advisory_xact_lock($1)")
                .bind(EVENT_LOCK_KEY)
                .execute(self.conn())
                .await
                .map_err(db_err)?;
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
        sqlx::query("SAVEPOINT pam_write")
            .execute(self.conn())
            .await
            .map_err(db_err)?;
        Ok(())
    }

    /// Ends the savepoint taken by [`Self::savepoint`]: released on success,
    /// rolled back to on error (so the transaction stays usable).
    async fn end_savepoint<T>(&mut self, r: Result<T, sqlx::Error>) -> StoreResult<T> {
        match r {
            Ok(v) => {
                sqlx::query("RELEASE SAVEPOINT pam_write")
                    .execute(self.conn())
                    .await
                    .map_err(db_err)?;
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
            sqlx::query(sql)
                .execute(self.conn())
                .await
                .map_err(db_err)?;
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

    async fn one_run(&mut self, sql: &str, id: Uuid) -> StoreResult<Option<Run>> {
        let row = sqlx::query(sql)
            .bind(id)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(run_from_row).transpose()
    }
}

#[async_trait]
impl Tx for PgTx {
    async fn commit(self: Box<Self>) -> StoreResult<Vec<Event>> {
        let me = *self;
        me.tx.commit().await.map_err(db_err)?;
        Ok(me.events)
    }

    fn has_events(&self) -> bool {
        !self.events.is_empty()
    }
}

// The aggregates' parts of the transaction (after the helpers and
// macros above, which they use).
mod events;
mod hosts;
mod projects;
mod runs;
mod tokens;
mod work_items;
