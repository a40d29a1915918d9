//! The event journal: [`Event`] rows and the [`EventTx`] calls.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::StoreResult;

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The journaling transaction's id (PostgreSQL's 64-bit
    /// `pg_current_xact_id()`; 0 in memory). The journal's order is
    /// (xid, seq), see [`Position`].
    pub xid: i64,
    pub seq: i64,
    pub topic: String,
    pub payload: Value,
    pub created_at: DateTime<Utc>,
}

impl Event {
    /// Where the event lies in the journal's order.
    pub fn position(&self) -> Position {
        Position {
            xid: self.xid,
            seq: self.seq,
        }
    }
}

/// A place in the journal's one total order: by the appending
/// transaction's id, then by seq. Seqs are drawn when an event is
/// appended, not when its transaction commits, and no lock orders the
/// commits, so seq order is not an order readers can follow: a reader
/// that passed seq 7 could still see seq 5 commit. Readers instead read
/// only the events of finished transactions — every transaction id below
/// the oldest one still in flight (PostgreSQL's snapshot `xmin`) — in
/// (xid, seq) order; no event can ever appear below a position a reader
/// reached, so every reader (every replica, every resume) sees the same
/// sequence, once. A client names a position by the seq of the event at
/// it (`Last-Event-ID`), looked up with [`EventTx::journal_position`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    pub xid: i64,
    pub seq: i64,
}

impl Position {
    /// Before every event.
    pub const START: Position = Position { xid: 0, seq: 0 };
}

/// One read of the journal by a follower ([`crate::Store::read_journal`]).
#[derive(Debug, Clone, Default)]
pub struct JournalPage {
    /// Events after the position asked, in journal order.
    pub events: Vec<Event>,
    /// Committed events wait behind a transaction still in flight (they
    /// are not in `events` yet): read again soon, a commit may not notify.
    pub held: bool,
}

/// The events one transaction appended, in seq order, as the journal
/// holds them until commit and publish: each payload kept as its JSON
/// text, not as a tree. A big apply journals an event per object and
/// holds them all until it commits; a payload of eight fields is ~1 KB as
/// a `Value` map and ~300 bytes as text. [`Journaled::iter`]
/// decodes one event at a time, for whoever needs them (a stream's
/// frames, the webhook fan-out).
#[derive(Debug, Clone, Default)]
pub struct Journaled {
    /// The transaction's id (every event of a transaction has it).
    xid: i64,
    /// The distinct topics (a transaction journals a handful).
    topics: Vec<Box<str>>,
    entries: Vec<Journal>,
}

#[derive(Debug, Clone)]
struct Journal {
    seq: i64,
    created_at: DateTime<Utc>,
    /// Index into [`Journaled::topics`].
    topic: usize,
    payload: Box<str>,
}

impl Journaled {
    /// Appends an event (seqs ascending); `payload` is the JSON text of a
    /// value.
    pub fn push_text(
        &mut self,
        xid: i64,
        seq: i64,
        topic: &str,
        payload: String,
        created_at: DateTime<Utc>,
    ) {
        self.xid = xid;
        let topic = match self.topics.iter().position(|t| &**t == topic) {
            Some(i) => i,
            None => {
                self.topics.push(topic.into());
                self.topics.len() - 1
            }
        };
        self.entries.push(Journal {
            seq,
            created_at,
            topic,
            payload: payload.into_boxed_str(),
        });
    }

    /// Appends an event (seqs ascending).
    pub fn push(&mut self, e: &Event) {
        self.push_text(e.xid, e.seq, &e.topic, e.payload.to_string(), e.created_at);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn first_seq(&self) -> Option<i64> {
        self.entries.first().map(|e| e.seq)
    }

    pub fn last_seq(&self) -> Option<i64> {
        self.entries.last().map(|e| e.seq)
    }

    /// The seqs, ascending (nothing decoded).
    pub fn seqs(&self) -> impl Iterator<Item = i64> + '_ {
        self.entries.iter().map(|e| e.seq)
    }

    /// The events in seq order, each decoded when reached.
    pub fn iter(&self) -> impl Iterator<Item = Event> + '_ {
        self.entries.iter().map(|e| Event {
            xid: self.xid,
            seq: e.seq,
            topic: self.topics[e.topic].to_string(),
            // The text was written from a `Value`: it always parses.
            payload: serde_json::from_str(&e.payload).unwrap_or(Value::Null),
            created_at: e.created_at,
        })
    }

    /// Every event, decoded.
    pub fn to_vec(&self) -> Vec<Event> {
        self.iter().collect()
    }
}

impl PartialEq<Vec<Event>> for Journaled {
    fn eq(&self, other: &Vec<Event>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| &a == b)
    }
}

