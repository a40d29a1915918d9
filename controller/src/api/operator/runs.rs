//! `/api/v1/projects/{p}/runs` and `/api/v1/runs`: list, get, delete, stop,
//! signal, the latest output, and a run's event timeline.

use std::collections::HashMap;

use async_trait::async_trait;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use pam_manifests::protocol::{SignalName, UnknownSignal};
use pam_manifests::state::RunStatus;
use pam_store::prelude::*;
use pam_store::{Host, Project, Run, RunFilter};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::api::access::auth::Operator;
use crate::api::extract::{Json, Path, Query};
use crate::api::operator::list::{selected, to_json, ListQuery};
use crate::api::operator::served::{one, one_in, scoped, At, Served};
use crate::api::{operator::lookup, operator::objects, ApiError, AppState};
use crate::clock::ts;
use crate::events::event_json;
use crate::rules::runs;

type ApiResult<T> = Result<T, ApiError>;

/// Context to print runs: project slugs, task names, host names.
struct RunNames {
    projects: HashMap<Uuid, String>,
    tasks: HashMap<Uuid, String>,
    hosts: HashMap<Uuid, String>,
    /// Task id → the tasks it waits for (not done).
    waiting: HashMap<Uuid, Vec<String>>,
    /// Project id → why it is over its budget.
    over_budget: HashMap<Uuid, String>,
    /// Run id → the Secret or key it waits for.
    secret_waits: HashMap<Uuid, String>,
    /// Run id → its latest attempt's workspace result, for
    /// the runs [`RunNames::with_results`] was given.
    results: HashMap<Uuid, pam_manifests::kinds::RunResult>,
}

impl RunNames {
    async fn load(tx: &mut dyn Tx, projects: &[Project]) -> ApiResult<RunNames> {
        let mut tasks = HashMap::new();
        for p in projects {
            for w in tx.list_work_items(p.id).await? {
                tasks.insert(w.id, w.name);
            }
        }
        let ids: Vec<Uuid> = tasks.keys().copied().collect();
        let waiting = lookup::task_deps(tx, &ids)
            .await?
            .into_iter()
            .map(|(id, d)| (id, d.blocked_by))
            .collect();
        let secret_waits = tx
            .run_secret_waits(None)
            .await?
            .into_iter()
            .map(|w| (w.run_id, w.message))
            .collect();
        Ok(RunNames {
            waiting,
            secret_waits,
            over_budget: projects
                .iter()
                .filter_map(|p| Some((p.id, objects::budget_message(&p.meta)?)))
                .collect(),
            projects: projects.iter().map(|p| (p.id, p.slug.clone())).collect(),
            tasks,
            results: HashMap::new(),
            hosts: tx
                .list::<Host>(())
                .await?
                .into_iter()
                .map(|h| (h.id, h.name))
                .collect(),
        })
    }

    /// Reads the latest results of `runs` (one statement).
    async fn with_results(mut self, tx: &mut dyn Tx, runs: &[Run]) -> ApiResult<RunNames> {
        let ids: Vec<Uuid> = runs.iter().map(|r| r.id).collect();
        for row in tx.latest_run_results(&ids).await? {
            self.results.insert(row.run_id, runs::result::status(&row));
        }
        Ok(self)
    }

    fn object(&self, r: &Run) -> Value {
        let mut run = objects::run(
            r,
            self.projects.get(&r.project_id).map_or("", String::as_str),
            self.tasks.get(&r.task_id).map_or("", String::as_str),
            r.host_id
                .and_then(|h| self.hosts.get(&h))
                .map(String::as_str),
            self.waiting.get(&r.task_id).map_or(&[], Vec::as_slice),
            self.over_budget.get(&r.project_id).map(String::as_str),
            self.secret_waits.get(&r.id).map(String::as_str),
        );
        if let Some(status) = run.status.as_mut() {
            status.result = self.results.get(&r.id).cloned();
        }
        to_json(&run)
    }
}

#[async_trait]
impl Served for Run {
    /// `?phase=` and `?host=` narrow it.
    async fn list(tx: &mut dyn Tx, p: Option<&Project>, q: &ListQuery) -> ApiResult<Vec<Self>> {
        let phase = match q.phase.as_deref() {
            None | Some("") => None,
            Some(s) => Some(
                s.parse::<RunStatus>()
                    .map_err(|e| ApiError::bad_request(e.to_string()))?,
            ),
        };
        let host_id = match q.host.as_deref() {
            None | Some("") => None,
            Some(h) => Some(one::<Host>(tx, None, h).await?.id),
        };
        Ok(tx
            .list_runs(&RunFilter {
                project_id: Some(scoped(p)?.id),
                host_id,
                statuses: phase.map(|s| vec![s]),
                ..RunFilter::default()
            })
            .await?)
    }

