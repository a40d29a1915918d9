//! Operator endpoints for objects: list/get/delete per kind, apply, diff,
//! the imperative verbs (task transitions, run stop/signal, host
//! disable/enable/clear-suspect), tokens and the event journal. See
//! `docs/api.md`.

use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use pam_manifests::kinds::Manifest;
use pam_manifests::names::LabelSelector;
use pam_manifests::state::{RunStatus, WorkItemStatus};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::auth::{self, Operator};
use super::{objects, ApiError, AppState};
use crate::apply::{self, ApplyError, ApplyRequest};
use crate::events::topic;
use crate::reconcile::{identity, runs as run_rules};
use crate::store::{self, ApiToken, RunFilter, TokenKind, Tx};

type ApiResult<T> = Result<T, ApiError>;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct ListQuery {
    label_selector: Option<String>,
    phase: Option<String>,
    host: Option<String>,
}

impl ListQuery {
    fn selector(&self) -> ApiResult<Option<LabelSelector>> {
        match self.label_selector.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(s) => LabelSelector::parse(s)
                .map(Some)
                .map_err(|e| ApiError::bad_request(format!("labelSelector {s:?}: {e}"))),
        }
    }
}

fn selected(sel: &Option<LabelSelector>, labels: &store::Labels) -> bool {
    sel.as_ref()
        .is_none_or(|s| s.matches(&apply::to_manifest_labels(labels)))
}

fn list(items: Vec<Value>) -> Json<Value> {
    Json(json!({ "apiVersion": "pam.dev/v1", "kind": "List", "items": items }))
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("objects serialize")
}

pub(super) async fn project_by_slug(tx: &mut dyn Tx, slug: &str) -> ApiResult<store::Project> {
    tx.get_project_by_slug(slug)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {slug:?} not found")))
}

// ---------------------------------------------------------------- projects

pub async fn list_projects(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let items = tx
        .list_projects()
        .await?
        .iter()
        .filter(|p| selected(&sel, &p.meta.labels))
        .map(|p| to_json(&objects::project(p)))
        .collect();
    Ok(list(items))
}

pub async fn get_project(
    State(st): State<AppState>,
    _op: Operator,
    Path(slug): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    Ok(Json(to_json(&objects::project(&p))))
}

