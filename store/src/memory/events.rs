use super::*;
use crate::Position;

#[async_trait]
impl EventTx for MemTx {
    async fn append_event(
        &mut self,
        topic: &str,
        payload: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<Event> {
        let payload = crate::events::with_actor(payload);
        // Drawn from the shared state at once, like PostgreSQL's identity:
        // a rolled-back transaction leaves a gap, a seq is never reused.
        self.guard.last_seq += 1;
        let s = &mut self.work;
        let ev = Event {
            // One order: transactions hold the whole state, so seqs are
            // drawn in commit order and xid adds nothing.
            xid: 0,
            seq: self.guard.last_seq,
            topic: topic.to_string(),
            payload,
            created_at: now,
        };
        s.events.insert(ev.seq, ev.clone());
        self.events.push(&ev);
        Ok(ev)
    }

    async fn events_after(&mut self, after: i64, limit: i64) -> StoreResult<Vec<Event>> {
        Ok(self
            .work
            .events
            .range(after.saturating_add(1)..)
            .take(take(limit))
            .map(|(_, e)| e.clone())
            .collect())
    }

    async fn journal_after(&mut self, after: Position, limit: i64) -> StoreResult<Vec<Event>> {
        // Like PostgreSQL's horizon, this transaction's own events are not
        // journal yet (they are the highest seqs: nothing else runs).
        let own = self.events.first_seq().unwrap_or(i64::MAX);
        Ok(self
            .work
            .events
            .values()
            .filter(|e| e.position() > after && e.seq < own)
            .take(take(limit))
            .cloned()
            .collect())
    }

    async fn journal_held(&mut self) -> StoreResult<bool> {
        // Nothing else is in flight.
        Ok(false)
    }

    async fn journal_end(&mut self) -> StoreResult<Position> {
        let own = self.events.first_seq().unwrap_or(i64::MAX);
        Ok(self
            .work
            .events
            .range(..own)
            .next_back()
            .map_or(Position::START, |(_, e)| e.position()))
    }

    async fn journal_position(&mut self, seq: i64) -> StoreResult<Position> {
        Ok(self
            .work
            .events
            .range(..=seq)
            .next_back()
            .map_or(Position::START, |(_, e)| e.position()))
    }

    async fn run_events_of_topic(&mut self, topic: &str, runs: &[Uuid]) -> StoreResult<Vec<Event>> {
        let ids: Vec<Value> = runs
            .iter()
            .map(|r| serde_json::json!(r.to_string()))
            .collect();
        Ok(self
            .work
            .events
            .values()
            .filter(|e| e.topic == topic && ids.contains(&e.payload["run_id"]))
            .cloned()
            .collect())
    }

    async fn sessions_journaled(
        &mut self,
        topic: &str,
        host: Uuid,
        sessions: &[String],
    ) -> StoreResult<Vec<String>> {
        let host = serde_json::json!(host.to_string());
        let mut found: Vec<String> = self
            .work
            .events
            .values()
            .filter(|e| e.topic == topic && e.payload["host_id"] == host)
            .filter_map(|e| e.payload["session_name"].as_str())
            .filter(|s| sessions.iter().any(|x| x == s))
            .map(str::to_string)
            .collect();
        found.sort();
        found.dedup();
        Ok(found)
    }

    async fn run_events(&mut self, run: Uuid, after: i64, limit: i64) -> StoreResult<Vec<Event>> {
        let id = serde_json::json!(run.to_string());
        Ok(self
            .work
            .events
            .range(after.saturating_add(1)..)
            .map(|(_, e)| e)
            .filter(|e| e.payload["run_id"] == id)
            .take(take(limit))
            .cloned()
            .collect())
    }

    async fn purge_events_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let before = self.work.events.len();
        self.work.events.retain(|_, e| e.created_at >= cutoff);
        Ok((before - self.work.events.len()) as u64)
    }

    async fn event_bounds(&mut self) -> StoreResult<Option<(i64, i64)>> {
        let ev = &self.work.events;
        Ok(ev
            .first_key_value()
            .zip(ev.last_key_value())
            .map(|((lo, _), (hi, _))| (*lo, *hi)))
    }

    async fn event_high_water(&mut self) -> StoreResult<i64> {
        // A transaction holds the whole state: nothing else is in flight.
        Ok(self.guard.last_seq)
    }
}
