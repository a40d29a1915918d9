//! `GET /api/v1/events/stream`: Server-Sent Events (docs/api.md, "Event
//! stream (SSE)").
//!
//! # Guarantees
//! - Every stream follows the journal's one order ([`Position`]: by
//!   transaction, then seq), whichever replica serves it. A
//!   resume (`Last-Event-ID` or `?after=`, a seq) starts at that event's
//!   position and loses and repeats nothing across the journal/live seam:
//!   the handler subscribes to the broadcast *first*, then replays the
//!   journal after the resume position, then forwards live events skipping
//!   every position at or before the last seen. The reader publishes in
//!   the journal's order ([`crate::events::reader`]), so that skip never
//!   drops a late commit. A live stream starts at the position published
//!   when it subscribed (`X-Pam-Stream-Position` names it by seq).
//! - A resume position older than the journal's first event gets one
//!   `event: gap` naming the purged range, then the stream continues;
//!   so does one below the seq high-water mark when retention emptied the
//!   whole journal (the range then ends at that mark).
//! - A subscriber that falls behind the broadcast (`Lagged`) is caught up
//!   from the journal, not dropped.
//! - A closed connection drops the stream (no task outlives it); pamd's
//!   shutdown ends every stream.
//! - Revoking the stream's token ends the stream within a second
//!   ([`crate::api::access::revocation`]); the client's reconnect is refused (401).

use std::collections::VecDeque;
use std::sync::Arc;

use crate::api::extract::Query;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::Response;
use bytes::{Bytes, BytesMut};
use serde::Deserialize;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};

use pam_store::prelude::*;
use pam_store::{Position, Project};

use crate::api::access::auth::Operator;
use crate::api::access::revocation::Hold;
use crate::api::{ApiError, AppState};
pub use crate::events::filter::Filter;
use crate::events::filter::ProjectMemo;
use crate::events::{frame, EventBus, Published};
use crate::rules::access::{Grant, Verb};

/// Journal page size for replays and catch-ups.
const PAGE: i64 = 1000;
/// Live frames gathered into one body chunk at most (bytes), so a busy
/// stream writes few large chunks rather than one per event.
const BATCH_BYTES: usize = 64 * 1024;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StreamQuery {
    /// Replay the journal after this seq, then go live (`Last-Event-ID`
    /// wins); without either the stream is live only.
    after: Option<String>,
    /// Exact topics, comma-separated; one ending in `.` (`run.`) is a prefix.
    topic: Option<String>,
    /// Only events naming this project.
    project: Option<String>,
}

/// Resolves `?project=NAME` to (name, uid); an unknown project, or one
/// the caller's token may not see, is a 404.
pub async fn project_filter(
    store: &Arc<dyn Store>,
    grant: Option<&Grant>,
    project: Option<&str>,
) -> Result<Option<(String, String)>, ApiError> {
    let Some(name) = project.filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let missing = || ApiError::not_found(format!("project {name:?} not found"));
    if grant.is_some_and(|g| !g.sees(name)) {
        return Err(missing());
    }
    let mut tx = store.begin().await?;
    let p = tx.by_name::<Project>((), name).await?.ok_or_else(missing)?;
    Ok(Some((name.to_string(), p.id.to_string())))
}

/// The caller's filter of events: `topic` and `project` as asked, within
/// the projects its token may see.
pub async fn reader_filter(
    store: &Arc<dyn Store>,
    grant: Option<&Grant>,
    topic: Option<&str>,
    project: Option<&str>,
) -> Result<Filter, ApiError> {
    let asked = project_filter(store, grant, project).await?;
    // The projects whose events it may read (a custom role: those its
    // rules give `list` or `watch` on `events`).
    let reads = [Verb::List, Verb::Watch];
    let Some(scope) = grant.and_then(|g| g.scope_for(&reads, "events")) else {
        return Ok(Filter::new(topic, asked));
    };
    let mut tx = store.begin().await?;
    let mut within = Vec::with_capacity(scope.len());
    for slug in &scope {
        // A project of the scope that does not exist (yet) is kept by
        // name: its events name it once it does.
        let uid = tx
            .by_name::<Project>((), slug)
            .await?
            .map(|p| p.id.to_string());
        within.push((slug.clone(), uid.unwrap_or_default()));
    }
    Ok(Filter::new(topic, asked).within(Some(within)))
}

fn parse_seq(what: &str, v: &str) -> Result<i64, ApiError> {
    v.trim()
        .parse::<i64>()
        .ok()
        .filter(|s| *s >= 0)
        .ok_or_else(|| ApiError::bad_request(format!("{what} must be a non-negative integer")))
}