    /// With its task's and host's names and why it waits.
    async fn print(tx: &mut dyn Tx, at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        let p = at.project;
        let names = RunNames::load(tx, std::slice::from_ref(scoped(p)?)).await?;
        let names = names.with_results(tx, items).await?;
        Ok(items.iter().map(|r| names.object(r)).collect())
    }

    /// Every project's runs with one read of the names and waits for all
    /// (hosts, Secret waits), not one per project.
    async fn listed_everywhere(
        tx: &mut dyn Tx,
        projects: &[Project],
        q: &ListQuery,
        _now: DateTime<Utc>,
    ) -> ApiResult<Vec<Value>> {
        let sel = q.selector()?;
        let names = RunNames::load(tx, projects).await?;
        let mut runs = Vec::new();
        for p in projects {
            for r in Self::list(tx, Some(p), q).await? {
                if selected(&sel, &r.meta.labels) {
                    runs.push(r);
                }
            }
        }
        let names = names.with_results(tx, &runs).await?;
        Ok(runs.iter().map(|r| names.object(r)).collect())
    }
}

async fn run_object(tx: &mut dyn Tx, p: &Project, r: &Run) -> ApiResult<Value> {
    let names = RunNames::load(tx, std::slice::from_ref(p)).await?;
    let names = names.with_results(tx, std::slice::from_ref(r)).await?;
    Ok(names.object(r))
}

/// `pamctl stop RUN`: the desired stop ([`runs::request_stop`]).
#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn stop_run(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    // A loop writing the run between the read and the stop is a race
    // the operator did not cause: the stop runs again (api::retry).
    let obj = crate::retry::retry_conflicts(|| async {
        let now = st.ctx.now();
        let mut tx = st.ctx.store.begin().await?;
        let (p, r) = one_in::<Run>(tx.as_mut(), &slug, &name).await?;
        let r = runs::request_stop(tx.as_mut(), r, now).await?;
        let obj = run_object(tx.as_mut(), &p, &r).await?;
        st.ctx.commit(tx).await?;
        Ok::<_, ApiError>((obj, r.host_id))
    })
    .await?;
    let (obj, host) = obj;
    // `run.stop_requested` wakes the host's watch on every replica when
    // the journal reader publishes it; this one's is woken at once.
    if let Some(h) = host {
        st.ctx.wakeups.watches.changed(h);
    }
    st.ctx.wakeups.loops.notify_one();
    // Wake the workers' long-polls so the stop reaches the session now.
    st.ctx.wakeups.nudge.notify_waiters();
    Ok(Json(obj))
}

/// The run `name` of project `slug`, read in a transaction of its own.
pub(crate) async fn run_named(st: &AppState, slug: &str, name: &str) -> ApiResult<Run> {
    let mut tx = st.ctx.store.begin().await?;
    Ok(one_in::<Run>(tx.as_mut(), slug, name).await?.1)
}

/// 409 unless the run is live (spawning or running): only a live run's
/// session can be signalled or attached to (`what`: "signalled", "attached").
pub(crate) fn must_be_live(run: &Run, name: &str, what: &str) -> ApiResult<()> {
    if run.status.is_live() {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "conflict",
        format!(
            "run {name:?} is {}; only a live run can be {what}",
            run.status
        ),
    ))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SignalBody {
    signal: String,
}

/// `pamctl signal RUN --signal INT`: journaled (`run.signal_received`, whose
/// seq is the signal's id), then listed in the run's desired set until the
/// run ends; the worker delivers each id once.
#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn signal_run(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Json(body): Json<SignalBody>,
) -> ApiResult<Response> {
    // The one operator-signal list: pam_manifests::protocol::SignalName.
    let sig: SignalName = body
        .signal
        .parse()
        .map_err(|e: UnknownSignal| ApiError::bad_request(e.to_string()))?;
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let (_, r) = one_in::<Run>(tx.as_mut(), &slug, &name).await?;
    must_be_live(&r, &name, "signalled")?;
    let ev = runs::journal_signal(tx.as_mut(), &r, sig, now).await?;
    st.ctx.commit(tx).await?;
    // Durable from here: journaled, and rebuilt from the journal when pamd
    // starts (fleet::signals).
    st.fleet
        .signals()
        .push(r.id, r.host_id, r.attempt, ev.seq, sig.to_string());
    st.ctx.wakeups.nudge.notify_waiters();
    Ok((StatusCode::ACCEPTED, Json(json!({ "accepted": true }))).into_response())
}

