//! `/api/v1/webhooks`: list, get (with delivery counts),
//! delete; `/api/v1/webhookdeliveries`: list (`?webhook=NAME&status=…
//! &limit=`), get, and `POST …/ID/redeliver` (the same delivery, id and
//! body, due now).

use std::collections::HashMap;

use async_trait::async_trait;
use axum::extract::State;
use axum::http::StatusCode;
use pam_store::prelude::*;
use pam_store::{DeliveryFilter, DeliveryStatus, Webhook};
use serde::Deserialize;
use serde_json::Value;
use uuid::Uuid;

use crate::api::access::auth::Operator;
use crate::api::extract::{Json, Path, Query};
use crate::api::operator::list::list;
use crate::api::operator::served::{one, At, Served};
use crate::api::{operator::objects, ApiError, AppState};
use crate::rules::webhooks::deliveries;

type ApiResult<T> = Result<T, ApiError>;

#[async_trait]
impl Served for Webhook {
    /// With its delivery counts.
    async fn print(tx: &mut dyn Tx, _at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        let counts = tx.delivery_counts().await?;
        Ok(items
            .iter()
            .map(|w| objects::webhook(w, counts.get(&w.id).copied().unwrap_or_default()))
            .collect())
    }
}

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeliveriesQuery {
    /// One webhook's deliveries.
    webhook: Option<String>,
    /// `pending`, `delivered` or `failed`.
    status: Option<String>,
    /// At most this many, newest first (default 100, at most 1000).
    limit: Option<i64>,
}

/// The most deliveries one listing returns.
const DELIVERIES_MAX: i64 = 1000;

#[tracing::instrument(skip_all)]
pub async fn list_deliveries(
    State(st): State<AppState>,
    _op: Operator,
    Query(q): Query<DeliveriesQuery>,
) -> ApiResult<Json<Value>> {
    let status = match q.status.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(s) => Some(DeliveryStatus::parse(s).ok_or_else(|| {
            ApiError::bad_request(format!(
                "status: {s:?} is not a delivery status, expected pending, delivered or failed"
            ))
        })?),
    };
    let limit = crate::api::operator::events::page_limit(q.limit, 100, DELIVERIES_MAX)?;
    let mut tx = st.ctx.store.begin().await?;
    let hooks = tx.list::<Webhook>(()).await?;
    let names: HashMap<Uuid, String> = hooks.iter().map(|w| (w.id, w.name.clone())).collect();
    let webhook_id = match q.webhook.as_deref().filter(|w| !w.is_empty()) {
        None => None,
        Some(name) => Some(one::<Webhook>(tx.as_mut(), None, name).await?.id),
    };
    let rows = tx
        .list_deliveries(&DeliveryFilter {
            webhook_id,
            status,
            limit,
        })
        .await?;
    let items = rows
        .iter()
        .map(|d| objects::delivery(d, names.get(&d.webhook_id).map_or("", String::as_str)))
        .collect();
    Ok(list(items))
}

fn delivery_id(id: &str) -> ApiResult<Uuid> {
    id.parse()
        .map_err(|_| ApiError::bad_request(format!("{id:?} is not a delivery id (a UUID)")))
}

async fn one_delivery(tx: &mut dyn Tx, id: Uuid) -> ApiResult<Value> {
    let d = tx
        .get_delivery(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("webhook delivery {id} not found")))?;
    let name = tx
        .list::<Webhook>(())
        .await?
        .into_iter()
        .find(|w| w.id == d.webhook_id)
        .map(|w| w.name)
        .unwrap_or_default();
    Ok(objects::delivery(&d, &name))
}

#[tracing::instrument(skip_all, fields(delivery = %id))]
pub async fn get_delivery(
    State(st): State<AppState>,
    _op: Operator,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let id = delivery_id(&id)?;
    let mut tx = st.ctx.store.begin().await?;
    Ok(Json(one_delivery(tx.as_mut(), id).await?))
}

#[tracing::instrument(skip_all, fields(delivery = %id))]
pub async fn redeliver(
    State(st): State<AppState>,
    _op: Operator,
    Path(id): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let id = delivery_id(&id)?;
    let mut tx = st.ctx.store.begin().await?;
    if tx.get_delivery(id).await?.is_none() {
        return Err(ApiError::not_found(format!(
            "webhook delivery {id} not found"
        )));
    }
    deliveries::redeliver(tx.as_mut(), id, st.ctx.now()).await?;
    let body = one_delivery(tx.as_mut(), id).await?;
    st.ctx.commit(tx).await?;
    st.ctx.wakeups.deliveries.notify_one();
    Ok((StatusCode::ACCEPTED, Json(body)))
}
