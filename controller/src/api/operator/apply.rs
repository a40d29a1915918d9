//! `POST /api/v1/apply` and `POST /api/v1/diff` (see [`crate::apply`]).

use crate::api::extract::{Json, Query};
use axum::extract::State;
use axum::http::StatusCode;
use serde_json::{json, Value};

use crate::api::access::auth::Operator;
use crate::api::{ApiError, AppState};
use crate::apply::{self, ApplyError, ApplyRequest};

type ApiResult<T> = Result<T, ApiError>;

/// A batch refused for the token's scope counts like any refusal.
fn refused(st: &AppState, op: &crate::api::access::auth::Principal, e: ApiError) -> ApiError {
    if e.status == StatusCode::FORBIDDEN {
        crate::api::access::authz::refused(st, op, &e);
    }
    e
}

impl From<ApplyError> for ApiError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Invalid(errors) => {
                let n = errors.len();
                let mut err = ApiError::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid",
                    format!("{n} problem(s) in the input; nothing was written"),
                );
                err.details = Some(json!(errors
                    .iter()
                    .map(|e| json!({
                        "file": e.file, "document": e.document, "line": e.line,
                        "column": e.column, "path": e.path, "message": e.message,
                        "display": e.to_string(),
                    }))
                    .collect::<Vec<_>>()));
                err
            }
            ApplyError::BadRequest(m) => ApiError::bad_request(m),
            ApplyError::Forbidden(m) => ApiError::new(StatusCode::FORBIDDEN, "forbidden", m),
            ApplyError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            ApplyError::FieldConflict(m) => {
                ApiError::new(StatusCode::CONFLICT, "field_conflict", m)
            }
            ApplyError::Store(e) => e.into(),
        }
    }
}

/// The apply response, serialized straight from the results (no
/// intermediate JSON tree of every result).
#[derive(serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApplyResponse {
    dry_run: bool,
    results: Vec<apply::ApplyResult>,
}

/// `?forceConflicts=true`: take fields other managers own (server-side
/// apply's `--force-conflicts`); `?fieldManager=label|annotate|edit`:
/// the verb the request writes as (default `apply`), its manager
/// `VERB:TOKEN` ([`apply::managed`]).
#[derive(serde::Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ApplyQuery {
    #[serde(default)]
    force_conflicts: bool,
    #[serde(default)]
    field_manager: apply::managed::FieldManager,
}

/// What apply and diff take from the query and the caller alike: whether
/// to force conflicts, the manager (the query's verb for the request's
/// token) and the token's grant.
fn from_caller(req: &mut ApplyRequest, q: &ApplyQuery, op: &crate::api::access::auth::Principal) {
    req.force_conflicts = q.force_conflicts;
    req.manager = Some(apply::managed::Manager::of_request(
        q.field_manager,
        op.name(),
    ));
    req.grant = op.grant().cloned();
}

#[tracing::instrument(skip_all, fields(files = req.files.len(), objects = req.objects.len(), dry_run = req.dry_run))]
pub async fn apply_handler(
    State(st): State<AppState>,
    Operator(op): Operator,
    Query(q): Query<ApplyQuery>,
    Json(mut req): Json<ApplyRequest>,
) -> ApiResult<Json<ApplyResponse>> {
    from_caller(&mut req, &q, &op);
    let results = apply::apply(&st.ctx, &req)
        .await
        .map_err(|e| refused(&st, &op, e.into()))?;
    Ok(Json(ApplyResponse {
        dry_run: req.dry_run,
        results,
    }))
}

/// What apply would change, per object: the stored `{spec, labels,
/// annotations}` next to the desired one.
#[tracing::instrument(skip_all, fields(files = req.files.len(), objects = req.objects.len()))]
pub async fn diff_handler(
    State(st): State<AppState>,
    Operator(op): Operator,
    Query(q): Query<ApplyQuery>,
    Json(mut req): Json<ApplyRequest>,
) -> ApiResult<Json<Value>> {
    from_caller(&mut req, &q, &op);
    let items = apply::diff(&st.ctx, &req)
        .await
        .map_err(|e| refused(&st, &op, e.into()))?;
    Ok(Json(json!({ "items": items })))
}
