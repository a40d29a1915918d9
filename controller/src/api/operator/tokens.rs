//! `/api/v1/tokens`: list, create (operator or worker), revoke. A token is
//! shown once, at creation; the database keeps its fingerprint only.
//! Revoking ends the token's open event streams and attach leases
//! ([`crate::api::access::revocation`]).

use crate::api::extract::{Json, Path};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use pam_store::{ApiToken, TokenKind};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::api::access::auth::Operator;
use crate::api::{ApiError, AppState};
use crate::clock::ts;
use crate::rules::access::{Grant, Role};
use crate::rules::tokens;

type ApiResult<T> = Result<T, ApiError>;

fn token_json(t: &ApiToken) -> Value {
    json!({
        "id": t.id, "name": t.name,
        "kind": match t.kind { TokenKind::Operator => "operator", TokenKind::Worker => "worker" },
        "host": t.host_name,
        "role": t.role.as_str(),
        "projects": t.projects,
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
    /// `admin` (the default), `operator`, `viewer`, `metrics` or the name
    /// of a `Role` object (a custom role); a worker token is
    /// always `worker`.
    #[serde(default)]
    role: Option<String>,
    /// The projects an operator or viewer token may act in (required for
    /// them; an admin's is every project).
    #[serde(default)]
    projects: Vec<String>,
}

/// The role and projects a new operator-side token asks for: a built-in
/// role, or a custom one — the name of a Role object that exists.
async fn grant_of(
    tx: &mut dyn pam_store::Tx,
    role: Option<&str>,
    projects: Vec<String>,
) -> ApiResult<Grant> {
    let unknown = |r: &str| {
        ApiError::bad_request(format!(
            "role {r:?}: give one of admin, operator, viewer, metrics or the name of a Role (pamctl get roles; worker tokens: `worker`)"
        ))
    };
    let role = match role {
        None => Role::Admin,
        Some(r) => match Role::parse(r) {
            Some(Role::Worker) => return Err(unknown(r)),
            Some(role) => role,
            None => {
                use crate::rules::kind::Stored;
                type RoleObject = crate::rules::objects::GenericObject<pam_manifests::kinds::Role>;
                RoleObject::by_name(tx, None, r)
                    .await?
                    .ok_or_else(|| unknown(r))?;
                Role::named(r)
            }
        },
    };
    for p in &projects {
        pam_manifests::Name::parse(p)
            .map_err(|e| ApiError::bad_request(format!("project {p:?}: {e}")))?;
    }
    let refused = match (&role, projects.is_empty()) {
        (Role::Admin, false) => Some(
            "an admin token acts in every project: give no projects (or another role)".to_string(),
        ),
        (Role::Metrics, false) => {
            Some("a metrics token only scrapes /metrics: give no projects".to_string())
        }
        (Role::Operator | Role::Viewer, true) => Some(format!(
            "a {} token needs its projects (`projects`, pamctl --project)",
            role.as_str()
        )),
        (Role::Custom(_), false) => Some(format!(
            "role {:?} is a Role: its rules name the projects, give none",
            role.as_str()
        )),
        _ => None,
    };
    match refused {
        Some(why) => Err(ApiError::bad_request(why)),
        None => Ok(Grant {
            role,
            projects,
            read_only: Vec::new(),
        }),
    }
}

#[tracing::instrument(skip_all)]
pub async fn create_token(
    State(st): State<AppState>,
    _op: Operator,
    Json(body): Json<NewToken>,
) -> ApiResult<Response> {
    let worker = body.worker.is_some();
    if worker && (body.role.is_some() || !body.projects.is_empty()) {
        return Err(ApiError::bad_request(
            "a worker token has the worker role and no projects",
        ));
    }
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
    let mut tx = st.ctx.store.begin().await?;
    let grant = if kind == TokenKind::Operator {
        crate::api::validate::token_name(&name)?;
        grant_of(tx.as_mut(), body.role.as_deref(), body.projects).await?
    } else {
        tokens::default_grant(kind)
    };
    let (t, token) = tokens::mint_with(tx.as_mut(), kind, name, host, grant, st.ctx.now()).await?;
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
    crate::api::operator::attach::release_revoked(&st).await;
    Ok(StatusCode::NO_CONTENT)
}
