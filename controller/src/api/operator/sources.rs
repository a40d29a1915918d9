//! `/api/v1/sources` (GitOps): list, get (with status), delete, and
//! `POST /api/v1/sources/NAME/sync` — sync now (202; the sync loop does
//! it, `pamctl sync` waits for `lastSyncedAt` or a failure).

use std::collections::HashMap;

use async_trait::async_trait;
use axum::extract::State;
use axum::http::StatusCode;
use pam_store::prelude::*;
use pam_store::Source;
use serde_json::Value;
use uuid::Uuid;

use crate::api::access::auth::Operator;
use crate::api::extract::{Json, Path};
use crate::api::operator::served::{one, At, Served};
use crate::api::{operator::objects, ApiError, AppState};
use crate::rules::sources;

type ApiResult<T> = Result<T, ApiError>;

/// One Source as the API shows it; `counts` from
/// `SourceTx::count_source_objects` (one read for a whole listing).
fn printed(s: &Source, counts: &HashMap<Uuid, u64>) -> Value {
    let inventory = counts.get(&s.id).copied().unwrap_or(0);
    objects::source(s, usize::try_from(inventory).unwrap_or(usize::MAX), None)
}

#[async_trait]
impl Served for Source {
    async fn print(tx: &mut dyn Tx, _at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        let ids: Vec<Uuid> = items.iter().map(|s| s.id).collect();
        let counts = tx.count_source_objects(&ids).await?;
        Ok(items.iter().map(|s| printed(s, &counts)).collect())
    }

    /// A get of one Source: each owned object's state too, read
    /// now; a listing keeps to one read for all.
    async fn print_one(&self, tx: &mut dyn Tx, _at: At<'_>) -> ApiResult<Value> {
        let owned = tx.owned_objects(self.id).await?;
        // Health as the owned runs stand now (the loop writes it within
        // sync::health::REFRESH; a get reads it at once).
        let mut s = self.clone();
        if s.status.revision.is_some() {
            let health = crate::sync::health::health_of(&owned);
            s.status.health = health.status;
            s.status.health_message = health.message;
        }
        let departed: Vec<pam_manifests::kinds::OwnedState> =
            serde_json::from_value(self.status.departed.clone()).unwrap_or_default();
        let states = crate::sync::objects::object_states(
            &owned,
            &departed,
            pam_manifests::kinds::OBJECTS_SHOWN,
        );
        Ok(objects::source(&s, owned.len(), Some(states)))
    }
}

#[tracing::instrument(skip_all, fields(source = %name))]
pub async fn sync_source(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let mut tx = st.ctx.store.begin().await?;
    let s = one::<Source>(tx.as_mut(), None, &name).await?;
    let s = sources::request_sync(tx.as_mut(), &s, st.ctx.now())
        .await?
        .map_err(|why| ApiError::new(StatusCode::CONFLICT, "suspended", why))?;
    let counts = tx.count_source_objects(&[s.id]).await?;
    let body = printed(&s, &counts);
    st.ctx.commit(tx).await?;
    st.ctx.wakeups.loops.notify_one();
    Ok((StatusCode::ACCEPTED, Json(body)))
}

/// `?revision=REF` of a preview.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffQuery {
    /// A branch, tag or commit of a git Source (default: its `spec.git.ref`).
    pub revision: Option<String>,
}

/// `POST /api/v1/sources/NAME/diff[?revision=REF]`: what a sync
/// would change, from the sync's own code in a rolled-back transaction
/// (`sync::preview`); 422 with what a sync would fail with.
#[tracing::instrument(skip_all, fields(source = %name))]
pub async fn diff_source(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
    axum::extract::Query(q): axum::extract::Query<DiffQuery>,
) -> ApiResult<Json<Value>> {
    let Some(repos) = st.repos.clone() else {
        return Err(ApiError::unavailable("this pamd reads no Source trees"));
    };
    let s = {
        let mut tx = st.ctx.store.begin().await?;
        one::<Source>(tx.as_mut(), None, &name).await?
    };
    let spec: pam_manifests::kinds::SourceSpec = serde_json::from_value(s.meta.spec.clone())
        .map_err(|e| ApiError::internal(format!("the stored spec: {e}")))?;
    if let Some(r) = &q.revision {
        if r.is_empty() || r.starts_with('-') || r.len() > 255 {
            return Err(ApiError::bad_request(
                "revision: expected a branch, tag or commit (not empty, not starting with '-')",
            ));
        }
    }
    let preview = crate::sync::preview::preview(&st.ctx, &repos, &s, &spec, q.revision.as_deref())
        .await
        .map_err(ApiError::internal)?;
    match preview {
        crate::sync::preview::Preview::Changes { revision, changes } => Ok(Json(
            serde_json::json!({ "source": s.name, "revision": revision, "changes": changes }),
        )),
        crate::sync::preview::Preview::Refused(why) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid",
            why,
        )),
    }
}
