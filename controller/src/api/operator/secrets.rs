//! `/api/v1/projects/P/secrets`: list, get and delete Secrets —
//! keys, sizes and digests, never a value — and `POST
//! /api/v1/secrets/rotate-key`: a new current key, every Secret re-sealed
//! with it, the old keys dropped once nothing they sealed is left.

use async_trait::async_trait;
use axum::extract::State;
use pam_store::prelude::*;
use pam_store::Secret;
use serde_json::Value;

use crate::api::access::auth::Operator;
use crate::api::extract::Json;
use crate::api::operator::served::{scoped, At, Served};
use crate::api::{operator::objects, ApiError, AppState};
use crate::ctx::Wakeups;
use crate::rules::secrets::{self, Rotation};

type ApiResult<T> = Result<T, ApiError>;

/// Secrets re-sealed per transaction during a rotation.
const RESEAL_BATCH: i64 = 100;

#[async_trait]
impl Served for Secret {
    async fn print(_tx: &mut dyn Tx, at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        let p = at.project;
        let slug = &scoped(p)?.slug;
        Ok(items.iter().map(|s| objects::secret(s, slug)).collect())
    }

    fn deleted(w: &Wakeups) {
        w.loops.notify_one();
    }
}

/// The body of `POST /api/v1/secrets/rotate-key` (optional).
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RotateRequest {
    /// Re-seal every Secret with the key file's current (first) key and
    /// write nothing: for a key file pamd may not write (a read-only
    /// mount of a Kubernetes Secret), where the new key was put first
    /// where the file comes from and pamd rolled out with it.
    #[serde(default)]
    reseal_only: bool,
}

/// `pamctl secret rotate-key`: a new current key is written to the key
/// file first (old keys kept, so every Secret stays readable throughout),
/// then Secrets are re-sealed in batches, each its own transaction; the
/// old keys are dropped from the file only when no Secret uses them. A
/// rotation cut short is finished by running it again. With
/// `resealOnly` the file is left as it is: Secrets are re-sealed with its
/// current key and the old keys nothing uses are named (`removable`).
#[tracing::instrument(skip_all)]
pub async fn rotate_key(
    State(st): State<AppState>,
    _op: Operator,
    body: Option<Json<RotateRequest>>,
) -> ApiResult<Json<Rotation>> {
    let reseal_only = body.is_some_and(|Json(b)| b.reseal_only);
    let ring = st.ctx.secrets.clone();
    let old: Vec<String> = if reseal_only {
        ring.ids().into_iter().skip(1).collect()
    } else {
        ring.ids()
    };
    let key_id = if reseal_only {
        ring.current_id()
    } else {
        ring.add_current().map_err(key_file_error)?
    };
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
    let mut unused = Vec::new();
    let mut tx = st.ctx.store.begin().await?;
    for id in old {
        if !tx.secrets_sealed_with(&id).await? {
            unused.push(id);
        }
    }
    drop(tx);
    let (retired, removable) = if reseal_only {
        (Vec::new(), unused)
    } else {
        ring.retire(&unused).map_err(key_file_error)?;
        (unused, Vec::new())
    };
    tracing::info!(key_id = %key_id, resealed, retired = retired.len(), reseal_only, "rotated the secrets key");
    Ok(Json(Rotation {
        key_id,
        resealed,
        retired,
        removable,
    }))
}

/// A key file pamd may not write is how it was deployed (a read-only
/// mount of a Kubernetes Secret), not pamd failing: 409 with the way to
/// rotate there. Anything else writing it is an internal error.
fn key_file_error(e: anyhow::Error) -> ApiError {
    let read_only = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| {
            matches!(
                io.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            )
        })
    });
    if read_only {
        return crate::api::extract::status_error(
            axum::http::StatusCode::CONFLICT,
            "pamd cannot write its secrets key file (mounted read-only?): put a new key first \
             where the file comes from, roll pamd out, then run `pamctl secret rotate-key \
             --reseal-only` (docs/operations.md, \"Rotating the key\")",
        );
    }
    ApiError::internal(format!("write the secrets key file: {e:#}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_pamd_may_not_write_is_a_conflict_with_the_way_out() {
        for kind in [
            std::io::ErrorKind::PermissionDenied,
            std::io::ErrorKind::ReadOnlyFilesystem,
        ] {
            let e =
                anyhow::Error::new(std::io::Error::from(kind)).context("write /k/secrets.key.tmp");
            let api = key_file_error(e);
            assert_eq!(api.status, axum::http::StatusCode::CONFLICT, "{kind:?}");
            assert!(api.message.contains("--reseal-only"), "{}", api.message);
        }
        let other = key_file_error(anyhow::anyhow!("disk on fire"));
        assert_eq!(other.status, axum::http::StatusCode::INTERNAL_SERVER_ERROR);
    }
}
