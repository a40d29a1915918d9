//! `/api/v1/tokens`: list, create (operator or worker), revoke. A token is
//! shown once, at creation; the database keeps its fingerprint only.
//! Revoking ends the token's open event streams and attach leases
//! ([`super::revocation`]).

use crate::api::extract::{Json, Path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pam_store::{ApiToken, TokenKind};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::auth::Operator;
use super::{ApiError, AppState};
use crate::clock::ts;
use crate::rules::tokens;

type ApiResult<T> = Result<T, ApiError>;

fn token_json(t: &ApiToken) -> Value {
    json!({
        "id": t.id, "name": t.name,
        "kind": match t.kind { TokenKind::Operator => "operator", TokenKind::Worker => "worker" },
        "host": t.host_name,
        "createdAt": ts(t.created_at),
        "lastUsedAt": t.last_used_at.map(ts),
        "revokedAt": t.revoked_at.map(ts),
    })
}

#[tracing::instrument(skip_all)]
pub async fn list_tokens(State(st): State<AppState>, _op: Operator) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let items: Vec<Value> = tx.list_tokens().await?.iter().map(token_json).collect();
    Ok(Json(json!({ "items": items })))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    worker: Option<String>,
}

#[tracing::instrument(skip_all)]
pub async fn create_token(
    State(st): State<AppState>,
    _op: Operator,
    Json(body): Json<NewToken>,
) -> ApiResult<Response> {
    let (kind, name, host) = match (body.name, body.worker) {
        (Some(n), None) => (TokenKind::Operator, n, None),
        (None, Some(h)) => {
            pam_manifests::Name::parse(&h)
                .map_err(|e| ApiError::bad_request(format!("worker host name: {e}")))?;
            (TokenKind::Worker, format!("worker-{h}"), Some(h))
        }
        _ => {
            return Err(ApiError::bad_request(
                "give exactly one of `name` (an operator token) or `worker` (a host name)",
            ))
        }
    };
    if kind == TokenKind::Operator {
        super::validate::token_name(&name)?;
    }
    let mut tx = st.ctx.store.begin().await?;
    let (t, token) = tokens::mint(tx.as_mut(), kind, name, host, st.ctx.now()).await?;
    st.ctx.commit(tx).await?;
    let mut body = token_json(&t);
    body["token"] = json!(token);
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

#[tracing::instrument(skip_all, fields(id = %id))]
pub async fn revoke_token(
    State(st): State<AppState>,
    _op: Operator,
    Path(id): Path<Uuid>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    if !tokens::revoke(tx.as_mut(), id, st.ctx.now()).await? {
        return Err(ApiError::not_found(format!("no live token with id {id}")));
    }
    st.ctx.commit(tx).await?;
    // End what the token holds open here now; other replicas' re-checks
    // find the revocation in the database within a second.
    st.revocations.revoke(id);
    super::attach::release_revoked(&st).await;
    Ok(StatusCode::NO_CONTENT)
}
