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
//!   [`super::memory::MemStore`] whatever the database's collation.

use std::collections::{HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::{transition, HostStatus, RunStatus, WorkItemStatus};
use serde_json::{json, Value};
use sqlx::postgres::PgRow;
use sqlx::{PgPool, Postgres, Row, Transaction};
use uuid::Uuid;

use super::{
    short_id, ApiToken, Event, Host, Labels, Meta, Project, Run, RunFilter, RunUpdate,
    SignalMarker, Store, StoreError, StoreResult, Target, TokenKind, Tx, WorkItem,
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

    // ---- projects ----------------------------------------------------------

    async fn insert_project(&mut self, p: &Project) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO projects ({}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)",
            project_cols()
        );
        let q = sqlx::query(&sql)
            .bind(p.id)
            .bind(&p.name)
            .bind(&p.slug)
            .bind(&p.description)
            .bind(p.status.as_str());
        let q = bind_meta!(q, p.meta).bind(p.created_at).bind(p.updated_at);
        self.savepoint().await?;
        let r = q.execute(self.conn()).await;
        self.end_savepoint(r).await.map(|_| ())
    }

    async fn get_project(&mut self, id: Uuid) -> StoreResult<Option<Project>> {
        let sql = format!("SELECT {} FROM projects WHERE id = $1", project_cols());
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(project_from_row).transpose()
    }

    async fn get_project_by_slug(&mut self, slug: &str) -> StoreResult<Option<Project>> {
        let sql = format!("SELECT {} FROM projects WHERE slug = $1", project_cols());
        let row = sqlx::query(&sql)
            .bind(slug)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(project_from_row).transpose()
    }

    async fn list_projects(&mut self) -> StoreResult<Vec<Project>> {
        let sql = format!(
            "SELECT {} FROM projects ORDER BY slug COLLATE \"C\"",
            project_cols()
        );
        let rows = sqlx::query(&sql)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, project_from_row)
    }

    async fn update_project(&mut self, p: &Project, expected_rv: i64) -> StoreResult<Project> {
        let sql = format!(
            "UPDATE projects SET name = $3, description = $4, status = $5, spec = $6, \
             labels = $7, annotations = $8, generation = $9, observed_generation = $10, \
             conditions = $11, updated_at = $12, resource_version = resource_version + 1 \
             WHERE id = $1 AND resource_version = $2 RETURNING {}",
            project_cols()
        );
        let row = sqlx::query(&sql)
            .bind(p.id)
            .bind(expected_rv)
            .bind(&p.name)
            .bind(&p.description)
            .bind(p.status.as_str())
            .bind(&p.meta.spec)
            .bind(labels_to_json(&p.meta.labels))
            .bind(labels_to_json(&p.meta.annotations))
            .bind(p.meta.generation)
            .bind(p.meta.observed_generation)
            .bind(&p.meta.conditions)
            .bind(p.updated_at)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => project_from_row(&row),
            None => Err(self
                .zero_rows(
                    "projects",
                    p.id,
                    format!("project {} is not at resource version {expected_rv}", p.id),
                )
                .await),
        }
    }

    async fn delete_project(&mut self, id: Uuid) -> StoreResult<bool> {
        let r = sqlx::query("DELETE FROM projects WHERE id = $1")
            .bind(id)
            .execute(self.conn())
            .await
            .map_err(db_err_delete)?;
        Ok(r.rows_affected() == 1)
    }

    // ---- work items ---------------------------------------------------------

    async fn insert_work_item(&mut self, w: &WorkItem) -> StoreResult<WorkItem> {
        let path = match w.parent_id {
            None => short_id(w.id),
            Some(parent) => {
                let row = sqlx::query("SELECT project_id, path FROM work_items WHERE id = $1")
                    .bind(parent)
                    .fetch_optional(self.conn())
                    .await
                    .map_err(db_err)?
                    .ok_or_else(|| {
                        StoreError::Invalid(format!("parent work item {parent} does not exist"))
                    })?;
                let parent_project: Uuid = get(&row, "project_id")?;
                if parent_project != w.project_id {
                    return Err(StoreError::Invalid(format!(
                        "parent work item {parent} is in another project"
                    )));
                }
                let parent_path: String = get(&row, "path")?;
                format!("{parent_path}/{}", short_id(w.id))
            }
        };
        let sql = format!(
            "INSERT INTO work_items ({cols}) VALUES \
             ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20) \
             RETURNING {cols}",
            cols = work_item_cols()
        );
        let q = sqlx::query(&sql)
            .bind(w.id)
            .bind(w.project_id)
            .bind(w.parent_id)
            .bind(&w.name)
            .bind(w.kind.as_str())
            .bind(&w.title)
            .bind(&w.description)
            .bind(w.status.as_str())
            .bind(&w.assignee)
            .bind(&path)
            .bind(w.sort_order);
        let q = bind_meta!(q, w.meta).bind(w.created_at).bind(w.updated_at);
        self.savepoint().await?;
        let r = q.fetch_one(self.conn()).await;
        let row = self.end_savepoint(r).await?;
        work_item_from_row(&row)
    }

    async fn insert_work_items(&mut self, items: Vec<WorkItem>) -> StoreResult<Vec<WorkItem>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        // Paths: a parent earlier in the batch, else one lookup for every
        // stored parent.
        let in_batch: HashSet<Uuid> = items.iter().map(|w| w.id).collect();
        let stored: Vec<Uuid> = items
            .iter()
            .filter_map(|w| w.parent_id)
            .filter(|p| !in_batch.contains(p))
            .collect();
        let mut known: HashMap<Uuid, (Uuid, String)> = HashMap::new();
        if !stored.is_empty() {
            let rows =
                sqlx::query("SELECT id, project_id, path FROM work_items WHERE id = ANY($1)")
                    .bind(&stored)
                    .fetch_all(self.conn())
                    .await
                    .map_err(db_err)?;
            for row in rows {
                known.insert(
                    get(&row, "id")?,
                    (get(&row, "project_id")?, get(&row, "path")?),
                );
            }
        }
        let mut paths = Vec::with_capacity(items.len());
        for w in &items {
            let path = match w.parent_id {
                None => short_id(w.id),
                Some(parent) => {
                    let (project, parent_path) = known.get(&parent).ok_or_else(|| {
                        StoreError::Invalid(format!("parent work item {parent} does not exist"))
                    })?;
                    if *project != w.project_id {
                        return Err(StoreError::Invalid(format!(
                            "parent work item {parent} is in another project"
                        )));
                    }
                    format!("{parent_path}/{}", short_id(w.id))
                }
            };
            known.insert(w.id, (w.project_id, path.clone()));
            paths.push(path);
        }
        // One COPY FROM STDIN: no per-row round trip, and the cheapest
        // write PostgreSQL offers (text format, built here).
        let mut data = String::with_capacity(items.len() * 512);
        for (w, path) in items.iter().zip(&paths) {
            copy_work_item_row(&mut data, w, path);
        }
        self.savepoint().await?;
        let result = self
            .copy_in(
                &format!("COPY work_items ({}) FROM STDIN", work_item_cols()),
                data.as_bytes(),
            )
            .await;
        self.end_savepoint(result).await?;
        // Every column was written from `items` (no database defaults), so
        // the stored rows are the input with its computed paths (and
        // PostgreSQL's microsecond timestamps): no RETURNING to decode.
        use chrono::SubsecRound;
        Ok(items
            .into_iter()
            .zip(paths)
            .map(|(w, path)| WorkItem {
                path,
                created_at: w.created_at.trunc_subsecs(6),
                updated_at: w.updated_at.trunc_subsecs(6),
                ..w
            })
            .collect())
    }

    async fn get_work_item(&mut self, id: Uuid) -> StoreResult<Option<WorkItem>> {
        let sql = format!("SELECT {} FROM work_items WHERE id = $1", work_item_cols());
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(work_item_from_row).transpose()
    }

    async fn get_work_item_by_name(
        &mut self,
        project_id: Uuid,
        name: &str,
    ) -> StoreResult<Option<WorkItem>> {
        let sql = format!(
            "SELECT {} FROM work_items WHERE project_id = $1 AND name = $2",
            work_item_cols()
        );
        let row = sqlx::query(&sql)
            .bind(project_id)
            .bind(name)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(work_item_from_row).transpose()
    }

    async fn list_work_items(&mut self, project_id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let sql = format!(
            "SELECT {} FROM work_items WHERE project_id = $1 \
             ORDER BY path COLLATE \"C\", sort_order, id",
            work_item_cols()
        );
        let rows = sqlx::query(&sql)
            .bind(project_id)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, work_item_from_row)
    }

    async fn subtree(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let root = self
            .get_work_item(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("work item {id}")))?;
        // project_id too: path short ids are not identities, and two roots
        // in different projects may share one.
        let sql = format!(
            "SELECT {} FROM work_items \
             WHERE project_id = $2 AND (path = $1 OR path LIKE $1 || '/%') \
             ORDER BY path COLLATE \"C\", sort_order, id",
            work_item_cols()
        );
        let rows = sqlx::query(&sql)
            .bind(&root.path)
            .bind(root.project_id)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, work_item_from_row)
    }

    async fn subtree_recursive(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let cols = work_item_cols();
        let sql = format!(
            "WITH RECURSIVE subtree AS ( \
                 SELECT {cols} FROM work_items WHERE id = $1 \
                 UNION ALL \
                 SELECT {wcols} FROM work_items w INNER JOIN subtree s ON w.parent_id = s.id \
             ) SELECT {cols} FROM subtree ORDER BY path COLLATE \"C\", sort_order, id",
            wcols = qualified("w", &cols)
        );
        let rows = sqlx::query(&sql)
            .bind(id)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        if rows.is_empty() {
            return Err(StoreError::NotFound(format!("work item {id}")));
        }
        all(rows, work_item_from_row)
    }

    async fn update_work_item(&mut self, w: &WorkItem, expected_rv: i64) -> StoreResult<WorkItem> {
        let sql = format!(
            "UPDATE work_items SET title = $3, description = $4, assignee = $5, sort_order = $6, \
             spec = $7, labels = $8, annotations = $9, generation = $10, \
             observed_generation = $11, conditions = $12, updated_at = $13, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND resource_version = $2 RETURNING {}",
            work_item_cols()
        );
        let row = sqlx::query(&sql)
            .bind(w.id)
            .bind(expected_rv)
            .bind(&w.title)
            .bind(&w.description)
            .bind(&w.assignee)
            .bind(w.sort_order)
            .bind(&w.meta.spec)
            .bind(labels_to_json(&w.meta.labels))
            .bind(labels_to_json(&w.meta.annotations))
            .bind(w.meta.generation)
            .bind(w.meta.observed_generation)
            .bind(&w.meta.conditions)
            .bind(w.updated_at)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => work_item_from_row(&row),
            None => Err(self
                .zero_rows(
                    "work_items",
                    w.id,
                    format!(
                        "work item {} is not at resource version {expected_rv}",
                        w.id
                    ),
                )
                .await),
        }
    }

    async fn set_work_item_status(
        &mut self,
        id: Uuid,
        from: WorkItemStatus,
        to: WorkItemStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem> {
        transition(from, to)?;
        let sql = format!(
            "UPDATE work_items SET status = $3, updated_at = $4, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND status = $2 RETURNING {}",
            work_item_cols()
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(now)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => work_item_from_row(&row),
            None => Err(self
                .zero_rows("work_items", id, format!("work item {id} is not {from}"))
                .await),
        }
    }

    async fn reparent_work_item(
        &mut self,
        id: Uuid,
        new_parent: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem> {
        let row = sqlx::query("SELECT project_id, path FROM work_items WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?
            .ok_or_else(|| StoreError::NotFound(format!("work item {id}")))?;
        let project: Uuid = get(&row, "project_id")?;
        let old_path: String = get(&row, "path")?;
        let new_path = match new_parent {
            None => short_id(id),
            Some(parent) => {
                if parent == id {
                    return Err(StoreError::Invalid(format!(
                        "work item {id} cannot be its own parent"
                    )));
                }
                let prow = sqlx::query("SELECT project_id, path FROM work_items WHERE id = $1")
                    .bind(parent)
                    .fetch_optional(self.conn())
                    .await
                    .map_err(db_err)?
                    .ok_or_else(|| {
                        StoreError::Invalid(format!("parent work item {parent} does not exist"))
                    })?;
                let parent_project: Uuid = get(&prow, "project_id")?;
                if parent_project != project {
                    return Err(StoreError::Invalid(format!(
                        "parent work item {parent} is in another project"
                    )));
                }
                // OQ-6: the new parent must not be a descendant. Walk its
                // ancestors by live parent links (paths are not identities).
                let cycle: bool = sqlx::query_scalar(
                    "WITH RECURSIVE anc AS ( \
                         SELECT id, parent_id FROM work_items WHERE id = $1 \
                         UNION \
                         SELECT w.id, w.parent_id FROM work_items w \
                         INNER JOIN anc a ON w.id = a.parent_id \
                     ) SELECT EXISTS (SELECT 1 FROM anc WHERE id = $2)",
                )
                .bind(parent)
                .bind(id)
                .fetch_one(self.conn())
                .await
                .map_err(db_err)?;
                if cycle {
                    return Err(StoreError::Invalid(format!(
                        "work item {parent} is a descendant of {id}: moving would make a cycle"
                    )));
                }
                let parent_path: String = get(&prow, "path")?;
                format!("{parent_path}/{}", short_id(id))
            }
        };
        // The subtree is located by the OLD prefix, then rewritten at once.
        sqlx::query(
            "UPDATE work_items SET path = $1 || substr(path, length($2) + 1) \
             WHERE project_id = $3 AND (path = $2 OR path LIKE $2 || '/%')",
        )
        .bind(&new_path)
        .bind(&old_path)
        .bind(project)
        .execute(self.conn())
        .await
        .map_err(db_err)?;
        let sql = format!(
            "UPDATE work_items SET parent_id = $2, updated_at = $3, \
             resource_version = resource_version + 1 WHERE id = $1 RETURNING {}",
            work_item_cols()
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(new_parent)
            .bind(now)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)?;
        work_item_from_row(&row)
    }

    async fn delete_work_item(&mut self, id: Uuid) -> StoreResult<bool> {
        let r = sqlx::query("DELETE FROM work_items WHERE id = $1")
            .bind(id)
            .execute(self.conn())
            .await
            .map_err(db_err_delete)?;
        Ok(r.rows_affected() == 1)
    }

    // ---- runs ---------------------------------------------------------------

    async fn insert_run(&mut self, r: &Run) -> StoreResult<()> {
        let task_project: Option<Uuid> =
            sqlx::query_scalar("SELECT project_id FROM work_items WHERE id = $1")
                .bind(r.task_id)
                .fetch_optional(self.conn())
                .await
                .map_err(db_err)?;
        match task_project {
            None => return Err(StoreError::NotFound(format!("task {}", r.task_id))),
            Some(p) if p != r.project_id => {
                return Err(StoreError::Invalid(format!(
                    "task {} is not in project {}",
                    r.task_id, r.project_id
                )))
            }
            Some(_) => {}
        }
        let sql = format!(
            "INSERT INTO runs ({}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,\
             $16,$17,$18,$19,$20,$21,$22,$23,$24,$25,$26,$27,$28,$29,$30,$31,$32,$33,$34)",
            run_cols()
        );
        let q = sqlx::query(&sql)
            .bind(r.id)
            .bind(r.project_id)
            .bind(r.task_id)
            .bind(&r.name)
            .bind(r.host_id)
            .bind(&r.provider)
            .bind(&r.prompt)
            .bind(&r.cwd)
            .bind(&r.session_name)
            .bind(r.status.as_str())
            .bind(r.attempt)
            .bind(r.last_progress_seq)
            .bind(r.failure_reason.map(|f| f.as_str()))
            .bind(r.pending_since)
            .bind(r.exit_code)
            .bind(r.started_at)
            .bind(r.finished_at)
            .bind(target_to_json(&r.target))
            .bind(r.max_attempts)
            .bind(r.backoff_seconds)
            .bind(r.backoff_max_seconds)
            .bind(r.dispatch_timeout_seconds)
            .bind(r.stop_requested)
            .bind(r.requeue_at)
            .bind(r.eligible_host_seen);
        let q = bind_meta!(q, r.meta).bind(r.created_at).bind(r.updated_at);
        self.savepoint().await?;
        let res = q.execute(self.conn()).await;
        self.end_savepoint(res).await.map(|_| ())
    }

    async fn get_run(&mut self, id: Uuid) -> StoreResult<Option<Run>> {
        let sql = format!("SELECT {} FROM runs WHERE id = $1", run_cols());
        self.one_run(&sql, id).await
    }

    async fn get_run_by_session(
        &mut self,
        host_id: Uuid,
        session_name: &str,
    ) -> StoreResult<Option<Run>> {
        let sql = format!(
            "SELECT {} FROM runs WHERE host_id = $1 AND session_name = $2",
            run_cols()
        );
        let row = sqlx::query(&sql)
            .bind(host_id)
            .bind(session_name)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn get_run_by_name(&mut self, project_id: Uuid, name: &str) -> StoreResult<Option<Run>> {
        let sql = format!(
            "SELECT {} FROM runs WHERE project_id = $1 AND name = $2",
            run_cols()
        );
        let row = sqlx::query(&sql)
            .bind(project_id)
            .bind(name)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(run_from_row).transpose()
    }

    async fn list_runs(&mut self, f: &RunFilter) -> StoreResult<Vec<Run>> {
        let statuses: Option<Vec<String>> = f
            .statuses
            .as_ref()
            .map(|v| v.iter().map(|s| s.as_str().to_string()).collect());
        let sql = format!(
            "SELECT {} FROM runs WHERE ($1::uuid IS NULL OR project_id = $1) \
             AND ($2::uuid IS NULL OR task_id = $2) AND ($3::uuid IS NULL OR host_id = $3) \
             AND ($4::text[] IS NULL OR status = ANY($4)) ORDER BY created_at, id",
            run_cols()
        );
        let rows = sqlx::query(&sql)
            .bind(f.project_id)
            .bind(f.task_id)
            .bind(f.host_id)
            .bind(statuses)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, run_from_row)
    }

    async fn update_run_spec(&mut self, r: &Run, expected_rv: i64) -> StoreResult<Run> {
        let sql = format!(
            "UPDATE runs SET target = $3, max_attempts = $4, backoff_seconds = $5, \
             backoff_max_seconds = $6, dispatch_timeout_seconds = $7, stop_requested = $8, \
             spec = $9, labels = $10, annotations = $11, generation = $12, \
             observed_generation = $13, conditions = $14, updated_at = $15, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND resource_version = $2 RETURNING {}",
            run_cols()
        );
        let row = sqlx::query(&sql)
            .bind(r.id)
            .bind(expected_rv)
            .bind(target_to_json(&r.target))
            .bind(r.max_attempts)
            .bind(r.backoff_seconds)
            .bind(r.backoff_max_seconds)
            .bind(r.dispatch_timeout_seconds)
            .bind(r.stop_requested)
            .bind(&r.meta.spec)
            .bind(labels_to_json(&r.meta.labels))
            .bind(labels_to_json(&r.meta.annotations))
            .bind(r.meta.generation)
            .bind(r.meta.observed_generation)
            .bind(&r.meta.conditions)
            .bind(r.updated_at)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => run_from_row(&row),
            None => Err(self
                .zero_rows(
                    "runs",
                    r.id,
                    format!("run {} is not at resource version {expected_rv}", r.id),
                )
                .await),
        }
    }

    async fn transition_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        transition(from, to)?;
        let sql = format!(
            "UPDATE runs SET status = $4, host_id = COALESCE($5, host_id), \
             exit_code = COALESCE($6, exit_code), \
             failure_reason = COALESCE($7, failure_reason), \
             started_at = COALESCE($8, started_at), finished_at = COALESCE($9, finished_at), \
             requeue_at = COALESCE($10, requeue_at), updated_at = $11, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND attempt = $2 AND status = $3 RETURNING {}",
            run_cols()
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(attempt)
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(update.host_id)
            .bind(update.exit_code)
            .bind(update.failure_reason.map(|f| f.as_str()))
            .bind(update.started_at)
            .bind(update.finished_at)
            .bind(update.requeue_at)
            .bind(now)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => run_from_row(&row),
            None => Err(self
                .zero_rows(
                    "runs",
                    id,
                    format!("run {id} is not {from} at attempt {attempt}"),
                )
                .await),
        }
    }

    async fn requeue_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        transition(RunStatus::Failed, RunStatus::Pending)?;
        let sql = format!(
            "UPDATE runs SET status = 'pending', attempt = attempt + 1, host_id = NULL, \
             started_at = NULL, finished_at = NULL, exit_code = NULL, \
             last_progress_seq = NULL, failure_reason = NULL, requeue_at = NULL, \
             eligible_host_seen = false, pending_since = $3, updated_at = $3, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND attempt = $2 AND status = 'failed' RETURNING {}",
            run_cols()
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(attempt)
            .bind(now)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => run_from_row(&row),
            None => Err(self
                .zero_rows(
                    "runs",
                    id,
                    format!("run {id} is not failed at attempt {attempt}"),
                )
                .await),
        }
    }

    async fn claim_runs(
        &mut self,
        host: &Host,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Run>> {
        transition(RunStatus::Pending, RunStatus::Spawning)?;
        let sql = format!(
            "WITH c AS ( \
                 SELECT id AS cid FROM runs \
                 WHERE status = 'pending' AND NOT stop_requested \
                   AND (target = '{{}}'::jsonb OR target->>'host' = $2 \
                        OR (target ? 'selector' AND $3::jsonb @> (target->'selector'))) \
                 ORDER BY pending_since, id LIMIT $4 FOR UPDATE SKIP LOCKED \
             ) UPDATE runs SET status = 'spawning', host_id = $1, updated_at = $5, \
                 resource_version = resource_version + 1 \
             FROM c WHERE runs.id = c.cid AND runs.status = 'pending' RETURNING {}",
            qualified("runs", &run_cols())
        );
        let rows = sqlx::query(&sql)
            .bind(host.id)
            .bind(&host.name)
            .bind(labels_to_json(&host.dispatch_labels))
            .bind(limit)
            .bind(now)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        let mut runs = all(rows, run_from_row)?;
        runs.sort_by_key(|r| (r.pending_since, r.id));
        Ok(runs)
    }

    async fn list_pending_runs(&mut self, limit: i64) -> StoreResult<Vec<Run>> {
        let sql = format!(
            "SELECT {} FROM runs WHERE status = 'pending' ORDER BY pending_since, id LIMIT $1",
            run_cols()
        );
        let rows = sqlx::query(&sql)
            .bind(limit)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, run_from_row)
    }

    async fn list_requeue_due(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        let sql = format!(
            "SELECT {} FROM runs WHERE status = 'failed' AND requeue_at IS NOT NULL \
             AND requeue_at <= $1 AND NOT stop_requested ORDER BY requeue_at, id LIMIT $2",
            run_cols()
        );
        let rows = sqlx::query(&sql)
            .bind(now)
            .bind(limit)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, run_from_row)
    }

    async fn mark_eligible_host_seen(&mut self, ids: &[Uuid]) -> StoreResult<()> {
        sqlx::query(
            "UPDATE runs SET eligible_host_seen = true, resource_version = resource_version + 1 \
             WHERE id = ANY($1) AND status = 'pending' AND NOT eligible_host_seen",
        )
        .bind(ids)
        .execute(self.conn())
        .await
        .map_err(db_err)?;
        Ok(())
    }

    async fn advance_progress(&mut self, id: Uuid, attempt: i32, seq: i64) -> StoreResult<bool> {
        let r = sqlx::query(
            "UPDATE runs SET last_progress_seq = $3, resource_version = resource_version + 1 \
             WHERE id = $1 AND attempt = $2 \
             AND (last_progress_seq IS NULL OR last_progress_seq < $3)",
        )
        .bind(id)
        .bind(attempt)
        .bind(seq)
        .execute(self.conn())
        .await
        .map_err(db_err)?;
        if r.rows_affected() == 1 {
            return Ok(true);
        }
        if !self.exists("runs", id).await? {
            return Err(StoreError::NotFound(format!("run {id}")));
        }
        Ok(false)
    }

    async fn lock_runs_with_signals(
        &mut self,
        ids: &[Uuid],
    ) -> StoreResult<(Vec<Run>, Vec<SignalMarker>)> {
        if ids.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let sql = format!(
            "SELECT {} FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            run_cols()
        );
        let rows = sqlx::query(&sql)
            .bind(ids)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        let runs = rows
            .iter()
            .map(run_from_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let markers: Vec<(Uuid, i32, String)> = sqlx::query_as(
            "SELECT run_id, attempt, kind FROM processed_signals WHERE run_id = ANY($1)",
        )
        .bind(ids)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        let markers = markers
            .into_iter()
            .map(|(run_id, attempt, kind)| SignalMarker {
                run_id,
                attempt,
                kind,
            })
            .collect();
        Ok((runs, markers))
    }

    async fn insert_signal_markers(
        &mut self,
        markers: &[SignalMarker],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        if markers.is_empty() {
            return Ok(0);
        }
        self.savepoint().await?;
        let r = sqlx::query(
            "INSERT INTO processed_signals (run_id, attempt, kind, received_at) \
             SELECT r, a, k, $4 FROM UNNEST($1::uuid[], $2::int4[], $3::text[]) AS u(r, a, k) \
             ON CONFLICT DO NOTHING",
        )
        .bind(markers.iter().map(|m| m.run_id).collect::<Vec<_>>())
        .bind(markers.iter().map(|m| m.attempt).collect::<Vec<_>>())
        .bind(markers.iter().map(|m| m.kind.as_str()).collect::<Vec<_>>())
        .bind(now)
        .execute(self.conn())
        .await;
        let r = self.end_savepoint(r).await?;
        Ok(r.rows_affected())
    }

    async fn write_run_states(&mut self, runs: &[(Run, i64)]) -> StoreResult<()> {
        if runs.is_empty() {
            return Ok(());
        }
        self.savepoint().await?;
        let col = |f: &dyn Fn(&Run) -> Option<DateTime<Utc>>| -> Vec<Option<DateTime<Utc>>> {
            runs.iter().map(|(r, _)| f(r)).collect()
        };
        let r = sqlx::query(
            "UPDATE runs r SET status = u.status, host_id = u.host_id, exit_code = u.exit_code, \
             failure_reason = u.failure_reason, started_at = u.started_at, \
             finished_at = u.finished_at, requeue_at = u.requeue_at, \
             last_progress_seq = u.last_progress_seq, updated_at = u.updated_at, \
             resource_version = u.resource_version \
             FROM UNNEST($1::uuid[], $2::text[], $3::uuid[], $4::int4[], $5::text[], \
               $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], $9::int8[], \
               $10::timestamptz[], $11::int8[], $12::int8[]) \
               AS u(id, status, host_id, exit_code, failure_reason, started_at, finished_at, \
                    requeue_at, last_progress_seq, updated_at, resource_version, expected) \
             WHERE r.id = u.id AND r.resource_version = u.expected",
        )
        .bind(runs.iter().map(|(r, _)| r.id).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|(r, _)| r.status.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(runs.iter().map(|(r, _)| r.host_id).collect::<Vec<_>>())
        .bind(runs.iter().map(|(r, _)| r.exit_code).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|(r, _)| r.failure_reason.map(|f| f.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(col(&|r| r.started_at))
        .bind(col(&|r| r.finished_at))
        .bind(col(&|r| r.requeue_at))
        .bind(
            runs.iter()
                .map(|(r, _)| r.last_progress_seq)
                .collect::<Vec<_>>(),
        )
        .bind(col(&|r| Some(r.updated_at)))
        .bind(
            runs.iter()
                .map(|(r, _)| r.meta.resource_version)
                .collect::<Vec<_>>(),
        )
        .bind(runs.iter().map(|(_, rv)| *rv).collect::<Vec<_>>())
        .execute(self.conn())
        .await;
        let written = match r {
            Ok(r) => r.rows_affected(),
            Err(e) => return self.end_savepoint::<()>(Err(e)).await,
        };
        if written != runs.len() as u64 {
            // All or nothing: undo the rows that did match.
            self.undo_savepoint().await?;
            return Err(StoreError::Conflict(format!(
                "{} of {} runs changed since they were read",
                runs.len() as u64 - written,
                runs.len()
            )));
        }
        self.end_savepoint(Ok(())).await
    }

    async fn delete_run(&mut self, id: Uuid) -> StoreResult<bool> {
        let r = sqlx::query("DELETE FROM runs WHERE id = $1")
            .bind(id)
            .execute(self.conn())
            .await
            .map_err(db_err_delete)?;
        Ok(r.rows_affected() == 1)
    }

    async fn count_live_runs(&mut self, host_id: Uuid) -> StoreResult<i64> {
        sqlx::query_scalar(
            "SELECT count(*) FROM runs WHERE host_id = $1 AND status IN ('spawning', 'running')",
        )
        .bind(host_id)
        .fetch_one(self.conn())
        .await
        .map_err(db_err)
    }

    // ---- hosts --------------------------------------------------------------

    async fn insert_host(&mut self, h: &Host) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO hosts ({}) VALUES \
             ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22)",
            host_cols()
        );
        let q = sqlx::query(&sql)
            .bind(h.id)
            .bind(&h.name)
            .bind(h.platform.as_str())
            .bind(&h.token_fingerprint)
            .bind(h.status.as_str())
            .bind(h.instance_id)
            .bind(h.instance_suspect)
            .bind(h.instance_flagged_at)
            .bind(h.last_seen_at)
            .bind(h.capacity)
            .bind(h.disabled)
            .bind(h.presented_instance_id)
            .bind(labels_to_json(&h.dispatch_labels));
        let q = bind_meta!(q, h.meta).bind(h.created_at).bind(h.updated_at);
        self.savepoint().await?;
        let r = q.execute(self.conn()).await;
        self.end_savepoint(r).await.map(|_| ())
    }

    async fn get_host(&mut self, id: Uuid) -> StoreResult<Option<Host>> {
        let sql = format!("SELECT {} FROM hosts WHERE id = $1", host_cols());
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(host_from_row).transpose()
    }

    async fn get_host_by_name(&mut self, name: &str) -> StoreResult<Option<Host>> {
        let sql = format!("SELECT {} FROM hosts WHERE name = $1", host_cols());
        let row = sqlx::query(&sql)
            .bind(name)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(host_from_row).transpose()
    }

    async fn list_hosts(&mut self) -> StoreResult<Vec<Host>> {
        let sql = format!(
            "SELECT {} FROM hosts ORDER BY name COLLATE \"C\"",
            host_cols()
        );
        let rows = sqlx::query(&sql)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, host_from_row)
    }

    async fn update_host(&mut self, h: &Host, expected_rv: i64) -> StoreResult<Host> {
        let sql = format!(
            "UPDATE hosts SET platform = $3, token_fingerprint = $4, instance_id = $5, \
             instance_suspect = $6, instance_flagged_at = $7, last_seen_at = $8, \
             capacity = $9, disabled = $10, spec = $11, labels = $12, annotations = $13, \
             generation = $14, observed_generation = $15, conditions = $16, updated_at = $17, \
             presented_instance_id = $18, dispatch_labels = $19, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND resource_version = $2 RETURNING {}",
            host_cols()
        );
        let row = sqlx::query(&sql)
            .bind(h.id)
            .bind(expected_rv)
            .bind(h.platform.as_str())
            .bind(&h.token_fingerprint)
            .bind(h.instance_id)
            .bind(h.instance_suspect)
            .bind(h.instance_flagged_at)
            .bind(h.last_seen_at)
            .bind(h.capacity)
            .bind(h.disabled)
            .bind(&h.meta.spec)
            .bind(labels_to_json(&h.meta.labels))
            .bind(labels_to_json(&h.meta.annotations))
            .bind(h.meta.generation)
            .bind(h.meta.observed_generation)
            .bind(&h.meta.conditions)
            .bind(h.updated_at)
            .bind(h.presented_instance_id)
            .bind(labels_to_json(&h.dispatch_labels))
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => host_from_row(&row),
            None => Err(self
                .zero_rows(
                    "hosts",
                    h.id,
                    format!("host {} is not at resource version {expected_rv}", h.id),
                )
                .await),
        }
    }

    async fn set_host_status(
        &mut self,
        id: Uuid,
        from: HostStatus,
        to: HostStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<Host> {
        transition(from, to)?;
        let sql = format!(
            "UPDATE hosts SET status = $3, updated_at = $4, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND status = $2 RETURNING {}",
            host_cols()
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(now)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => host_from_row(&row),
            None => Err(self
                .zero_rows("hosts", id, format!("host {id} is not {from}"))
                .await),
        }
    }

    async fn list_silent_hosts(&mut self, cutoff: DateTime<Utc>) -> StoreResult<Vec<Host>> {
        let sql = format!(
            "SELECT {} FROM hosts WHERE status = 'online' AND last_seen_at < $1 \
             ORDER BY last_seen_at, name COLLATE \"C\"",
            host_cols()
        );
        let rows = sqlx::query(&sql)
            .bind(cutoff)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, host_from_row)
    }

    async fn delete_host(&mut self, id: Uuid) -> StoreResult<bool> {
        self.savepoint().await?;
        let r = sqlx::query("DELETE FROM hosts WHERE id = $1")
            .bind(id)
            .execute(self.conn())
            .await;
        let r = match r {
            Ok(r) => self.end_savepoint(Ok(r)).await?,
            Err(e) => {
                // Keep the delete-specific mapping (a referenced host is
                // Invalid, not NotFound) while still undoing the savepoint.
                self.undo_savepoint().await?;
                return Err(db_err_delete(e));
            }
        };
        Ok(r.rows_affected() == 1)
    }

    // ---- events -------------------------------------------------------------

    async fn append_event(
        &mut self,
        topic: &str,
        payload: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<Event> {
        self.lock_event_order().await?;
        let row = sqlx::query(
            "INSERT INTO events (topic, payload, created_at) VALUES ($1, $2, $3) \
             RETURNING seq, topic, payload, created_at",
        )
        .bind(topic)
        .bind(&payload)
        .bind(now)
        .fetch_one(self.conn())
        .await
        .map_err(db_err)?;
        let ev = event_from_row(&row)?;
        self.events.push(ev.clone());
        Ok(ev)
    }

    async fn append_events(
        &mut self,
        events: Vec<(&'static str, Value)>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Event>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        self.lock_event_order().await?;
        let created_at = {
            use chrono::SubsecRound;
            now.trunc_subsecs(6)
        };
        let mut out = Vec::with_capacity(events.len());
        let mut events = events.into_iter().peekable();
        while events.peek().is_some() {
            let chunk: Vec<(&'static str, Value)> = events.by_ref().take(5000).collect();
            // WITH ORDINALITY + ORDER BY: rows are inserted, and their seqs
            // drawn, in input order; only the seqs come back (the topics
            // and payloads are ours: no JSON to decode again).
            let mut seqs: Vec<i64> = sqlx::query_scalar(
                "INSERT INTO events (topic, payload, created_at) \
                 SELECT t, p, $3 FROM UNNEST($1::text[], $2::jsonb[]) WITH ORDINALITY AS u(t, p, i) \
                 ORDER BY i RETURNING seq",
            )
            .bind(chunk.iter().map(|(t, _)| *t).collect::<Vec<_>>())
            .bind(chunk.iter().map(|(_, p)| p).collect::<Vec<_>>())
            .bind(now)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
            seqs.sort_unstable();
            out.extend(
                seqs.into_iter()
                    .zip(chunk)
                    .map(|(seq, (topic, payload))| Event {
                        seq,
                        topic: topic.to_string(),
                        payload,
                        created_at,
                    }),
            );
        }
        self.events.extend(out.iter().cloned());
        Ok(out)
    }

    async fn events_after(&mut self, after: i64, limit: i64) -> StoreResult<Vec<Event>> {
        let rows = sqlx::query(
            "SELECT seq, topic, payload, created_at FROM events WHERE seq > $1 \
             ORDER BY seq LIMIT $2",
        )
        .bind(after)
        .bind(limit)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        all(rows, event_from_row)
    }

    async fn run_events_of_topic(&mut self, topic: &str, runs: &[Uuid]) -> StoreResult<Vec<Event>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<String> = runs.iter().map(Uuid::to_string).collect();
        let rows = sqlx::query(
            "SELECT seq, topic, payload, created_at FROM events \
             WHERE topic = $1 AND payload->>'run_id' = ANY($2) ORDER BY seq",
        )
        .bind(topic)
        .bind(&ids)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        all(rows, event_from_row)
    }

    async fn purge_events_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let r = sqlx::query("DELETE FROM events WHERE created_at < $1")
            .bind(cutoff)
            .execute(self.conn())
            .await
            .map_err(db_err)?;
        Ok(r.rows_affected())
    }

    async fn event_bounds(&mut self) -> StoreResult<Option<(i64, i64)>> {
        let row = sqlx::query("SELECT min(seq) AS lo, max(seq) AS hi FROM events")
            .fetch_one(self.conn())
            .await
            .map_err(db_err)?;
        let lo: Option<i64> = get(&row, "lo")?;
        let hi: Option<i64> = get(&row, "hi")?;
        Ok(lo.zip(hi))
    }

    async fn event_high_water(&mut self) -> StoreResult<i64> {
        // The order lock waits out every append in flight (each holds it
        // from its first append to commit or rollback).
        self.lock_event_order().await?;
        let name: String = sqlx::query_scalar("SELECT pg_get_serial_sequence('events', 'seq')")
            .fetch_one(self.conn())
            .await
            .map_err(db_err)?;
        // `name` comes from the catalog, already quoted.
        let sql = format!("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {name}");
        sqlx::query_scalar(&sql)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)
    }

    // ---- tokens -------------------------------------------------------------

    async fn insert_token(&mut self, t: &ApiToken) -> StoreResult<()> {
        let sql = format!("INSERT INTO api_tokens ({TOKEN_COLS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)");
        let q = sqlx::query(&sql)
            .bind(t.id)
            .bind(&t.name)
            .bind(token_kind_str(t.kind))
            .bind(&t.fingerprint)
            .bind(&t.host_name)
            .bind(t.created_at)
            .bind(t.last_used_at)
            .bind(t.revoked_at);
        self.savepoint().await?;
        let r = q.execute(self.conn()).await;
        self.end_savepoint(r).await.map(|_| ())
    }

    async fn get_token_by_fingerprint(&mut self, fp: &str) -> StoreResult<Option<ApiToken>> {
        let sql = format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE fingerprint = $1");
        let row = sqlx::query(&sql)
            .bind(fp)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(token_from_row).transpose()
    }

    async fn list_tokens(&mut self) -> StoreResult<Vec<ApiToken>> {
        let sql = format!("SELECT {TOKEN_COLS} FROM api_tokens ORDER BY created_at, id");
        let rows = sqlx::query(&sql)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, token_from_row)
    }

    async fn revoke_token(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<bool> {
        let r = sqlx::query(
            "UPDATE api_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
        )
        .bind(id)
        .bind(now)
        .execute(self.conn())
        .await
        .map_err(db_err)?;
        Ok(r.rows_affected() == 1)
    }
}
