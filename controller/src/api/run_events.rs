//! `GET /api/v1/projects/{project}/runs/{name}/events`: one run's timeline
//! (every journaled event whose payload names the run, attempts included),
//! for the dashboard's run page.

use axum::extract::{Path, Query, State};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};

use super::auth::Operator;
use super::resources::{project_by_slug, run_by_name};
use super::{objects, ApiError, AppState};

#[derive(Debug, Deserialize)]
pub struct RunEventsQuery {
    /// Only events after this seq (a live page resumes from its last one).
    #[serde(default)]
    pub after: Option<i64>,
    /// At most this many, oldest first (default 1000, max 10000).
    #[serde(default)]
    pub limit: Option<i64>,
}

pub async fn run_events(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Query(q): Query<RunEventsQuery>,
) -> Result<Json<Value>, ApiError> {
    let run_id = {
        let mut tx = st.ctx.store.begin().await?;
        let p = project_by_slug(tx.as_mut(), &slug).await?;
        run_by_name(tx.as_mut(), &p, &name).await?.id
    };
    let limit = q.limit.unwrap_or(1000).clamp(1, 10_000);
    // Run events carry `run_id` in their payload (reconcile::runs::payload).
    let rows: Vec<(i64, String, Value, DateTime<Utc>)> = sqlx::query_as(
        "SELECT seq, topic, payload, created_at FROM events \
         WHERE payload->>'run_id' = $1 AND seq > $2 ORDER BY seq LIMIT $3",
    )
    .bind(run_id.to_string())
    .bind(q.after.unwrap_or(0))
    .bind(limit)
    .fetch_all(&st.pool)
    .await
    .map_err(ApiError::internal)?;
    let items: Vec<Value> = rows
        .into_iter()
        .map(|(seq, topic, payload, at)| {
            json!({"seq": seq, "topic": topic, "payload": payload, "createdAt": objects::ts(at)})
        })
        .collect();
    Ok(Json(json!({ "items": items })))
}
