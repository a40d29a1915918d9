//! Events: the journal (the `events` table, written inside the transaction
//! that makes the change) and the in-process broadcast that subscribers
//! (SSE, long-polls) listen on. Events are published only after their
//! transaction committed (pam-data-model.txt, processed_signals: no phantom
//! events), and only by the journal reader ([`reader`]): it reads the
//! journal in its one order, so this process's commits, other replicas'
//! and a resuming stream's replay all agree.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{broadcast, watch};

use pam_store::{Event, Position};

pub mod filter;
pub mod follow;
pub mod message;
pub mod payload;
pub mod reader;
pub mod render;
pub mod topic;

pub use render::{event_json, frame};

/// One commit's events as subscribers receive them: serialized once, at
/// publish, into their whole SSE frames, laid end to end in one buffer, so
/// fan-out to many subscribers copies a reference count, not JSON
/// (docs/api.md, "Event stream"), and a subscriber gets a commit's events
/// in one wake-up (usually as one zero-copy slice of [`Published::frames`]).
#[derive(Debug)]
pub struct Published {
    /// In seq order.
    pub events: Vec<PublishedEvent>,
    /// Every event's `id: …\nevent: …\ndata: …\n\n`, in seq order.
    pub frames: Bytes,
}

/// One event of a [`Published`] commit.
#[derive(Debug)]
pub struct PublishedEvent {
    /// Its place in the journal's order.
    pub position: Position,
    pub seq: i64,
    pub topic: String,
    /// The payload's `project` (a name), for `?project=` and a token's
    /// scope; consecutive events naming the same project share one
    /// allocation, so a stream decides a commit's project once
    /// ([`filter::Filter::keeps_published`]).
    pub project: Option<Arc<str>>,
    /// The payload's `project_id` (a uid), shared the same way.
    pub project_id: Option<Arc<str>>,
    /// The payload's `host_id`: whose watch stream a run's event wakes.
    pub host_id: Option<uuid::Uuid>,
    /// Where its frame lies in [`Published::frames`].
    pub frame: std::ops::Range<usize>,
}

impl Published {
    /// `events`: one commit's, in the journal's order.
    pub fn new(events: &[Event]) -> Published {
        let mut frames = Vec::new();
        let (mut project, mut project_id) = (None, None);
        let events = events
            .iter()
            .map(|e| {
                let start = frames.len();
                render::write_frame(&mut frames, e);
                PublishedEvent {
                    position: e.position(),
                    seq: e.seq,
                    topic: e.topic.clone(),
                    project: shared(&mut project, e.payload.get("project")),
                    project_id: shared(&mut project_id, e.payload.get("project_id")),
                    host_id: e
                        .payload
                        .get("host_id")
                        .and_then(serde_json::Value::as_str)
                        .and_then(|h| h.parse().ok()),
                    frame: start..frames.len(),
                }
            })
            .collect();
        Published {
            events,
            frames: Bytes::from(frames),
        }
    }
}

/// A payload's string field as an `Arc<str>`, the previous event's when
/// it names the same value (`last`).
fn shared(last: &mut Option<Arc<str>>, v: Option<&serde_json::Value>) -> Option<Arc<str>> {
    let v = v.and_then(serde_json::Value::as_str)?;
    match last {
        Some(l) if &**l == v => Some(l.clone()),
        _ => {
            let a: Arc<str> = Arc::from(v);
            *last = Some(a.clone());
            Some(a)
        }
    }
}

/// Consecutive transactions' events are merged into one broadcast message
/// up to this many.
const MESSAGE_EVENTS: usize = 64;

/// Fan-out of committed events, plus what the stream handler shares:
/// the shutdown signal, counters.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<Published>>,
    /// The journal reader: the one publisher ([`reader`]).
    journal: Arc<reader::Journal>,
    /// See [`EventBus::on_read`].
    #[allow(clippy::type_complexity)]
    on_read: Arc<std::sync::Mutex<Option<Arc<dyn Fn(&[Event]) + Send + Sync>>>>,
    shutdown: watch::Sender<bool>,
    /// How often idle streams get a `: keep-alive` comment.
    pub keep_alive: Duration,
    /// Events journaled and committed by this process.
    pub journaled: Counter,
    /// Open SSE streams.
    pub subscribers: Gauge,
    /// Times a subscriber fell behind the broadcast and was caught up from
    /// the journal.
    pub lagged: Counter,
}

