//! `GET /api/v1/events`: pages of the journal, filtered like the stream
//! (`/api/v1/events/stream`, [`crate::api::stream`]).

use crate::api::extract::{Json, Query};
use axum::extract::State;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::access::auth::Operator;
use crate::api::{ApiError, AppState};
use crate::events::event_json;

type ApiResult<T> = Result<T, ApiError>;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Events with a greater seq, ascending (default 0).
    #[serde(default)]
    after: i64,
    /// Exact topics, comma-separated; one ending in `.` (`run.`) is a prefix.
    topic: Option<String>,
    /// Only events naming this project.
    project: Option<String>,
    /// At most this many (default 500, at most 10000).
    limit: Option<i64>,
}

/// Most events one page returns (`limit` is clamped to it).
pub const EVENTS_PAGE_MAX: i64 = 10_000;
/// The longest `GET /events` waits for transactions in flight to end
/// ([`pam_store::Store::journal_barrier`]); past it, the page may miss
/// events committed just before the request, which the next page (from
/// `next`) returns.
const JOURNAL_BARRIER: std::time::Duration = std::time::Duration::from_secs(1);
/// Most journal rows one filtered page scans; a filter that matches little
/// returns fewer items and a `next` to continue from.
const EVENTS_SCAN_MAX: i64 = 100_000;

/// A page size: `requested` (or `default`) when at least 1, clamped to
/// `max`; 0 or less is a 400 naming `limit`.
pub fn page_limit(requested: Option<i64>, default: i64, max: i64) -> Result<i64, ApiError> {
    match requested {
        None => Ok(default.min(max)),
        Some(n) if n >= 1 => Ok(n.min(max)),
        Some(n) => Err(ApiError::bad_request(format!(
            "limit: {n} is out of range, expected 1 to {max}"
        ))),
    }
}

/// Pages the journal in its one order (the streams'): events
/// after the event `after` (a seq, looked up to its position), filtered
/// by `topic` (a comma list; an entry ending in `.` is a prefix, `run.`)
/// and `project`. `next` is the seq to pass as `after` for the following
/// page: the last journal row this page looked at, so a filtered page
/// never rescans.
#[tracing::instrument(skip_all)]
pub async fn list_events(
    State(st): State<AppState>,
    Operator(op): Operator,
    Query(q): Query<EventsQuery>,
) -> ApiResult<Json<Value>> {
    if q.after < 0 {
        return Err(ApiError::bad_request(
            "after must be a non-negative integer",
        ));
    }
    let limit = page_limit(q.limit, 500, EVENTS_PAGE_MAX)?;
    let filter = crate::api::stream::reader_filter(
        &st.ctx.store,
        op.grant(),
        q.topic.as_deref(),
        q.project.as_deref(),
    )
    .await?;
    // Read-your-writes: a client that just wrote finds its events, though
    // a transaction in flight elsewhere may hold the journal's horizon
    // back for a moment.
    st.ctx.store.journal_barrier(JOURNAL_BARRIER).await?;
    let mut tx = st.ctx.store.begin().await?;
    let mut items = Vec::new();
    let mut next = q.after;
    let mut at = tx.journal_position(q.after).await?;
    let mut scanned = 0;
    'pages: loop {
        let page = tx.journal_after(at, limit).await?;
        let full = (page.len() as i64) == limit;
        for e in &page {
            next = e.seq;
            at = e.position();
            scanned += 1;
            if filter.keeps(e) {
                items.push(event_json(e));
                if (items.len() as i64) == limit {
                    break 'pages;
                }
            }
        }
        if !full || scanned >= EVENTS_SCAN_MAX {
            break;
        }
    }
    Ok(Json(json!({ "items": items, "next": next })))
}
