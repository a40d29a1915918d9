//! `/api/v1/sources` (GitOps): list, get (with status), delete, and
//! `POST /api/v1/sources/NAME/sync` — sync now (202; the sync loop does
//! it, `pamctl sync` waits for `lastSyncedAt` or a failure).

use crate::api::extract::{Json, Path, Query};
use axum::extract::State;
use axum::http::StatusCode;
use pam_store::prelude::*;
use pam_store::Source;
use serde_json::Value;

use super::auth::Operator;
use super::list::{list, selected, ListQuery};
use super::{lookup, objects, ApiError, AppState};
use crate::rules::sources;

type ApiResult<T> = Result<T, ApiError>;

async fn printed(tx: &mut dyn Tx, s: &Source) -> ApiResult<Value> {
    let inventory = tx.list_source_objects(s.id).await?.len();
    Ok(objects::source(s, inventory))
}

#[tracing::instrument(skip_all)]
pub async fn list_sources(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    for s in tx.list_sources().await? {
        if selected(&sel, &s.meta.labels) {
            items.push(printed(tx.as_mut(), &s).await?);
        }
    }
    Ok(list(items))
}

#[tracing::instrument(skip_all, fields(source = %name))]
pub async fn get_source(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let s = lookup::source(tx.as_mut(), &name).await?;
    Ok(Json(printed(tx.as_mut(), &s).await?))
}

#[tracing::instrument(skip_all, fields(source = %name))]
pub async fn delete_source(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    let s = lookup::source(tx.as_mut(), &name).await?;
    sources::delete(tx.as_mut(), &s).await?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[tracing::instrument(skip_all, fields(source = %name))]
pub async fn sync_source(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let mut tx = st.ctx.store.begin().await?;
    let s = lookup::source(tx.as_mut(), &name).await?;
    let s = sources::request_sync(tx.as_mut(), &s, st.ctx.now()).await?;
    let body = printed(tx.as_mut(), &s).await?;
    st.ctx.commit(tx).await?;
    st.ctx.wake.notify_one();
    Ok((StatusCode::ACCEPTED, Json(body)))
}
