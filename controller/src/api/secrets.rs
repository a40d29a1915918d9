//! `/api/v1/projects/P/secrets` (issue 18): list, get and delete Secrets —
//! keys, sizes and digests, never a value — and `POST
//! /api/v1/secrets/rotate-key`: a new current key, every Secret re-sealed
//! with it, the old keys dropped once nothing they sealed is left.

use axum::extract::State;
use axum::http::StatusCode;
use serde_json::Value;

use super::auth::Operator;
use super::extract::{Json, Path, Query};
use super::list::{list, selected, ListQuery};
use super::{lookup, objects, ApiError, AppState};
use crate::rules::secrets::{self, Rotation};

type ApiResult<T> = Result<T, ApiError>;

/// Secrets re-sealed per transaction during a rotation.
const RESEAL_BATCH: i64 = 100;

#[tracing::instrument(skip_all, fields(project = %project))]
pub async fn list_secrets(
    State(st): State<AppState>,
    _op: Operator,
    Path(project): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &project).await?;
    let items = tx
        .list_secrets(p.id)
        .await?
        .iter()
        .filter(|s| selected(&sel, &s.meta.labels))
        .map(|s| objects::secret(s, &p.slug))
        .collect();
    Ok(list(items))
}

/// `GET /api/v1/secrets`: every project's Secrets (`pamctl get secrets -A`).
#[tracing::instrument(skip_all)]
pub async fn list_all_secrets(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    for p in tx.list_projects().await? {
        for s in tx.list_secrets(p.id).await? {
            if selected(&sel, &s.meta.labels) {
                items.push(objects::secret(&s, &p.slug));
            }
        }
    }
    Ok(list(items))
}

#[tracing::instrument(skip_all, fields(project = %project, secret = %name))]
pub async fn get_secret(
    State(st): State<AppState>,
    _op: Operator,
    Path((project, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &project).await?;
    let s = lookup::secret(tx.as_mut(), &p, &name).await?;
    Ok(Json(objects::secret(&s, &p.slug)))
}

#[tracing::instrument(skip_all, fields(project = %project, secret = %name))]
pub async fn delete_secret(
    State(st): State<AppState>,
    _op: Operator,
    Path((project, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    let p = lookup::project(tx.as_mut(), &project).await?;
    let s = lookup::secret(tx.as_mut(), &p, &name).await?;
    secrets::delete(tx.as_mut(), s.id).await?;
    st.ctx.commit(tx).await?;
    st.ctx.wakeups.loops.notify_one();
    Ok(StatusCode::NO_CONTENT)
}

/// `pamctl secret rotate-key`: a new current key is written to the key
/// file first (old keys kept, so every Secret stays readable throughout),
/// then Secrets are re-sealed in batches, each its own transaction; the
/// old keys are dropped from the file only when no Secret uses them. A
/// rotation cut short is finished by running it again.
#[tracing::instrument(skip_all)]
pub async fn rotate_key(State(st): State<AppState>, _op: Operator) -> ApiResult<Json<Rotation>> {
    let ring = st.ctx.secrets.clone();
    let old = ring.ids();
    let key_id = ring
        .add_current()
        .map_err(|e| ApiError::internal(format!("write the secrets key file: {e:#}")))?;
    let mut resealed = 0;
    loop {
        let mut tx = st.ctx.store.begin().await?;
        let n = secrets::reseal_batch(tx.as_mut(), &ring, RESEAL_BATCH, st.ctx.now()).await?;
        st.ctx.commit(tx).await?;
        resealed += n;
        if n == 0 {
            break;
        }
    }
    let mut retired = Vec::new();
    let mut tx = st.ctx.store.begin().await?;
    for id in old {
        if !tx.secrets_sealed_with(&id).await? {
            retired.push(id);
        }
    }
    drop(tx);
    ring.retire(&retired)
        .map_err(|e| ApiError::internal(format!("write the secrets key file: {e:#}")))?;
    tracing::info!(key_id = %key_id, resealed, retired = retired.len(), "rotated the secrets key");
    Ok(Json(Rotation {
        key_id,
        resealed,
        retired,
    }))
}
