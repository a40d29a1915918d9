//! The verbs on stored objects, for pamctl and the dashboard:
//! `POST /api/v1/projects/{p}/runs/{name}/rerun` (a new run with the same
//! spec, 201; 409 while the run is not finished), and suspend/resume of a
//! Source (`/api/v1/sources/{name}/suspend|resume`) or a Schedule
//! (`/api/v1/projects/{p}/schedules/{name}/suspend|resume`), 200 with the
//! object. The changes are the rules' ([`runs::template::rerun`],
//! [`sources::set_suspend`], [`schedules::set_suspend`]).

use axum::extract::State;
use axum::http::StatusCode;
use pam_store::{Run, Schedule, Source};
use serde_json::Value;

use crate::api::access::auth::Operator;
use crate::api::extract::{Json, Path};
use crate::api::operator::served::{one, one_in, At, Served};
use crate::api::{ApiError, AppState};
use crate::rules::{runs, schedules, sources};

type ApiResult<T> = Result<T, ApiError>;

/// The one object `items` printed as the API prints it.
fn first(mut items: Vec<Value>) -> ApiResult<Value> {
    items
        .pop()
        .ok_or_else(|| ApiError::internal("nothing printed"))
}

#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn rerun(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let (p, run) = one_in::<Run>(tx.as_mut(), &slug, &name).await?;
    let new = runs::template::rerun(tx.as_mut(), &p.slug, &run, now).await?;
    let body = new.print_one(tx.as_mut(), At::new(Some(&p), now)).await?;
    st.ctx.commit(tx).await?;
    st.ctx.wakeups.claimable.notify_waiters();
    Ok((StatusCode::CREATED, Json(body)))
}

/// `…/suspend` (`SUSPEND`) and `…/resume` of a Source: one handler, the
/// verb its route's.
#[tracing::instrument(skip_all, fields(source = %name, suspend = SUSPEND))]
pub async fn suspend_source<const SUSPEND: bool>(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let s = one::<Source>(tx.as_mut(), None, &name).await?;
    let (s, _) = sources::set_suspend(tx.as_mut(), s, SUSPEND, now).await?;
    // The listing's print, not a get's (which reads the owned objects).
    let body = first(Source::print(tx.as_mut(), At::new(None, now), &[s]).await?)?;
    st.ctx.commit(tx).await?;
    // A resumed Source syncs at once (its observedGeneration lags).
    st.ctx.wakeups.loops.notify_one();
    Ok(Json(body))
}

/// `…/suspend` (`SUSPEND`) and `…/resume` of a Schedule: one handler, the
/// verb its route's.
#[tracing::instrument(skip_all, fields(project = %slug, schedule = %name, suspend = SUSPEND))]
pub async fn suspend_schedule<const SUSPEND: bool>(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let (p, s) = one_in::<Schedule>(tx.as_mut(), &slug, &name).await?;
    let (s, _) = schedules::set_suspend(tx.as_mut(), s, SUSPEND, now).await?;
    let body = s.print_one(tx.as_mut(), At::new(Some(&p), now)).await?;
    st.ctx.commit(tx).await?;
    st.ctx.wakeups.loops.notify_one();
    Ok(Json(body))
}
