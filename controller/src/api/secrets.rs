//! `/api/v1/projects/P/secrets` (issue 18): list, get and delete Secrets —
//! keys, sizes and digests, never a value — and `POST
//! /api/v1/secrets/rotate-key`: a new current key, every Secret re-sealed
//! with it, the old keys dropped once nothing they sealed is left.

use async_trait::async_trait;
use axum::extract::State;
use chrono::{DateTime, Utc};
use pam_store::prelude::*;
use pam_store::{Project, Secret};
use serde_json::Value;

use super::auth::Operator;
use super::extract::Json;
use super::served::{scoped, Served};
use super::{objects, ApiError, AppState};
use crate::ctx::Wakeups;
use crate::rules::secrets::{self, Rotation};

type ApiResult<T> = Result<T, ApiError>;

/// Secrets re-sealed per transaction during a rotation.
const RESEAL_BATCH: i64 = 100;

#[async_trait]
impl Served for Secret {
    async fn print(
        _tx: &mut dyn Tx,
        p: Option<&Project>,
        items: &[Self],
        _now: DateTime<Utc>,
    ) -> ApiResult<Vec<Value>> {
        let slug = &scoped(p)?.slug;
        Ok(items.iter().map(|s| objects::secret(s, slug)).collect())
    }

    fn deleted(w: &Wakeups) {
        w.loops.notify_one();
    }
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