#[tracing::instrument(skip_all)]
pub async fn stream(
    State(st): State<AppState>,
    Operator(op): Operator,
    headers: HeaderMap,
    Query(q): Query<StreamQuery>,
) -> Result<Response, ApiError> {
    // Last-Event-ID (a reconnect) wins over ?after= (the first connect).
    let after = match headers.get("last-event-id") {
        Some(v) => Some(parse_seq(
            "Last-Event-ID",
            v.to_str()
                .map_err(|_| ApiError::bad_request("bad Last-Event-ID"))?,
        )?),
        None => q
            .after
            .as_deref()
            .map(|a| parse_seq("after", a))
            .transpose()?,
    };
    let filter = reader_filter(
        &st.ctx.store,
        op.grant(),
        q.topic.as_deref(),
        q.project.as_deref(),
    )
    .await?;

    // Subscribe before reading the journal: whatever is published from
    // now on reaches us live, whatever was published before is in the
    // journal.
    let bus = st.ctx.bus.clone();
    bus.start(&st.ctx.store, None).await?;
    let (rx, live_from) = bus.subscribe_at();
    let (bounds, high_water, resume) = {
        let mut tx = st.ctx.store.begin().await?;
        let mut bounds = tx.event_bounds().await?;
        let resume = match after {
            Some(a) => Some(tx.journal_position(a).await?),
            None => None,
        };
        let mut high_water = 0;
        if bounds.is_none() && after.is_some_and(|a| a > 0) {
            // An empty journal: was it purged past the resume position?
            // Under the append lock no append is in flight, so the bounds
            // read again now and the high-water mark agree (a commit
            // between the two reads cannot land inside the gap).
            high_water = tx.event_high_water().await?;
            bounds = tx.event_bounds().await?;
            // Ends the transaction now: it holds the append lock, which
            // every journaling write waits for.
            st.ctx.commit(tx).await?;
        }
        (bounds, high_water, resume)
    };
    let mut queue = VecDeque::new();
    let purged = match (after, bounds) {
        (Some(after), Some((lo, _))) if lo > after + 1 => Some((after + 1, lo - 1)),
        // Retention emptied the whole journal.
        (Some(after), None) if high_water > after => Some((after + 1, high_water)),
        _ => None,
    };
    if let Some((from, to)) = purged {
        let data = serde_json::json!({"from": from, "to": to});
        queue.push_back(Bytes::from(format!("event: gap\ndata: {data}\n\n")));
    }
    // Without a resume position the stream is live only.
    let (last, replaying) = match resume {
        Some(p) => (p, true),
        None => (live_from, false),
    };
    let position = live_from.seq;
    let token = op.hold(&st);
    let sub = Subscriber {
        revoked: Box::pin(token.revoked()),
        token,
        store: st.ctx.store.clone(),
        filter,
        rx,
        last,
        replaying,
        queue,
        keep_alive: tokio::time::interval_at(
            tokio::time::Instant::now() + bus.keep_alive,
            bus.keep_alive,
        ),
        shutdown: Box::pin(bus.on_shutdown()),
        lagged_count: bus.lagged.clone(),
        _gauge: GaugeGuard::new(&bus),
    };
    let mut resp = sse_response(sub);
    resp.headers_mut()
        .insert("x-pam-stream-position", HeaderValue::from(position));
    Ok(resp)
}

use crate::api::chunks::{sse_response, Chunks};

impl Chunks for Subscriber {
    fn chunk(&mut self) -> impl std::future::Future<Output = Option<Bytes>> + Send {
        self.next_chunk()
    }
}

/// Counts an open stream for as long as it lives.
struct GaugeGuard(prometheus_client::metrics::gauge::Gauge);

impl GaugeGuard {
    fn new(bus: &EventBus) -> GaugeGuard {
        bus.subscribers.inc();
        GaugeGuard(bus.subscribers.clone())
    }
}

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

struct Subscriber {
    store: Arc<dyn Store>,
    filter: Filter,
    rx: tokio::sync::broadcast::Receiver<Arc<Published>>,
    /// The last position seen (sent or filtered out); nothing at or
    /// before it is sent again.
    last: Position,
    /// Reading the journal after `last` (a resume, or a catch-up after
    /// lagging) rather than the broadcast.
    replaying: bool,
    queue: VecDeque<Bytes>,
    keep_alive: tokio::time::Interval,
    shutdown: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    /// The stream's token: revoking it ends the stream.
    token: Hold,
    revoked: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
    lagged_count: prometheus_client::metrics::counter::Counter,
    _gauge: GaugeGuard,
}