#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn run_output(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let r = run_named(&st, &slug, &name).await?;
    let snap = st
        .snapshots
        .get(r.id)
        .ok_or_else(|| ApiError::not_found(format!("no output for run {name:?} yet")))?;
    Ok(Json(json!({
        "attempt": snap.snapshot.attempt,
        "text": snap.snapshot.text,
        "lines": snap.snapshot.lines,
        "bytes": snap.snapshot.bytes,
        "receivedAt": ts(snap.received_at),
    })))
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunEventsQuery {
    /// Only events after this seq (a live page resumes from its last one).
    #[serde(default)]
    pub after: Option<i64>,
    /// At most this many, oldest first (default 1000, max 10000).
    #[serde(default)]
    pub limit: Option<i64>,
}

/// `GET /api/v1/projects/{project}/runs/{name}/events`: one run's timeline
/// (every journaled event whose payload names the run, attempts included),
/// for the dashboard's run page.
#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn run_events(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Query(q): Query<RunEventsQuery>,
) -> ApiResult<Json<Value>> {
    if q.after.is_some_and(|a| a < 0) {
        return Err(ApiError::bad_request(
            "after: must be a non-negative integer",
        ));
    }
    let limit = crate::api::operator::events::page_limit(q.limit, 1000, 10_000)?;
    let mut tx = st.ctx.store.begin().await?;
    let (_, run) = one_in::<Run>(tx.as_mut(), &slug, &name).await?;
    let items: Vec<Value> = tx
        .run_events(run.id, q.after.unwrap_or(0), limit)
        .await?
        .iter()
        .map(event_json)
        .collect();
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunResultQuery {
    /// The attempt; absent: the latest with a result.
    #[serde(default)]
    attempt: Option<i32>,
}

/// `GET /api/v1/projects/{project}/runs/{name}/result[?attempt=N]`: an
/// attempt's workspace result with its patch; anyone who may
/// read the run may read it.
#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn run_result(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Query(q): Query<RunResultQuery>,
) -> ApiResult<Json<Value>> {
    if q.attempt.is_some_and(|a| a < 1) {
        return Err(ApiError::bad_request("attempt: must be at least 1"));
    }
    let mut tx = st.ctx.store.begin().await?;
    let (_, run) = one_in::<Run>(tx.as_mut(), &slug, &name).await?;
    let row = tx.run_results(run.id, q.attempt).await?.pop();
    let Some(row) = row else {
        return Err(ApiError::not_found(match q.attempt {
            Some(a) => format!("run {name:?} has no workspace result for attempt {a}"),
            None => format!("run {name:?} has no workspace result"),
        }));
    };
    let mut body = serde_json::to_value(runs::result::status(&row)).map_err(ApiError::internal)?;
    body["run"] = json!(run.name);
    body["recordedAt"] = json!(ts(row.recorded_at));
    body["patch"] = json!(row.patch);
    Ok(Json(body))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunActivityQuery {
    /// The attempt; absent: the run's current one.
    #[serde(default)]
    attempt: Option<i32>,
}

/// What an attempt's agent did lately.
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunActivity {
    /// The run's name.
    pub run: String,
    /// The attempt the items are of.
    pub attempt: i32,
    /// The provider's session id, for the current attempt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The newest items (at most 20), oldest first, each with its time.
    pub items: Vec<pam_manifests::protocol::Entry>,
}

/// `GET /api/v1/projects/{project}/runs/{name}/activity[?attempt=N]`:
/// the newest things an attempt's agent did (messages, tool calls and
/// their results, errors, API retries, refused tool calls), as its
/// progress signals reported them — `describe run`'s "Recent activity"
/// and the dashboard's. The whole conversation is the transcript, kept
/// by the run's worker.
#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn run_activity(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Query(q): Query<RunActivityQuery>,
) -> ApiResult<Json<RunActivity>> {
    if q.attempt.is_some_and(|a| a < 1) {
        return Err(ApiError::bad_request("attempt: must be at least 1"));
    }
    let mut tx = st.ctx.store.begin().await?;
    let (_, run) = one_in::<Run>(tx.as_mut(), &slug, &name).await?;
    let attempt = q.attempt.unwrap_or(run.attempt);
    if attempt > run.attempt {
        return Err(ApiError::not_found(format!(
            "run {name:?} has no attempt {attempt} (it is at attempt {})",
            run.attempt
        )));
    }
    let items = tx.run_activity(run.id, attempt).await?;
    Ok(Json(RunActivity {
        run: run.name.clone(),
        attempt,
        session_id: run.session_id.clone().filter(|_| attempt == run.attempt),
        items,
    }))
}