pub async fn delete_project(
    State(st): State<AppState>,
    _op: Operator,
    Path(slug): Path<String>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    tx.delete_project(p.id).await?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---------------------------------------------------------------- tasks

async fn tasks_of(
    tx: &mut dyn Tx,
    p: &store::Project,
    sel: &Option<LabelSelector>,
) -> ApiResult<Vec<Value>> {
    let items = tx.list_work_items(p.id).await?;
    let names: HashMap<Uuid, &str> = items.iter().map(|w| (w.id, w.name.as_str())).collect();
    let completion = objects::completions(&items);
    Ok(items
        .iter()
        .filter(|w| selected(sel, &w.meta.labels))
        .map(|w| {
            let parent = w.parent_id.and_then(|id| names.get(&id).copied());
            to_json(&objects::task(
                w,
                &p.slug,
                parent,
                completion.get(&w.id).copied(),
            ))
        })
        .collect())
}

pub async fn list_tasks(
    State(st): State<AppState>,
    _op: Operator,
    Path(slug): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    Ok(list(tasks_of(tx.as_mut(), &p, &sel).await?))
}

pub async fn list_all_tasks(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    for p in tx.list_projects().await? {
        items.extend(tasks_of(tx.as_mut(), &p, &sel).await?);
    }
    Ok(list(items))
}

async fn task_by_name(
    tx: &mut dyn Tx,
    p: &store::Project,
    name: &str,
) -> ApiResult<store::WorkItem> {
    tx.get_work_item_by_name(p.id, name).await?.ok_or_else(|| {
        ApiError::not_found(format!("task {name:?} not found in project {:?}", p.slug))
    })
}

async fn task_object(tx: &mut dyn Tx, p: &store::Project, w: &store::WorkItem) -> ApiResult<Value> {
    let parent = match w.parent_id {
        Some(id) => tx.get_work_item(id).await?.map(|p| p.name),
        None => None,
    };
    let subtree = tx.subtree(w.id).await?;
    let completion = objects::completions(&subtree).get(&w.id).copied();
    Ok(to_json(&objects::task(
        w,
        &p.slug,
        parent.as_deref(),
        completion,
    )))
}

pub async fn get_task(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    let w = task_by_name(tx.as_mut(), &p, &name).await?;
    Ok(Json(task_object(tx.as_mut(), &p, &w).await?))
}

pub async fn delete_task(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    let w = task_by_name(tx.as_mut(), &p, &name).await?;
    tx.delete_work_item(w.id).await?;
    tx.append_event(
        topic::WORK_ITEM_DELETED,
        apply::work_item_payload(&w, &p.slug),
        now,
    )
    .await?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransitionBody {
    to: WorkItemStatus,
    #[serde(default)]
    dry_run: bool,
}

/// `pamctl task start|done|cancel|reopen`, the dashboard's drag: the same
/// gate as apply. The verb also records the new status as the desired one
/// (spec.status), as `kubectl scale` writes the spec.
pub async fn transition_task(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Json(body): Json<TransitionBody>,
) -> ApiResult<Json<Value>> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    let w = task_by_name(tx.as_mut(), &p, &name).await?;
    if w.status == body.to {
        return Ok(Json(
            json!({ "task": task_object(tx.as_mut(), &p, &w).await?, "cascade": [], "changed": false }),
        ));
    }
    pam_manifests::state::transition(w.status, body.to)?;
    let (moved, cascade) = apply::set_task_status(tx.as_mut(), &w, body.to, &p.slug, now).await?;
    let mut moved = moved;
    let rv = moved.meta.resource_version;
    if let Some(spec) = moved.meta.spec.as_object_mut() {
        spec.insert("status".into(), json!(body.to.as_str()));
    }
    let moved = tx.update_work_item(&moved, rv).await?;
    let obj = task_object(tx.as_mut(), &p, &moved).await?;
    if !body.dry_run {
        st.ctx.commit(tx).await?;
    }
    Ok(Json(
        json!({ "task": obj, "cascade": cascade, "changed": true, "dryRun": body.dry_run }),
    ))
}

// ---------------------------------------------------------------- runs

/// Context to print runs: project slugs, task names, host names.
struct RunNames {
    projects: HashMap<Uuid, String>,
    tasks: HashMap<Uuid, String>,
    hosts: HashMap<Uuid, String>,
}

impl RunNames {
    async fn load(tx: &mut dyn Tx, projects: &[store::Project]) -> ApiResult<RunNames> {
        let mut tasks = HashMap::new();
        for p in projects {
            for w in tx.list_work_items(p.id).await? {
                tasks.insert(w.id, w.name);
            }
        }
        Ok(RunNames {
            projects: projects.iter().map(|p| (p.id, p.slug.clone())).collect(),
            tasks,
            hosts: tx
                .list_hosts()
                .await?
                .into_iter()
                .map(|h| (h.id, h.name))
                .collect(),
        })
    }

    fn object(&self, r: &store::Run) -> Value {
        to_json(&objects::run(
            r,
            self.projects.get(&r.project_id).map_or("", String::as_str),
            self.tasks.get(&r.task_id).map_or("", String::as_str),
            r.host_id
                .and_then(|h| self.hosts.get(&h))
                .map(String::as_str),
        ))
    }
}

async fn runs_list(
    tx: &mut dyn Tx,
    projects: Vec<store::Project>,
    q: &ListQuery,
) -> ApiResult<Vec<Value>> {
    let sel = q.selector()?;
    let phase = match q.phase.as_deref() {
        None | Some("") => None,
        Some(s) => Some(
            s.parse::<RunStatus>()
                .map_err(|e| ApiError::bad_request(e.to_string()))?,
        ),
    };
    let names = RunNames::load(tx, &projects).await?;
    let host_id = match q.host.as_deref() {
        None | Some("") => None,
        Some(h) => Some(
            names
                .hosts
                .iter()
                .find(|(_, n)| n.as_str() == h)
                .map(|(id, _)| *id)
                .ok_or_else(|| ApiError::not_found(format!("host {h:?} not found")))?,
        ),
    };
    let mut items = Vec::new();
    for p in &projects {
        let runs = tx
            .list_runs(&RunFilter {
                project_id: Some(p.id),
                host_id,
                statuses: phase.map(|s| vec![s]),
                ..RunFilter::default()
            })
            .await?;
        items.extend(
            runs.iter()
                .filter(|r| selected(&sel, &r.meta.labels))
                .map(|r| names.object(r)),
        );
    }
    Ok(items)
}

pub async fn list_runs(
    State(st): State<AppState>,
    _op: Operator,
    Path(slug): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    Ok(list(runs_list(tx.as_mut(), vec![p], &q).await?))
}

pub async fn list_all_runs(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let projects = tx.list_projects().await?;
    Ok(list(runs_list(tx.as_mut(), projects, &q).await?))
}

pub(super) async fn run_by_name(
    tx: &mut dyn Tx,
    p: &store::Project,
    name: &str,
) -> ApiResult<store::Run> {
    tx.get_run_by_name(p.id, name).await?.ok_or_else(|| {
        ApiError::not_found(format!("run {name:?} not found in project {:?}", p.slug))
    })
}

async fn run_object(tx: &mut dyn Tx, p: &store::Project, r: &store::Run) -> ApiResult<Value> {
    let names = RunNames::load(tx, std::slice::from_ref(p)).await?;
    Ok(names.object(r))
}

pub async fn get_run(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    let r = run_by_name(tx.as_mut(), &p, &name).await?;
    Ok(Json(run_object(tx.as_mut(), &p, &r).await?))
}

pub async fn delete_run(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    let r = run_by_name(tx.as_mut(), &p, &name).await?;
    tx.delete_run(r.id).await?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `pamctl stop RUN`: sets the desired stop (spec.stopped). The worker is
/// told through the desired set; a pending run is stopped by the loops
/// without dispatch.
pub async fn stop_run(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    let mut r = run_by_name(tx.as_mut(), &p, &name).await?;
    if !r.stop_requested {
        let rv = r.meta.resource_version;
        r.stop_requested = true;
        if let Some(spec) = r.meta.spec.as_object_mut() {
            spec.insert("stopped".into(), json!(true));
            r.meta.generation += 1;
            r.meta.observed_generation = r.meta.generation;
        }
        r = tx.update_run_spec(&r, rv).await?;
    }
    let obj = run_object(tx.as_mut(), &p, &r).await?;
    st.ctx.commit(tx).await?;
    st.ctx.wake.notify_one();
    // Wake the workers' long-polls so the stop reaches the session now.
    st.nudge.notify_waiters();
    Ok(Json(obj))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    signal: String,
}

const SIGNALS: &[&str] = &["INT", "TERM", "KILL", "HUP", "QUIT", "USR1", "USR2"];

/// `pamctl signal RUN --signal INT`: journaled (`run.signal_received`, whose
/// seq is the signal's id), then listed in the run's desired set until the
/// run ends; the worker delivers each id once.
pub async fn signal_run(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Json(body): Json<SignalBody>,
) -> ApiResult<Response> {
    let sig = body.signal.trim_start_matches("SIG").to_ascii_uppercase();
    if !SIGNALS.contains(&sig.as_str()) {
        return Err(ApiError::bad_request(format!(
            "unknown signal {:?}; expected one of {}",
            body.signal,
            SIGNALS.join(", ")
        )));
    }
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    let r = run_by_name(tx.as_mut(), &p, &name).await?;
    if !matches!(r.status, RunStatus::Spawning | RunStatus::Running) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!(
                "run {name:?} is {}; only a live run can be signalled",
                r.status
            ),
        ));
    }
    let ev = tx
        .append_event(
            topic::RUN_SIGNAL_RECEIVED,
            run_rules::payload(&r, json!({ "signal": sig })),
            now,
        )
        .await?;
    st.ctx.commit(tx).await?;
    // Durable from here: journaled, and rebuilt from the journal when pamd
    // starts (pending_signals).
    st.signals.push(r.id, r.host_id, r.attempt, ev.seq, sig);
    st.nudge.notify_waiters();
    Ok((StatusCode::ACCEPTED, Json(json!({ "accepted": true }))).into_response())
}