impl Subscriber {
    /// The next body chunk; `None` ends the stream.
    async fn next_chunk(&mut self) -> Option<Bytes> {
        loop {
            if self.token.is_revoked() {
                return None;
            }
            if let Some(b) = self.queue.pop_front() {
                return Some(b);
            }
            if self.replaying {
                if let Err(e) = self.replay_page().await {
                    // The client reconnects with Last-Event-ID.
                    tracing::warn!(error = %e, "event stream: journal read failed; closing");
                    return None;
                }
                continue;
            }
            tokio::select! {
                biased;
                _ = &mut self.shutdown => return None,
                _ = &mut self.revoked => return None,
                r = self.rx.recv() => match r {
                    Ok(p) => {
                        let mut chunk = Chunk::default();
                        self.take(&p, &mut chunk);
                        // Gather what is already waiting into one chunk.
                        while chunk.len() < BATCH_BYTES {
                            match self.rx.try_recv() {
                                Ok(p) => self.take(&p, &mut chunk),
                                Err(TryRecvError::Lagged(_)) => {
                                    self.lagged();
                                    break;
                                }
                                Err(_) => break,
                            }
                        }
                        if let Some(b) = chunk.finish() {
                            self.keep_alive.reset();
                            return Some(b);
                        }
                    }
                    Err(RecvError::Lagged(_)) => self.lagged(),
                    Err(RecvError::Closed) => return None,
                },
                _ = self.keep_alive.tick() => return Some(Bytes::from_static(b": keep-alive\n\n")),
            }
        }
    }

    /// Adds the commit's new, kept frames to `chunk`: each run of
    /// consecutive kept frames as one slice of the shared buffer.
    fn take(&mut self, p: &Published, chunk: &mut Chunk) {
        let mut run: Option<std::ops::Range<usize>> = None;
        let mut memo = ProjectMemo::default();
        for e in &p.events {
            if e.position <= self.last {
                continue;
            }
            self.last = e.position;
            if self.filter.keeps_published(e, &mut memo) {
                run = match run {
                    Some(r) if r.end == e.frame.start => Some(r.start..e.frame.end),
                    Some(r) => {
                        chunk.push(p.frames.slice(r), self.rx.len());
                        Some(e.frame.clone())
                    }
                    None => Some(e.frame.clone()),
                };
            }
        }
        if let Some(r) = run {
            chunk.push(p.frames.slice(r), self.rx.len());
        }
    }

    /// Fell behind the broadcast: what it dropped is committed, hence in
    /// the journal; read it from there, then go on with the broadcast
    /// (skipping what the journal gave).
    fn lagged(&mut self) {
        self.lagged_count.inc();
        self.replaying = true;
    }

    /// One journal page after `last`; ends replaying on a short page.
    async fn replay_page(&mut self) -> pam_store::StoreResult<()> {
        let page = {
            let mut tx = self.store.begin().await?;
            tx.journal_after(self.last, PAGE).await?
        };
        if (page.len() as i64) < PAGE {
            self.replaying = false;
        }
        let mut buf = BytesMut::new();
        for e in &page {
            self.last = e.position();
            if self.filter.keeps(e) {
                buf.extend_from_slice(&frame(e));
            }
        }
        if !buf.is_empty() {
            self.queue.push_back(buf.freeze());
        }
        Ok(())
    }
}

/// The live frames of one wake-up. A single slice goes out as it is (a
/// shared buffer: no copy, no allocation); several are copied into one
/// buffer sized for what is still queued.
#[derive(Default)]
struct Chunk {
    one: Option<Bytes>,
    buf: BytesMut,
}

impl Chunk {
    fn len(&self) -> usize {
        self.one.as_ref().map_or(0, Bytes::len) + self.buf.len()
    }

    /// `queued`: commits still waiting in the broadcast (a capacity hint).
    fn push(&mut self, frames: Bytes, queued: usize) {
        if self.one.is_none() && self.buf.is_empty() {
            self.one = Some(frames);
            return;
        }
        if let Some(first) = self.one.take() {
            let want = first.len() + frames.len() * (queued + 1);
            self.buf.reserve(want.min(BATCH_BYTES + frames.len()));
            self.buf.extend_from_slice(&first);
        }
        self.buf.extend_from_slice(&frames);
    }

    fn finish(self) -> Option<Bytes> {
        match self.one {
            Some(b) => Some(b),
            None if self.buf.is_empty() => None,
            None => Some(self.buf.freeze()),
        }
    }
}
