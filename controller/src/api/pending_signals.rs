//! Operator signals (`pamctl signal RUN --signal INT`) waiting for the
//! worker of the run's host to pick them up with its desired set. In
//! memory: a signal is a one-off nudge to a live process, journaled as
//! `run.signal_received` when accepted; one lost in a pamd crash is
//! re-sent by the operator.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use uuid::Uuid;

/// Signals per run, each with the attempt it was sent to.
type Queue = HashMap<Uuid, Vec<(i32, String)>>;

#[derive(Clone, Default)]
pub struct PendingSignals(Arc<Mutex<Queue>>);

impl PendingSignals {
    pub fn push(&self, run: Uuid, attempt: i32, signal: String) {
        self.0
            .lock()
            .unwrap()
            .entry(run)
            .or_default()
            .push((attempt, signal));
    }

    /// Takes the signals queued for this attempt of the run (older
    /// attempts' are dropped).
    pub fn take(&self, run: Uuid, attempt: i32) -> Vec<String> {
        let mut m = self.0.lock().unwrap();
        m.remove(&run)
            .unwrap_or_default()
            .into_iter()
            .filter(|(a, _)| *a == attempt)
            .map(|(_, s)| s)
            .collect()
    }
}