impl EventBus {
    /// `capacity`: commits the broadcast keeps for a slow subscriber
    /// before it lags (and is caught up from the journal).
    pub fn new(capacity: usize) -> Self {
        let (tx, _) = broadcast::channel(capacity);
        let (shutdown, _) = watch::channel(false);
        EventBus {
            tx,
            journal: Default::default(),
            on_read: Default::default(),
            shutdown,
            keep_alive: Duration::from_secs(15),
            journaled: Counter::default(),
            subscribers: Gauge::default(),
            lagged: Counter::default(),
        }
    }

    /// What to do with events other processes (replicas) committed, when
    /// the reader publishes them (wake claims, record operator signals):
    /// set once, by whoever runs the server. This process's own commits
    /// did that when they committed ([`EventBus::expect_local`]).
    pub fn on_read(&self, f: impl Fn(&[Event]) + Send + Sync + 'static) {
        *self.on_read.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(f));
    }

    /// The position published up to: the reader publishes what lies after
    /// it, in order.
    pub fn published(&self) -> Position {
        *self.journal.lock_position()
    }

    /// Publishes one page read from the journal (in its order, after
    /// [`EventBus::published`]): whole transactions per broadcast message,
    /// so a subscriber gets a commit's events in one wake-up.
    fn publish_page(&self, mut events: Vec<Event>) {
        let mut at = self.journal.lock_position();
        events.retain(|e| e.position() > *at);
        let Some(last) = events.last() else {
            return;
        };
        *at = last.position();
        let foreign: Vec<Event> = {
            let mut local = self.journal.lock_local();
            let hook = self
                .on_read
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone();
            let mut foreign = Vec::new();
            for e in &events {
                if !local.remove(&e.seq) && hook.is_some() {
                    foreign.push(e.clone());
                }
            }
            if let (Some(f), false) = (hook, foreign.is_empty()) {
                f(&foreign);
            }
            foreign
        };
        drop(foreign);
        // No stream listens: no frames to build. A stream subscribing
        // later starts after the position just set
        // ([`EventBus::subscribe_at`]).
        let listened = self.tx.receiver_count() > 0;
        let mut from = 0;
        for (to, commit) in events.chunk_by(|a, b| a.xid == b.xid).scan(0, |end, c| {
            *end += c.len();
            Some((*end, c))
        }) {
            trace_published(commit[0].seq, commit[commit.len() - 1].seq);
            // Whole transactions, merged up to MESSAGE_EVENTS: each message
            // wakes every stream, and a replica reads many small commits
            // at once.
            if to - from >= MESSAGE_EVENTS || to == events.len() {
                if listened {
                    let _ = self.tx.send(Arc::new(Published::new(&events[from..to])));
                }
                from = to;
            }
        }
    }

    /// Subscribes, with the position published up to at that instant
    /// (atomically: nothing is published in between), so a live stream
    /// skips exactly what it will not receive.
    pub fn subscribe_at(&self) -> (broadcast::Receiver<Arc<Published>>, Position) {
        let at = self.journal.lock_position();
        (self.tx.subscribe(), *at)
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Published>> {
        self.tx.subscribe()
    }

    /// Ends every open stream (pamd is shutting down).
    pub fn shut_down(&self) {
        let _ = self.shutdown.send(true);
    }

    /// Resolves once [`EventBus::shut_down`] was called.
    pub fn on_shutdown(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.subscribe();
        async move {
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }
}

/// The publish instant, for measuring fan-out latency from outside
/// (bench-sse reads it from the log; across replicas, from the one that
/// committed, which may have no stream). Fields are only evaluated when
/// this target is enabled at trace level.
fn trace_published(first_seq: i64, last_seq: i64) {
    tracing::trace!(
        first_seq,
        last_seq,
        unix_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64),
        "published"
    );
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new(4096)
    }
}