pub async fn run_output(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project_by_slug(tx.as_mut(), &slug).await?;
    let r = run_by_name(tx.as_mut(), &p, &name).await?;
    let snap = st
        .snapshots
        .get(r.id)
        .ok_or_else(|| ApiError::not_found(format!("no output for run {name:?} yet")))?;
    Ok(Json(json!({
        "attempt": snap.snapshot.attempt,
        "text": snap.snapshot.text,
        "lines": snap.snapshot.lines,
        "bytes": snap.snapshot.bytes,
        "receivedAt": objects::ts(snap.received_at),
    })))
}

// ---------------------------------------------------------------- hosts

async fn host_by_name(tx: &mut dyn Tx, name: &str) -> ApiResult<store::Host> {
    tx.get_host_by_name(name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("host {name:?} not found")))
}

async fn host_object(tx: &mut dyn Tx, h: &store::Host) -> ApiResult<Value> {
    let running = tx.count_live_runs(h.id).await?;
    Ok(to_json(&objects::host(h, running.max(0) as u32)))
}

pub async fn list_hosts(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    for h in tx.list_hosts().await? {
        if selected(&sel, &h.meta.labels) {
            items.push(host_object(tx.as_mut(), &h).await?);
        }
    }
    Ok(list(items))
}

pub async fn get_host(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let h = host_by_name(tx.as_mut(), &name).await?;
    Ok(Json(host_object(tx.as_mut(), &h).await?))
}

