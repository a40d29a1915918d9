//! `/api/v1/hosts`: list, get, delete, and the verbs `disable`, `enable`,
//! `clear-suspect`.

use crate::api::extract::{Json, Path, Query};
use axum::extract::State;
use axum::http::StatusCode;
use pam_store::prelude::*;
use pam_store::Host;
use serde_json::Value;

use super::auth::Operator;
use super::list::{list, selected, to_json, ListQuery};
use super::{lookup, objects, ApiError, AppState};
use crate::rules::hosts;

type ApiResult<T> = Result<T, ApiError>;

async fn host_object(tx: &mut dyn Tx, h: &Host) -> ApiResult<Value> {
    let running = tx.count_live_runs(h.id).await?;
    Ok(to_json(&objects::host(h, running.max(0) as u32)))
}

#[tracing::instrument(skip_all)]
pub async fn list_hosts(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let sel = q.selector()?;
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    for h in tx.list_hosts().await? {
        // The host's one label set (issue 16), as targets match it.
        if selected(&sel, &h.labels()) {
            items.push(host_object(tx.as_mut(), &h).await?);
        }
    }
    Ok(list(items))
}

#[tracing::instrument(skip_all, fields(host = %name))]
pub async fn get_host(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let h = lookup::host(tx.as_mut(), &name).await?;
    Ok(Json(host_object(tx.as_mut(), &h).await?))
}

#[tracing::instrument(skip_all, fields(host = %name))]
pub async fn delete_host(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let mut tx = st.ctx.store.begin().await?;
    let h = lookup::host(tx.as_mut(), &name).await?;
    if tx.count_live_runs(h.id).await? > 0 {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("host {name:?} has live runs; disable it and wait for them to finish"),
        ));
    }
    hosts::delete(tx.as_mut(), &h).await?;
    st.ctx.commit(tx).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `pamctl host disable|enable|clear-suspect` ([`hosts::set_disabled`],
/// [`hosts::clear_suspect`]).
#[tracing::instrument(skip_all, fields(host = %name, action = %action))]
pub async fn host_action(
    State(st): State<AppState>,
    _op: Operator,
    Path((name, action)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let now = st.ctx.now();
    let offline_after = st.ctx.thresholds.offline_after;
    let mut tx = st.ctx.store.begin().await?;
    let h = lookup::host(tx.as_mut(), &name).await?;
    let h = match action.as_str() {
        "disable" | "enable" => {
            hosts::set_disabled(tx.as_mut(), h, action == "disable", offline_after, now).await?
        }
        "clear-suspect" => hosts::clear_suspect(tx.as_mut(), h, now).await?,
        other => {
            return Err(ApiError::not_found(format!(
                "unknown host action {other:?}; expected disable, enable or clear-suspect"
            )))
        }
    };
    let obj = host_object(tx.as_mut(), &h).await?;
    st.ctx.commit(tx).await?;
    st.ctx.wakeups.claimable.notify_waiters();
    Ok(Json(obj))
}
