//! `GET /api/v1/projects/{project}/charts[?hours=N]`: a
//! project's runs over the last N hours (default 24, at most 720) in equal
//! buckets the server chooses (at most [`MAX_BUCKETS`]), for the
//! dashboard's charts — outcomes, throughput, durations, cost with the
//! budget, dispatch latency. Four grouped reads (`pam_store::charts`),
//! whatever the number of runs.

use std::collections::BTreeMap;

use axum::extract::State;
use chrono::{DateTime, Utc};
use pam_store::charts::{Window, FINISHED};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::access::auth::Operator;
use crate::api::extract::{Json, Path, Query};
use crate::api::operator::served::project;
use crate::api::{ApiError, AppState};
use crate::clock::ts;
use crate::events::topic;
use crate::rules::runs::usage::budget_of;

type ApiResult<T> = Result<T, ApiError>;

/// The window when `hours` is not given.
pub const DEFAULT_HOURS: i64 = 24;
/// The longest window (30 days).
pub const MAX_HOURS: i64 = 720;
/// At most this many buckets in a window.
pub const MAX_BUCKETS: i64 = 60;
/// The bucket sizes, smallest first: the first that fits the window in
/// [`MAX_BUCKETS`] is taken (24 h → 30 min, 1 h → 1 min).
const BUCKET_SECONDS: [i64; 11] = [
    60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
];

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChartsQuery {
    /// The window in hours, 1 to 720 (default 24).
    hours: Option<i64>,
}

/// The window of the last `hours` ending with the bucket `now` is in
/// (buckets start at multiples of their size since the epoch, so two
/// requests a moment apart count the same runs into the same buckets).
pub fn window(hours: i64, now: DateTime<Utc>) -> Window {
    let span = hours * 3600;
    let bucket_seconds = BUCKET_SECONDS
        .into_iter()
        .find(|b| (span + b - 1) / b <= MAX_BUCKETS)
        .unwrap_or(86400);
    let buckets = (span + bucket_seconds - 1) / bucket_seconds;
    let end = (now.timestamp().div_euclid(bucket_seconds) + 1) * bucket_seconds;
    let from = DateTime::from_timestamp(end - buckets * bucket_seconds, 0).unwrap_or(now);
    Window {
        from,
        bucket_seconds,
        buckets,
    }
}

/// One bucket's figures, filled from the three reads.
#[derive(Default)]
struct Bucket {
    finished: BTreeMap<&'static str, i64>,
    cost_micro_usd: i64,
    started: i64,
    claims: i64,
    duration: Option<(i64, i64)>,
    latency: Option<(i64, i64)>,
}

/// Bucket `b` of the window (the stores return only those inside it).
fn slot(buckets: &mut [Bucket], b: i64) -> Option<&mut Bucket> {
    usize::try_from(b).ok().and_then(|i| buckets.get_mut(i))
}

#[tracing::instrument(skip_all, fields(project = %slug))]
pub async fn project_charts(
    State(st): State<AppState>,
    _op: Operator,
    Path(slug): Path<String>,
    Query(q): Query<ChartsQuery>,
) -> ApiResult<Json<Value>> {
    let hours = q.hours.unwrap_or(DEFAULT_HOURS);
    if !(1..=MAX_HOURS).contains(&hours) {
        return Err(ApiError::bad_request(format!(
            "hours: must be from 1 to {MAX_HOURS}"
        )));
    }
    let w = window(hours, st.ctx.now());
    let mut tx = st.ctx.store.begin().await?;
    let p = project(tx.as_mut(), &slug).await?;
    let mut buckets: Vec<Bucket> = (0..w.buckets).map(|_| Bucket::default()).collect();
    for o in tx.chart_outcomes(p.id, &w).await? {
        if let Some(b) = slot(&mut buckets, o.bucket) {
            *b.finished.entry(o.status.as_str()).or_default() += o.runs;
            b.cost_micro_usd += o.cost_micro_usd;
        }
    }
    for d in tx.chart_durations(p.id, &w).await? {
        if let Some(b) = slot(&mut buckets, d.bucket) {
            b.duration = Some((d.p50_ms, d.p90_ms));
        }
    }
    for s in tx.chart_started(p.id, &w).await? {
        if let Some(b) = slot(&mut buckets, s.bucket) {
            b.started = s.runs;
        }
    }
    for d in tx.chart_dispatch(p.id, &w, topic::RUN_SPAWNING).await? {
        if let Some(b) = slot(&mut buckets, d.bucket) {
            b.claims = d.claims;
            b.latency = Some((d.latency_p50_ms, d.latency_p90_ms));
        }
    }
    let spent = tx
        .usage_by_project(&[p.id])
        .await?
        .first()
        .map_or(0.0, |(_, u)| u.cost_usd());
    let items: Vec<Value> = buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let start = w.from + chrono::Duration::seconds(i as i64 * w.bucket_seconds);
            let finished: serde_json::Map<String, Value> = FINISHED
                .iter()
                .map(|s| {
                    (
                        s.as_str().to_string(),
                        json!(b.finished.get(s.as_str()).copied().unwrap_or(0)),
                    )
                })
                .collect();
            json!({
                "start": ts(start),
                "finished": finished,
                "started": b.started,
                "claims": b.claims,
                "costUsd": b.cost_micro_usd as f64 / 1e6,
                "durationMs": b.duration.map(|(p50, p90)| json!({ "p50": p50, "p90": p90 })),
                "dispatchLatencyMs": b.latency.map(|(p50, p90)| json!({ "p50": p50, "p90": p90 })),
            })
        })
        .collect();
    Ok(Json(json!({
        "project": p.slug,
        "window": {
            "from": ts(w.from),
            "to": ts(w.to()),
            "hours": hours,
            "bucketSeconds": w.bucket_seconds,
        },
        "buckets": items,
        "budget": budget_of(&p.meta),
        "spentUsd": spent,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 0).unwrap()
    }

    #[test]
    fn windows_are_bounded_and_aligned() {
        let now = at(1_000_000_123);
        let w = window(24, now);
        assert_eq!((w.bucket_seconds, w.buckets), (1800, 48));
        assert!(w.from.timestamp() % 1800 == 0 && w.to() > now);
        assert!(w.to() - now <= chrono::Duration::seconds(1800));
        assert_eq!(window(1, now).bucket_seconds, 60);
        let w = window(MAX_HOURS, now);
        assert!(w.buckets <= MAX_BUCKETS, "{w:?}");
    }
}