pub async fn delete_host(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    let h = host_by_name(tx.as_mut(), &name).await?;
    if tx.count_live_runs(h.id).await? > 0 {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("host {name:?} has live runs; disable it and wait for them to finish"),
        ));
    }
    tx.delete_host(h.id).await?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn host_action(
    State(st): State<AppState>,
    _op: Operator,
    Path((name, action)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let now = st.ctx.now();
    let offline_after =
        chrono::Duration::from_std(st.ctx.thresholds.offline_after).expect("threshold in range");
    let mut tx = st.ctx.store.begin().await?;
    let mut h = host_by_name(tx.as_mut(), &name).await?;
    let h = match action.as_str() {
        "disable" | "enable" => {
            let disabled = action == "disable";
            let rv = h.meta.resource_version;
            h.disabled = disabled;
            if let Some(spec) = h.meta.spec.as_object_mut() {
                if !spec.is_empty() {
                    spec.insert("disabled".into(), json!(disabled));
                }
            }
            let h = tx.update_host(&h, rv).await?;
            apply::set_host_disabled(tx.as_mut(), &h, disabled, offline_after, now).await?
        }
        "clear-suspect" => identity::clear_suspect(tx.as_mut(), h, now).await?,
        other => {
            return Err(ApiError::not_found(format!(
                "unknown host action {other:?}; expected disable, enable or clear-suspect"
            )))
        }
    };
    let obj = host_object(tx.as_mut(), &h).await?;
    st.ctx.commit(tx).await?;
    st.ctx.claimable.notify_waiters();
    Ok(Json(obj))
}

// ---------------------------------------------------------------- apply

fn apply_error(e: ApplyError) -> ApiError {
    match e {
        ApplyError::Invalid(errors) => {
            let n = errors.len();
            let mut err = ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid",
                format!("{n} problem(s) in the input; nothing was written"),
            );
            err.details = Some(json!(errors
                .iter()
                .map(|e| json!({
                    "file": e.file, "document": e.document, "line": e.line,
                    "column": e.column, "path": e.path, "message": e.message,
                    "display": e.to_string(),
                }))
                .collect::<Vec<_>>()));
            err
        }
        ApplyError::BadRequest(m) => ApiError::bad_request(m),
        ApplyError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
        ApplyError::Store(e) => e.into(),
    }
}

/// The apply response, serialized straight from the results (no
/// intermediate JSON tree of every result).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApplyResponse {
    dry_run: bool,
    results: Vec<apply::ApplyResult>,
}

pub async fn apply_handler(
    State(st): State<AppState>,
    _op: Operator,
    Json(req): Json<ApplyRequest>,
) -> ApiResult<Json<ApplyResponse>> {
    let results = apply::apply(&st.ctx, &req).await.map_err(apply_error)?;
    Ok(Json(ApplyResponse {
        dry_run: req.dry_run,
        results,
    }))
}

/// What apply would change, per object: the stored `{spec, labels,
/// annotations}` next to the desired one.
pub async fn diff_handler(
    State(st): State<AppState>,
    _op: Operator,
    Json(req): Json<ApplyRequest>,
) -> ApiResult<Json<Value>> {
    let docs = apply::documents(&req).map_err(apply_error)?;
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    for d in &docs {
        let m = &d.manifest;
        let desired = json!({
            "spec": m.spec_json(),
            "labels": apply::to_store_labels(m.labels()),
            "annotations": annotations_of(m),
        });
        let live = live_meta(tx.as_mut(), m).await?.map(|meta| {
            json!({ "spec": meta.spec, "labels": meta.labels, "annotations": meta.annotations })
        });
        let action = match &live {
            None => "create",
            Some(l) if *l == desired => "unchanged",
            Some(_) => "update",
        };
        items.push(json!({
            "kind": m.kind().as_str(), "project": m.project().map(|p| p.to_string()),
            "name": m.name().to_string(), "action": action, "live": live, "desired": desired,
        }));
    }
    Ok(Json(json!({ "items": items })))
}

fn annotations_of(m: &Manifest) -> store::Labels {
    match m {
        Manifest::Project(o) => apply::to_store_annotations(&o.metadata.annotations),
        Manifest::Task(o) => apply::to_store_annotations(&o.metadata.annotations),
        Manifest::Run(o) => apply::to_store_annotations(&o.metadata.annotations),
        Manifest::Host(o) => apply::to_store_annotations(&o.metadata.annotations),
    }
}

