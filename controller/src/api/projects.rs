//! `/api/v1/projects`: list, get, delete.

use crate::api::extract::{Json, Path, Query};
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::Value;

use super::auth::Operator;
use super::list::{list, selected, to_json, ListQuery};
use super::{lookup, objects, ApiError, AppState};
use crate::rules::projects;

type ApiResult<T> = Result<T, ApiError>;

#[tracing::instrument(skip_all)]
pub async fn list_projects(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let projects: Vec<_> = tx
        .list_projects()
        .await?
        .into_iter()
        .filter(|p| selected(&sel, &p.meta.labels))
        .collect();
    let ids: Vec<_> = projects.iter().map(|p| p.id).collect();
    let mut owners = lookup::project_owners(tx.as_mut(), &ids).await?;
    // Issue 21: one roll-up query for every listed project.
    let usage: std::collections::HashMap<_, _> =
        tx.usage_by_project(&ids).await?.into_iter().collect();
    let items = projects
        .iter()
        .map(|p| to_json(&objects::project(p, owners.remove(&p.id), usage.get(&p.id))))
        .collect();
    Ok(list(items))
}

#[tracing::instrument(skip_all, fields(project = %slug))]
pub async fn get_project(
    State(st): State<AppState>,
    _op: Operator,
    Path(slug): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &slug).await?;
    let mut owners = lookup::project_owners(tx.as_mut(), &[p.id]).await?;
    let usage = tx.usage_by_project(&[p.id]).await?;
    Ok(Json(to_json(&objects::project(
        &p,
        owners.remove(&p.id),
        usage.first().map(|(_, u)| u),
    ))))
}

#[tracing::instrument(skip_all, fields(project = %slug))]
pub async fn delete_project(
    State(st): State<AppState>,
    _op: Operator,
    Path(slug): Path<String>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &slug).await?;
    projects::delete(tx.as_mut(), &p).await?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}
