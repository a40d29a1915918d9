//! Events: the journal (the `events` table, written inside the transaction
//! that makes the change) and the in-process broadcast that subscribers
//! (SSE, long-polls) listen on. Events are published only after their
//! transaction committed (pam-data-model.txt, processed_signals: no phantom
//! events), by handing [`pam_store::Tx::commit`]'s result to
//! [`EventBus::publish`].

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{broadcast, watch, Mutex};

use pam_store::{Event, Journaled};

pub mod filter;
pub mod follow;
pub mod message;
pub mod payload;
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
    pub seq: i64,
    pub topic: String,
    /// The payload's `project` (a name), for `?project=`.
    pub project: Option<String>,
    /// The payload's `project_id` (a uid), for `?project=`.
    pub project_id: Option<String>,
    /// Where its frame lies in [`Published::frames`].
    pub frame: std::ops::Range<usize>,
}

impl Published {
    /// `events`: one commit's, in seq order.
    pub fn new(events: &[Event]) -> Published {
        let mut frames = Vec::new();
        let events = events
            .iter()
            .map(|e| {
                let field = |k: &str| {
                    e.payload
                        .get(k)
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_string)
                };
                let start = frames.len();
                render::write_frame(&mut frames, e);
                PublishedEvent {
                    seq: e.seq,
                    topic: e.topic.clone(),
                    project: field("project"),
                    project_id: field("project_id"),
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

/// Fan-out of committed events, plus what the stream handler shares:
/// the publish-order lock, the shutdown signal, counters.
#[derive(Clone)]
pub struct EventBus {
    tx: broadcast::Sender<Arc<Published>>,
    /// Held from commit to publish by every journaling commit (see
    /// [`crate::ctx::Ctx::commit`]): the journal's advisory lock
    /// makes seqs commit in order, this makes them *publish* in order, so
    /// a live subscriber that skips `seq <= last sent` never skips an
    /// event that committed late.
    order: Arc<Mutex<()>>,
    /// The highest seq published (by this process's commits or read from
    /// the journal after another replica's, [`follow`]): nothing at or
    /// below it is published again.
    upto: Arc<AtomicI64>,
    /// Whether other processes' events are followed ([`follow`]): then a
    /// local commit first publishes what others committed before it.
    following: Arc<std::sync::atomic::AtomicBool>,
    /// See [`EventBus::on_read`].
    #[allow(clippy::type_complexity)]
    on_read: Arc<std::sync::Mutex<Option<Arc<dyn Fn(&[Event]) + Send + Sync>>>>,
    shutdown: watch::Sender<bool>,
    /// How often idle streams get a `: keep-alive` comment.
    pub keep_alive: Duration,
    /// Events published (journaled and committed) by this process.
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
            order: Arc::new(Mutex::new(())),
            upto: Arc::new(AtomicI64::new(0)),
            following: Arc::new(std::sync::atomic::AtomicBool::new(false)),
            on_read: Default::default(),
            shutdown,
            keep_alive: Duration::from_secs(15),
            journaled: Counter::default(),
            subscribers: Gauge::default(),
            lagged: Counter::default(),
        }
    }

    /// Publishes one commit's events (in seq order) as one broadcast
    /// message. Having no subscriber is fine.
    pub fn publish(&self, events: Journaled) {
        self.journaled.inc_by(events.len() as u64);
        // No stream listens: nothing to decode or frame (a big apply's
        // payloads stay text, issue 30). A stream subscribing after this
        // check finds these (committed) events in the journal, which it
        // reads after subscribing.
        if self.tx.receiver_count() == 0 {
            let upto = self.upto.load(Ordering::SeqCst);
            if let Some(last) = events.last_seq().filter(|&s| s > upto) {
                self.upto.store(last, Ordering::SeqCst);
                let first = events.seqs().find(|&s| s > upto);
                trace_published(first.unwrap_or(last), last);
            }
            return;
        }
        self.broadcast(events.to_vec());
    }

    /// What to do with events other replicas committed, when they are
    /// read (wake claims, record operator signals): set once, by whoever
    /// runs the follower.
    pub fn on_read(&self, f: impl Fn(&[Event]) + Send + Sync + 'static) {
        *self.on_read.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(f));
    }

    /// Publishes nothing at or below `seq` from now on (a follower
    /// starting: what committed before is the journal's).
    pub fn skip_to(&self, seq: i64) {
        self.upto.fetch_max(seq, Ordering::SeqCst);
    }

    /// Whether other processes' events are followed.
    pub fn is_following(&self) -> bool {
        self.following.load(Ordering::SeqCst)
    }

    /// The highest seq published.
    pub fn published_upto(&self) -> i64 {
        self.upto.load(Ordering::SeqCst)
    }

    /// Publishes events read from the journal (another replica's, in seq
    /// order), skipping what was published already; the caller holds
    /// [`EventBus::order_lock`].
    pub fn publish_read(&self, mut events: Vec<Event>) {
        let upto = self.upto.load(Ordering::SeqCst);
        events.retain(|e| e.seq > upto);
        if events.is_empty() {
            return;
        }
        let hook = self
            .on_read
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(f) = hook {
            f(&events);
        }
        self.broadcast(events);
    }

    /// Publishes events above the highest seq published, in seq order.
    fn broadcast(&self, mut events: Vec<Event>) {
        let upto = self.upto.load(Ordering::SeqCst);
        events.retain(|e| e.seq > upto);
        let Some(last) = events.last() else {
            return;
        };
        self.upto.store(last.seq, Ordering::SeqCst);
        // No stream listens: no frames to build. A stream subscribing
        // after this check finds these (committed) events in the journal,
        // which it reads after subscribing.
        if self.tx.receiver_count() == 0 {
            trace_published(events[0].seq, last.seq);
            return;
        }
        let (first, last) = (events[0].seq, last.seq);
        let published = Arc::new(Published::new(&events));
        trace_published(first, last);
        let _ = self.tx.send(published);
    }

    /// The lock a journaling commit holds until it published.
    pub async fn order_lock(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.order.lock().await
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
