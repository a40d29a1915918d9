//! `/api/v1/projects/P/schedules` (issue 18): list, get (with next/last
//! tick, active runs, last result), delete, and `POST …/NAME/trigger` —
//! one run now (`pamctl schedule trigger NAME`).

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{json, Value};

use super::auth::Operator;
use super::extract::{Json, Path, Query};
use super::list::{list, selected, ListQuery};
use super::{lookup, objects, ApiError, AppState};
use crate::rules::schedules::{self, Tick};

type ApiResult<T> = Result<T, ApiError>;

async fn printed(
    tx: &mut dyn pam_store::Tx,
    s: &pam_store::Schedule,
    slug: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> ApiResult<Value> {
    let runs = tx.schedule_runs(s.id).await?;
    Ok(objects::schedule(s, slug, &runs, now))
}

#[tracing::instrument(skip_all, fields(project = %project))]
pub async fn list_schedules(
    State(st): State<AppState>,
    _op: Operator,
    Path(project): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &project).await?;
    let mut items = Vec::new();
    for s in tx.list_schedules(p.id).await? {
        if selected(&sel, &s.meta.labels) {
            items.push(printed(tx.as_mut(), &s, &p.slug, st.ctx.now()).await?);
        }
    }
    Ok(list(items))
}

/// `GET /api/v1/schedules`: every project's Schedules (`pamctl get
/// schedules -A`).
#[tracing::instrument(skip_all)]
pub async fn list_all_schedules(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    for p in tx.list_projects().await? {
        for s in tx.list_schedules(p.id).await? {
            if selected(&sel, &s.meta.labels) {
                items.push(printed(tx.as_mut(), &s, &p.slug, st.ctx.now()).await?);
            }
        }
    }
    Ok(list(items))
}

#[tracing::instrument(skip_all, fields(project = %project, schedule = %name))]
pub async fn get_schedule(
    State(st): State<AppState>,
    _op: Operator,
    Path((project, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &project).await?;
    let s = lookup::schedule(tx.as_mut(), &p, &name).await?;
    Ok(Json(printed(tx.as_mut(), &s, &p.slug, st.ctx.now()).await?))
}

#[tracing::instrument(skip_all, fields(project = %project, schedule = %name))]
pub async fn delete_schedule(
    State(st): State<AppState>,
    _op: Operator,
    Path((project, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &project).await?;
    let s = lookup::schedule(tx.as_mut(), &p, &name).await?;
    schedules::delete(tx.as_mut(), s.id).await?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[tracing::instrument(skip_all, fields(project = %project, schedule = %name))]
pub async fn trigger_schedule(
    State(st): State<AppState>,
    _op: Operator,
    Path((project, name)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &project).await?;
    let s = lookup::schedule(tx.as_mut(), &p, &name).await?;
    match schedules::trigger(tx.as_mut(), &s, &p.slug, st.ctx.now()).await? {
        Tick::Created(run) => {
            st.ctx.commit(tx).await?;
            st.ctx.wakeups.claimable.notify_waiters();
            Ok((StatusCode::CREATED, Json(json!({ "run": run }))))
        }
        Tick::Skipped(why) => Err(ApiError::new(StatusCode::CONFLICT, "conflict", why)),
        Tick::Missed => Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            "the trigger was not taken",
        )),
    }
}