async fn live_meta(tx: &mut dyn Tx, m: &Manifest) -> ApiResult<Option<store::Meta>> {
    Ok(match m {
        Manifest::Project(p) => tx
            .get_project_by_slug(p.metadata.name.as_str())
            .await?
            .map(|p| p.meta),
        Manifest::Host(h) => tx
            .get_host_by_name(h.metadata.name.as_str())
            .await?
            .map(|h| h.meta),
        Manifest::Task(t) => match tx.get_project_by_slug(t.metadata.project.as_str()).await? {
            None => None,
            Some(p) => tx
                .get_work_item_by_name(p.id, t.metadata.name.as_str())
                .await?
                .map(|w| w.meta),
        },
        Manifest::Run(r) => match tx.get_project_by_slug(r.metadata.project.as_str()).await? {
            None => None,
            Some(p) => tx
                .get_run_by_name(p.id, r.metadata.name.as_str())
                .await?
                .map(|r| r.meta),
        },
    })
}

// ---------------------------------------------------------------- tokens

fn token_json(t: &ApiToken) -> Value {
    json!({
        "id": t.id, "name": t.name,
        "kind": match t.kind { TokenKind::Operator => "operator", TokenKind::Worker => "worker" },
        "host": t.host_name,
        "createdAt": objects::ts(t.created_at),
        "lastUsedAt": t.last_used_at.map(objects::ts),
        "revokedAt": t.revoked_at.map(objects::ts),
    })
}

pub async fn list_tokens(State(st): State<AppState>, _op: Operator) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let items: Vec<Value> = tx.list_tokens().await?.iter().map(token_json).collect();
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    worker: Option<String>,
}

pub async fn create_token(
    State(st): State<AppState>,
    _op: Operator,
    Json(body): Json<NewToken>,
) -> ApiResult<Response> {
    let (kind, name, host) = match (body.name, body.worker) {
        (Some(n), None) => (TokenKind::Operator, n, None),
        (None, Some(h)) => {
            pam_manifests::Name::parse(&h)
                .map_err(|e| ApiError::bad_request(format!("worker host name: {e}")))?;
            (TokenKind::Worker, format!("worker-{h}"), Some(h))
        }
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of `name` (an operator token) or `worker` (a host name)",
            ))
        }
    };
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("the token name must not be empty"));
    }
    let mut tx = st.ctx.store.begin().await?;
    let (t, token) = auth::insert_new_token(&mut *tx, kind, name, host, st.ctx.now()).await?;
    st.ctx.commit(tx).await?;
    let mut body = token_json(&t);
    body["token"] = json!(token);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

pub async fn revoke_token(
    State(st): State<AppState>,
    _op: Operator,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    if !tx.revoke_token(id, st.ctx.now()).await? {
        return Err(ApiError::not_found(format!("no live token with id {id}")));
    }
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

// ---------------------------------------------------------------- events

#[derive(Deserialize)]
pub struct EventsQuery {
    #[serde(default)]
    after: i64,
    topic: Option<String>,
    project: Option<String>,
    limit: Option<i64>,
}

/// Most events one page returns (`limit` is clamped to it).
pub const EVENTS_PAGE_MAX: i64 = 10_000;
/// Most journal rows one filtered page scans; a filter that matches little
/// returns fewer items and a `next` to continue from.
const EVENTS_SCAN_MAX: i64 = 100_000;

/// Pages the journal: events after `after`, filtered by `topic` (a comma
/// list; an entry ending in `.` is a prefix, `run.`) and `project`.
/// `next` is the seq to pass as `after` for the following page: the last
/// journal row this page looked at, so a filtered page never rescans.
pub async fn list_events(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<EventsQuery>,
) -> ApiResult<Json<Value>> {
    if q.after < 0 {
        return Err(ApiError::bad_request(
            "after must be a non-negative integer",
        ));
    }
    let limit = q.limit.unwrap_or(500).clamp(1, EVENTS_PAGE_MAX);
    let project =
        crate::events::stream::project_filter(&st.ctx.store, q.project.as_deref()).await?;
    let filter = crate::events::stream::Filter::new(q.topic.as_deref(), project);
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    let mut next = q.after;
    let mut scanned = 0;
    'pages: loop {
        let page = tx.events_after(next, limit).await?;
        let full = (page.len() as i64) == limit;
        for e in &page {
            next = e.seq;
            scanned += 1;
            if filter.keeps(e) {
                items.push(crate::events::event_json(e));
                if (items.len() as i64) == limit {
                    break 'pages;
                }
            }
        }
        if !full || scanned >= EVENTS_SCAN_MAX {
            break;
        }
    }
    Ok(Json(json!({ "items": items, "next": next })))
}
