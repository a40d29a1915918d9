//! The central output-snapshot cache: the latest pane text of each run, in
//! memory only (pam-data-model.txt, "Data Retention": pane text is never in
//! PostgreSQL). Lost on restart by design; workers keep the full log.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use pam_manifests::protocol::OutputSnapshot;
use uuid::Uuid;

#[derive(Debug, Clone)]
pub struct Snapshot {
    pub snapshot: OutputSnapshot,
    pub received_at: DateTime<Utc>,
}

#[derive(Clone, Default)]
pub struct SnapshotCache(Arc<Mutex<HashMap<Uuid, Snapshot>>>);

impl SnapshotCache {
    /// Keeps the newest snapshot per run (a newer attempt replaces older).
    pub fn put(&self, snapshot: OutputSnapshot, at: DateTime<Utc>) {
        let mut m = self.0.lock().unwrap();
        let keep_old = m
            .get(&snapshot.run_id)
            .is_some_and(|old| old.snapshot.attempt > snapshot.attempt);
        if !keep_old {
            m.insert(
                snapshot.run_id,
                Snapshot {
                    snapshot,
                    received_at: at,
                },
            );
        }
    }

    pub fn get(&self, run: Uuid) -> Option<Snapshot> {
        self.0.lock().unwrap().get(&run).cloned()
    }
}
