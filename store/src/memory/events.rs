use super::*;

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

    async fn events_before_own(&mut self, after: i64) -> StoreResult<Vec<Event>> {
        let Some(first) = self.events.first_seq() else {
            return Ok(Vec::new());
        };
        Ok(self
            .work
            .events
            .range(after.saturating_add(1)..first.max(after.saturating_add(1)))
            .map(|(_, e)| e.clone())
            .collect())
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
