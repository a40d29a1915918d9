//! Row mapping: the column lists every query selects, rows to records and
//! back (JSON columns, COPY text).

use super::named::Table;
use super::*;
use crate::sources::{HealthState, SyncState};
use crate::{Object, Schedule, Secret, Webhook};
use pam_manifests::protocol::Capabilities;

pub(super) const META_COLS: &str =
    "spec, labels, annotations, generation, resource_version, observed_generation, conditions";

/// In the order [`super::named::Table::bind_insert`] binds.
pub(super) fn project_cols() -> String {
    let own = <Project as super::named::Table>::OWN.join(", ");
    format!("id, slug, {own}, {META_COLS}, created_at, updated_at")
}

pub(super) fn work_item_cols() -> String {
    format!(
        "id, project_id, parent_id, name, kind, title, description, status, assignee, path, \
         sort_order, {META_COLS}, created_at, updated_at"
    )
}

/// The usage columns of `runs` (migration 0009), in [`usage_binds`] order.
pub(super) const USAGE_COLS: &str = "attempt_input_tokens, attempt_cached_input_tokens, \
     attempt_output_tokens, attempt_cost_micro_usd, total_input_tokens, total_cached_input_tokens, \
     total_output_tokens, total_cost_micro_usd";

/// A run's usage as the eight [`USAGE_COLS`] values.
pub(super) fn usage_values(u: &RunUsage) -> [i64; 8] {
    let (a, t) = (u.attempt, u.total);
    [
        a.input_tokens,
        a.cached_input_tokens,
        a.output_tokens,
        a.cost_micro_usd,
        t.input_tokens,
        t.cached_input_tokens,
        t.output_tokens,
        t.cost_micro_usd,
    ]
}

/// The sums of every attempt's usage over the runs aliased `r`, as
/// [`usage_sum_from_row`] reads them.
pub(super) const USAGE_SUMS: &str = "sum(r.total_input_tokens)::int8 AS total_input_tokens, \
     sum(r.total_cached_input_tokens)::int8 AS total_cached_input_tokens, \
     sum(r.total_output_tokens)::int8 AS total_output_tokens, \
     sum(r.total_cost_micro_usd)::int8 AS total_cost_micro_usd";

/// `(id, usage)` of a roll-up row ([`USAGE_SUMS`]).
pub(super) fn usage_sum_from_row(row: &PgRow) -> StoreResult<(Uuid, Usage)> {
    Ok((get(row, "id")?, usage_from_row(row, "total")?))
}

fn usage_from_row(row: &PgRow, prefix: &str) -> StoreResult<Usage> {
    Ok(Usage {
        input_tokens: get(row, &format!("{prefix}_input_tokens"))?,
        cached_input_tokens: get(row, &format!("{prefix}_cached_input_tokens"))?,
        output_tokens: get(row, &format!("{prefix}_output_tokens"))?,
        cost_micro_usd: get(row, &format!("{prefix}_cost_micro_usd"))?,
    })
}

pub(super) fn run_cols() -> String {
    format!(
        "id, project_id, task_id, name, host_id, provider, prompt, cwd, session_name, status, \
         attempt, last_progress_seq, failure_reason, pending_since, exit_code, started_at, \
         finished_at, target, max_attempts, backoff_seconds, backoff_max_seconds, \
         dispatch_timeout_seconds, stop_requested, requeue_at, eligible_host_seen, {META_COLS}, \
         created_at, updated_at, failure_message, {USAGE_COLS}, stopped_by, permissions, \
         session_id, last_activity, denials, dispatchable_since"
    )
}

/// In the order [`super::named::Table::bind_insert`] binds.
pub(super) fn host_cols() -> String {
    let own = <Host as super::named::Table>::OWN.join(", ");
    format!("id, name, status, {own}, {META_COLS}, created_at, updated_at")
}

pub(super) const TOKEN_COLS: &str =
    "id, name, kind, fingerprint, host_name, created_at, last_used_at, revoked_at, role, projects";

