//! `/api/v1/sources` (GitOps): list, get (with status), delete, and
//! `POST /api/v1/sources/NAME/sync` — sync now (202; the sync loop does
//! it, `pamctl sync` waits for `lastSyncedAt` or a failure).

use crate::api::extract::{Json, Path, Query};
use axum::extract::State;
use axum::http::StatusCode;
use pam_store::Source;
use serde_json::Value;
use std::collections::HashMap;
use uuid::Uuid;

use super::auth::Operator;
use super::list::{list, selected, ListQuery};
use super::{lookup, objects, ApiError, AppState};
use crate::rules::sources;

type ApiResult<T> = Result<T, ApiError>;

/// One Source as the API shows it; `counts` from
/// `SourceTx::count_source_objects` (one read for a whole listing).
fn printed(s: &Source, counts: &HashMap<Uuid, u64>) -> Value {
    let inventory = counts.get(&s.id).copied().unwrap_or(0);
    objects::source(s, usize::try_from(inventory).unwrap_or(usize::MAX))
}

#[tracing::instrument(skip_all)]
pub async fn list_sources(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let sources: Vec<Source> = tx
        .list_sources()
        .await?
        .into_iter()
        .filter(|s| selected(&sel, &s.meta.labels))
        .collect();
    let ids: Vec<Uuid> = sources.iter().map(|s| s.id).collect();
    let counts = tx.count_source_objects(&ids).await?;
    let items = sources.iter().map(|s| printed(s, &counts)).collect();
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
    let counts = tx.count_source_objects(&[s.id]).await?;
    Ok(Json(printed(&s, &counts)))
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
    let counts = tx.count_source_objects(&[s.id]).await?;
    let body = printed(&s, &counts);
    st.ctx.commit(tx).await?;
    st.ctx.wakeups.loops.notify_one();
    Ok((StatusCode::ACCEPTED, Json(body)))
}
