//! Output snapshots: the pane of every live session of this worker's
//! (`tmux capture-pane`) with the log's line and byte counts, to
//! `/api/v1/workers/snapshots`, at most once per `snapshot_interval_ms` per
//! run and only when it changed; and when a session ends, one last snapshot
//! from the tail of its log.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use pam_manifests::protocol::OutputSnapshot;
use uuid::Uuid;

use super::client::Api;
use super::State;

/// Pane lines per snapshot.
const SNAPSHOT_LINES: usize = 200;

pub(super) async fn snapshot_loop(st: Arc<State>) {
    let api = Api::new(&st.opts, Duration::from_secs(30)).expect("http client");
    let every = Duration::from_millis(st.opts.config.snapshot_interval_ms);
    let mut last: BTreeMap<(Uuid, i32), (u64, String)> = BTreeMap::new();
    loop {
        tokio::time::sleep(every).await;
        let running = st.running.lock().unwrap().clone();
        let mut seen = HashSet::new();
        for r in running {
            let (Some(run_id), Some(attempt)) = (r.run_id, r.attempt) else {
                continue;
            };
            seen.insert((run_id, attempt));
            let mut snap = match crate::snapshot::read(&st.opts.data_dir, run_id, attempt, 0) {
                Ok(s) => s,
                Err(_) => OutputSnapshot {
                    run_id,
                    attempt,
                    text: String::new(),
                    lines: 0,
                    bytes: 0,
                },
            };
            snap.text = match st.tmux.capture_pane(&r.session_name, SNAPSHOT_LINES).await {
                Ok(t) => t,
                Err(_) => {
                    match crate::snapshot::read(&st.opts.data_dir, run_id, attempt, SNAPSHOT_LINES)
                    {
                        Ok(s) => s.text,
                        Err(_) => continue,
                    }
                }
            };
            let key = (run_id, attempt);
            if last
                .get(&key)
                .is_some_and(|(b, t)| *b == snap.bytes && *t == snap.text)
            {
                continue;
            }
            match api
                .post::<_, serde_json::Value>("/api/v1/workers/snapshots", &snap)
                .await
            {
                Ok(_) => {
                    last.insert(key, (snap.bytes, snap.text));
                }
                Err(e) => tracing::debug!(error = %format!("{e:#}"), "snapshot upload failed"),
            }
        }
        last.retain(|k, _| seen.contains(k));
        // One last snapshot of each ended session, from its log: the pane is
        // gone, and `pamctl logs` of a finished run shows how it ended.
        let ended = std::mem::take(&mut *st.ended.lock().unwrap());
        for (run_id, attempt) in ended {
            if let Ok(snap) =
                crate::snapshot::read(&st.opts.data_dir, run_id, attempt, SNAPSHOT_LINES)
            {
                if snap.bytes > 0 {
                    if let Err(e) = api
                        .post::<_, serde_json::Value>("/api/v1/workers/snapshots", &snap)
                        .await
                    {
                        tracing::debug!(error = %format!("{e:#}"), "final snapshot upload failed");
                    }
                }
            }
        }
    }
}