/// `cols` with every column qualified by `alias` (for joins and CTEs).
pub(super) fn qualified(alias: &str, cols: &str) -> String {
    cols.split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A host's reported capabilities; NULL: never reported.
pub(super) fn capabilities_from_json(v: Option<Value>) -> StoreResult<Option<Capabilities>> {
    v.map(|v| {
        serde_json::from_value(v)
            .map_err(|e| StoreError::Invalid(format!("hosts.capabilities: {e}")))
    })
    .transpose()
}

pub(super) fn capabilities_to_json(c: &Option<Capabilities>) -> Option<Value> {
    c.as_ref()
        .map(|c| serde_json::to_value(c).expect("capabilities serialize"))
}

pub(super) fn labels_to_json(l: &Labels) -> Value {
    serde_json::to_value(l).expect("a string map serializes")
}

/// Appends `s` to a COPY text-format row, escaped.
pub(super) fn copy_text(out: &mut String, s: &str) {
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
pub(super) fn copy_json<T: serde::Serialize + ?Sized>(out: &mut String, v: &T) {
    let text = serde_json::to_string(v).expect("JSON serializes");
    copy_text(out, &text);
}

/// A timestamp as PostgreSQL stores it (microseconds, truncated as the
/// binary encoding does).
pub(super) fn copy_time(out: &mut String, t: DateTime<Utc>) {
    use chrono::SubsecRound;
    out.push_str(
        &t.trunc_subsecs(6)
            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
    );
}

/// One `work_items` row (columns of [`work_item_cols`]) in COPY text format.
pub(super) fn copy_work_item_row(out: &mut String, w: &WorkItem, path: &str) {
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

pub(super) fn labels_from_json(v: Value) -> StoreResult<Labels> {
    serde_json::from_value(v).map_err(|e| corrupt("labels", e))
}

pub(super) fn target_to_json(t: &Target) -> Value {
    match t {
        Target::Any => json!({}),
        Target::Host(h) => json!({ "host": h }),
        Target::Selector(s) => json!({ "selector": s }),
    }
}

pub(super) fn target_from_json(v: Value) -> StoreResult<Target> {
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

pub(super) fn parse<T: std::str::FromStr>(row: &PgRow, col: &str) -> StoreResult<T>
where
    T::Err: std::fmt::Display,
{
    let s: String = row.try_get(col).map_err(db_err)?;
    s.parse().map_err(|e| corrupt(col, e))
}

pub(super) fn get<'r, T>(row: &'r PgRow, col: &str) -> StoreResult<T>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(col).map_err(db_err)
}

pub(super) fn meta_from_row(row: &PgRow) -> StoreResult<Meta> {
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

pub(super) fn project_from_row(row: &PgRow) -> StoreResult<Project> {
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

pub(super) fn work_item_from_row(row: &PgRow) -> StoreResult<WorkItem> {
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

pub(super) fn run_from_row(row: &PgRow) -> StoreResult<Run> {
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
        failure_message: get(row, "failure_message")?,
        pending_since: get(row, "pending_since")?,
        dispatchable_since: get(row, "dispatchable_since")?,
        exit_code: get(row, "exit_code")?,
        started_at: get(row, "started_at")?,
        finished_at: get(row, "finished_at")?,
        target: target_from_json(get(row, "target")?)?,
        max_attempts: get(row, "max_attempts")?,
        backoff_seconds: get(row, "backoff_seconds")?,
        backoff_max_seconds: get(row, "backoff_max_seconds")?,
        dispatch_timeout_seconds: get(row, "dispatch_timeout_seconds")?,
        stop_requested: get(row, "stop_requested")?,
        stopped_by: get(row, "stopped_by")?,
        permissions: json_col(row, "permissions")?,
        session_id: get(row, "session_id")?,
        last_activity: json_col(row, "last_activity")?,
        denials: json_col(row, "denials")?,
        requeue_at: get(row, "requeue_at")?,
        eligible_host_seen: get(row, "eligible_host_seen")?,
        usage: RunUsage {
            attempt: usage_from_row(row, "attempt")?,
            total: usage_from_row(row, "total")?,
        },
        meta: meta_from_row(row)?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

pub(super) fn host_from_row(row: &PgRow) -> StoreResult<Host> {
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
        worker_labels: labels_from_json(get(row, "worker_labels")?)?,
        capabilities: capabilities_from_json(get(row, "capabilities")?)?,
        meta: meta_from_row(row)?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

pub(super) fn token_from_row(row: &PgRow) -> StoreResult<ApiToken> {
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
        role: {
            let role: String = get(row, "role")?;
            Role::named(&role)
        },
        projects: get(row, "projects")?,
        created_at: get(row, "created_at")?,
        last_used_at: get(row, "last_used_at")?,
        revoked_at: get(row, "revoked_at")?,
    })
}

pub(super) fn token_kind_str(k: TokenKind) -> &'static str {
    match k {
        TokenKind::Operator => "operator",
        TokenKind::Worker => "worker",
    }
}

pub(super) fn event_from_row(row: &PgRow) -> StoreResult<Event> {
    Ok(Event {
        xid: get(row, "xid")?,
        seq: get(row, "seq")?,
        topic: get(row, "topic")?,
        payload: get(row, "payload")?,
        created_at: get(row, "created_at")?,
    })
}

pub(super) fn all<T>(rows: Vec<PgRow>, f: fn(&PgRow) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(f).collect()
}

pub(super) const SOURCE_STATUS_COLS: &str = "revision, attempted_revision, last_synced_at, \
    last_attempt_at, sync_status, sync_message, health, health_message, errors, drift, \
    departed, sync_requested_at";

/// A text column holding one of an enum's values (the table's CHECK keeps
/// it to them).
pub(super) fn parse_text<T>(
    row: &PgRow,
    col: &str,
    parse: fn(&str) -> Option<T>,
) -> StoreResult<T> {
    let text: String = get(row, col)?;
    parse(&text)
        .ok_or_else(|| StoreError::Database(format!("sources.{col}: unknown value {text:?}")))
}

pub(super) fn source_cols() -> String {
    format!("id, name, {META_COLS}, {SOURCE_STATUS_COLS}, created_at, updated_at")
}

pub(super) fn source_from_row(row: &PgRow) -> StoreResult<Source> {
    Ok(Source {
        id: get(row, "id")?,
        name: get(row, "name")?,
        meta: meta_from_row(row)?,
        status: SourceStatus {
            revision: get(row, "revision")?,
            attempted_revision: get(row, "attempted_revision")?,
            last_synced_at: get(row, "last_synced_at")?,
            last_attempt_at: get(row, "last_attempt_at")?,
            sync: parse_text(row, "sync_status", SyncState::parse)?,
            sync_message: get(row, "sync_message")?,
            health: parse_text(row, "health", HealthState::parse)?,
            health_message: get(row, "health_message")?,
            errors: get(row, "errors")?,
            drift: get(row, "drift")?,
            departed: get(row, "departed")?,
            sync_requested_at: get(row, "sync_requested_at")?,
        },
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

pub(super) fn webhook_cols() -> String {
    format!("id, name, {META_COLS}, created_at, updated_at")
}

pub(super) fn webhook_from_row(row: &PgRow) -> StoreResult<Webhook> {
    Ok(Webhook {
        id: get(row, "id")?,
        name: get(row, "name")?,
        meta: meta_from_row(row)?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

/// In the order [`Table::bind_insert`] binds.
pub(super) fn secret_cols() -> String {
    let own = Secret::OWN.join(", ");
    format!("id, project_id, name, {META_COLS}, {own}, created_at, updated_at")
}

pub(super) fn secret_from_row(row: &PgRow) -> StoreResult<Secret> {
    Ok(Secret {
        id: get(row, "id")?,
        project_id: get(row, "project_id")?,
        name: get(row, "name")?,
        meta: meta_from_row(row)?,
        salt: get(row, "salt")?,
        key_id: get(row, "key_id")?,
        nonce: get(row, "nonce")?,
        ciphertext: get(row, "ciphertext")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

pub(super) fn schedule_cols() -> String {
    format!("id, project_id, name, {META_COLS}, last_schedule_time, created_at, updated_at")
}

pub(super) fn schedule_from_row(row: &PgRow) -> StoreResult<Schedule> {
    Ok(Schedule {
        id: get(row, "id")?,
        project_id: get(row, "project_id")?,
        name: get(row, "name")?,
        meta: meta_from_row(row)?,
        last_schedule_time: get(row, "last_schedule_time")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

pub(super) fn object_cols() -> String {
    format!("id, kind, project_id, name, {META_COLS}, status, created_at, updated_at")
}

pub(super) fn object_from_row(row: &PgRow) -> StoreResult<Object> {
    Ok(Object {
        id: get(row, "id")?,
        kind: get(row, "kind")?,
        project_id: get(row, "project_id")?,
        name: get(row, "name")?,
        meta: meta_from_row(row)?,
        status: get(row, "status")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

/// A nullable JSON column read as `T`; a value that does not read is
/// corrupt.
fn json_col<T: serde::de::DeserializeOwned>(
    row: &sqlx::postgres::PgRow,
    col: &str,
) -> StoreResult<Option<T>> {
    let v: Option<serde_json::Value> = get(row, col)?;
    v.map(|v| serde_json::from_value(v).map_err(|e| corrupt(col, e)))
        .transpose()
}
