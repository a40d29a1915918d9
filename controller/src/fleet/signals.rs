//! Operator signals (`pamctl signal RUN --signal INT`) of live runs.
//!
//! A signal is journaled as `run.signal_received` when pamd accepts it; the
//! event's seq is its id. Every desired set lists all signals of a live
//! run's current attempt (not "handed out once": a desired set lost on the
//! way, or a pamd restart, must not lose one); the worker delivers each id
//! once and keeps the ids it delivered with the session's mapping, so a
//! repeat or a worker restart does not deliver it twice. The list lives in
//! memory and is rebuilt from the journal when pamd starts ([`load`]), so
//! an accepted signal survives a pamd crash.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use pam_manifests::protocol::OperatorSignal;
use uuid::Uuid;

use pam_store::prelude::*;
use pam_store::StoreResult;

use crate::events::topic;

struct Sent {
    host: Option<Uuid>,
    attempt: i32,
    signal: OperatorSignal,
}

#[derive(Clone, Default)]
pub struct PendingSignals(Arc<Mutex<HashMap<Uuid, Vec<Sent>>>>);

impl PendingSignals {
    /// Records a signal journaled with seq `id` for this attempt of the
    /// run, which runs on `host`.
    pub fn push(&self, run: Uuid, host: Option<Uuid>, attempt: i32, id: i64, signal: String) {
        let mut m = self.0.lock().unwrap();
        let sent = m.entry(run).or_default();
        if !sent.iter().any(|s| s.signal.id == id) {
            sent.push(Sent {
                host,
                attempt,
                signal: OperatorSignal { id, signal },
            });
        }
    }

    /// Records the signal of a `run.signal_received` event (journaled by
    /// this replica or read from the journal after another's);
    /// false when the event is not one.
    pub fn push_event(&self, e: &pam_store::Event) -> bool {
        if e.topic != topic::RUN_SIGNAL_RECEIVED {
            return false;
        }
        let p = &e.payload;
        let id = |k: &str| p[k].as_str().and_then(|s| s.parse::<Uuid>().ok());
        let attempt = p["attempt"].as_i64().and_then(|a| i32::try_from(a).ok());
        match (id("run_id"), attempt, p["signal"].as_str()) {
            (Some(run), Some(attempt), Some(signal)) => {
                self.push(run, id("host_id"), attempt, e.seq, signal.to_string());
                true
            }
            _ => false,
        }
    }

    /// The signals sent to this attempt of the run, in order (older
    /// attempts' are forgotten).
    pub fn for_run(&self, run: Uuid, attempt: i32) -> Vec<OperatorSignal> {
        let mut m = self.0.lock().unwrap();
        let Some(sent) = m.get_mut(&run) else {
            return Vec::new();
        };
        sent.retain(|s| s.attempt >= attempt);
        sent.iter()
            .filter(|s| s.attempt == attempt)
            .map(|s| s.signal.clone())
            .collect()
    }

    /// Forgets the signals of `host`'s runs that are no longer live there
    /// (called with the host's desired set).
    pub fn forget_ended(&self, host: Uuid, live: &HashSet<Uuid>) {
        self.0
            .lock()
            .unwrap()
            .retain(|run, sent| live.contains(run) || !sent.iter().any(|s| s.host == Some(host)));
    }

    /// Rebuilds the list from the journal: the `run.signal_received` events
    /// of every live run's current attempt.
    pub async fn load(&self, store: &dyn Store) -> StoreResult<usize> {
        let mut tx = store.begin().await?;
        let live = crate::rules::runs::live(tx.as_mut(), None).await?;
        let ids: Vec<Uuid> = live.iter().map(|r| r.id).collect();
        let events = tx
            .run_events_of_topic(topic::RUN_SIGNAL_RECEIVED, &ids)
            .await?;
        let runs: HashMap<Uuid, _> = live.iter().map(|r| (r.id, r)).collect();
        let mut n = 0;
        for e in events {
            let current = e.payload["run_id"]
                .as_str()
                .and_then(|s| s.parse::<Uuid>().ok())
                .and_then(|id| runs.get(&id))
                .is_some_and(|r| e.payload["attempt"].as_i64() == Some(i64::from(r.attempt)));
            if current && self.push_event(&e) {
                n += 1;
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_signal_of_the_attempt_until_the_run_ends() {
        let p = PendingSignals::default();
        let (run, other, host) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
        p.push(run, Some(host), 1, 10, "INT".into());
        p.push(run, Some(host), 1, 10, "INT".into()); // the same id again
        p.push(run, Some(host), 1, 12, "TERM".into());
        p.push(other, Some(Uuid::new_v4()), 1, 11, "HUP".into());
        let ids = |v: Vec<OperatorSignal>| v.iter().map(|s| s.id).collect::<Vec<_>>();
        // Not handed out once: every read lists them.
        assert_eq!(ids(p.for_run(run, 1)), [10, 12]);
        assert_eq!(ids(p.for_run(run, 1)), [10, 12]);
        // A new attempt forgets the old one's.
        p.push(run, Some(host), 2, 13, "INT".into());
        assert_eq!(ids(p.for_run(run, 2)), [13]);
        assert_eq!(ids(p.for_run(run, 1)), Vec::<i64>::new());
        // The run is no longer live on its host: forgotten; another host's
        // run is untouched.
        p.forget_ended(host, &HashSet::new());
        assert!(p.for_run(run, 2).is_empty());
        assert_eq!(ids(p.for_run(other, 1)), [11]);
    }
}
