//! `/api/v1/hosts`: list, get, delete, and the verbs `disable`, `enable`,
//! `clear-suspect`.

use async_trait::async_trait;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use pam_store::prelude::*;
use pam_store::Host;
use serde_json::Value;

use crate::api::access::auth::Operator;
use crate::api::extract::{Json, Path};
use crate::api::operator::list::to_json;
use crate::api::operator::served::{one, At, Served};
use crate::api::{operator::objects, ApiError, AppState};
use crate::rules::hosts;
use crate::rules::kind::Stored;

type ApiResult<T> = Result<T, ApiError>;

async fn host_object(tx: &mut dyn Tx, h: &Host) -> ApiResult<Value> {
    let running = tx.count_live_runs(h.id).await?;
    Ok(to_json(&objects::host(h, running.max(0) as u32)))
}

#[async_trait]
impl Served for Host {
    async fn print(tx: &mut dyn Tx, _at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        let mut out = Vec::with_capacity(items.len());
        for h in items {
            out.push(host_object(tx, h).await?);
        }
        Ok(out)
    }

    /// Refused while runs are live on it.
    async fn remove(self, tx: &mut dyn Tx, now: DateTime<Utc>) -> ApiResult<()> {
        if tx.count_live_runs(self.id).await? > 0 {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!(
                    "host {:?} has live runs; disable it and wait for them to finish",
                    self.name
                ),
            ));
        }
        Stored::delete(self, tx, now).await?;
        Ok(())
    }
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
    let h = one::<Host>(tx.as_mut(), None, &name).await?;
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
    st.ctx.host_may_take_runs();
    Ok(Json(obj))
}