tokio::task_local! {
    /// Who the events journaled by this task are done for: set
    /// around one API request ([`as_actor`]); the loops run without one.
    static ACTOR: Value;
}

/// Runs `f` (one API request) with `actor` recorded in every event it
/// journals, through any store: one place, not each rule.
pub async fn as_actor<F: std::future::Future>(actor: Value, f: F) -> F::Output {
    ACTOR.scope(actor, f).await
}

/// The actor of the request this task serves, if any ([`as_actor`]).
pub fn current_actor() -> Option<Value> {
    ACTOR.try_with(Value::clone).ok()
}

/// `payload` with the task's actor as `actor`, if it has one (and the
/// payload none of its own). Both stores call it on every append.
pub fn with_actor(mut payload: Value) -> Value {
    if let Ok(actor) = ACTOR.try_with(Value::clone) {
        if let Some(o) = payload.as_object_mut() {
            o.entry("actor").or_insert(actor);
        }
    }
    payload
}

/// The journal (`events`). Part of every [`crate::Tx`].
#[async_trait]
pub trait EventTx: Send {
    /// Appends to the journal (the seq drawn now; its place in the
    /// journal's order is its [`Position`]).
    async fn append_event(
        &mut self,
        topic: &str,
        payload: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<Event>;
    /// Appends many events in order (apply's bulk path); like
    /// [`Tx::append_event`] for each.
    async fn append_events(
        &mut self,
        events: Vec<(&'static str, Value)>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Event>> {
        let mut out = Vec::with_capacity(events.len());
        for (topic, payload) in events {
            out.push(self.append_event(topic, payload, now).await?);
        }
        Ok(out)
    }
    /// Events with seq > `after`, ascending by seq, at most `limit`: every
    /// visible row, for inspection and tests. Not an order to follow (see
    /// [`Position`]); followers use [`EventTx::journal_after`].
    async fn events_after(&mut self, after: i64, limit: i64) -> StoreResult<Vec<Event>>;
    /// The events of finished transactions after `after`, in the
    /// journal's order ([`Position`]), at most `limit`: what a follower of
    /// the journal reads (streams, `GET /events`, the replicas' reader).
    /// This transaction's own events are not among them.
    async fn journal_after(&mut self, after: Position, limit: i64) -> StoreResult<Vec<Event>>;
    /// Whether committed events wait behind a transaction still in flight
    /// (a later [`EventTx::journal_after`] will return them).
    async fn journal_held(&mut self) -> StoreResult<bool>;
    /// The last position [`EventTx::journal_after`] can reach now
    /// ([`Position::START`] for none): where a follower that starts now
    /// begins.
    async fn journal_end(&mut self) -> StoreResult<Position>;
    /// The position of the event `seq` (a client's `Last-Event-ID`);
    /// one purged or never committed stands for the nearest event below
    /// it, [`Position::START`] below every event.
    async fn journal_position(&mut self, seq: i64) -> StoreResult<Position>;
    /// One run's timeline: the events whose payload names it
    /// (`payload.run_id`), every attempt, seq > `after`, ascending, at most
    /// `limit`.
    async fn run_events(&mut self, run: Uuid, after: i64, limit: i64) -> StoreResult<Vec<Event>>;
    /// The journaled events of `topic` whose payload names one of these
    /// runs (`payload.run_id`), ascending by seq. pamd reads the operator
    /// signals of live runs back with it when it starts.
    async fn run_events_of_topic(&mut self, topic: &str, runs: &[Uuid]) -> StoreResult<Vec<Event>>;
    /// Which of `sessions` an event of `topic` about this host already
    /// names (`payload.host_id` and `payload.session_name`): ingest
    /// journals an orphan session once, not once per report.
    async fn sessions_journaled(
        &mut self,
        topic: &str,
        host: Uuid,
        sessions: &[String],
    ) -> StoreResult<Vec<String>>;
    /// Deletes events created before `cutoff`; returns how many.
    async fn purge_events_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64>;
    /// (lowest, highest) seq still in the journal; None when empty.
    async fn event_bounds(&mut self) -> StoreResult<Option<(i64, i64)>>;
    /// The highest seq ever handed out (0 if none), committed or rolled
    /// back, purged or not. Takes the journal's append lock exclusively
    /// (held until this transaction ends; appends hold it shared, so they
    /// never wait for each other), so no append is in flight: every seq up
    /// to it is committed, rolled back or purged, and any later event gets
    /// a higher seq. Rare writes that must order against every append
    /// take it (a Webhook's change).
    async fn event_high_water(&mut self) -> StoreResult<i64>;
}
