//! The event journal: [`Event`] rows and the [`EventTx`] calls.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::StoreResult;

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub topic: String,
    pub payload: Value,
    pub created_at: DateTime<Utc>,
}

/// The journal (`events`). Part of every [`crate::Tx`].
#[async_trait]
pub trait EventTx: Send {
    /// Appends to the journal (seq assigned in commit order, see module doc).
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
    /// Events with seq > `after`, ascending, at most `limit`.
    async fn events_after(&mut self, after: i64, limit: i64) -> StoreResult<Vec<Event>>;
    /// The events other transactions committed with seq > `after` and
    /// below this transaction's first appended event, ascending; empty
    /// when it appended none. A transaction that appended holds the
    /// event-order lock, so every one of them is committed and visible:
    /// pamd publishes them before its own, in seq order, without a second
    /// connection (issue 15's replicas; a read on another connection while
    /// others waited for the lock starved the pool, issue 20).
    async fn events_before_own(&mut self, after: i64) -> StoreResult<Vec<Event>>;
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
    /// back, purged or not. Takes the journal's order lock first (held
    /// until this transaction ends), so no append is in flight: every seq
    /// up to it is committed, rolled back or purged, and any later event
    /// gets a higher seq.
    async fn event_high_water(&mut self) -> StoreResult<i64>;
}
