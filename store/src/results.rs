//! Workspace results (`run_results`): per run and attempt, what
//! the attempt's git worktree came to, with its patch.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::StoreResult;

/// One attempt's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunResultRow {
    pub run_id: Uuid,
    pub attempt: i32,
    pub branch: String,
    pub base_commit: String,
    pub head_commit: String,
    pub commits: i32,
    pub files_changed: i32,
    pub insertions: i64,
    pub deletions: i64,
    /// Empty from [`RunResultTx::latest_run_results`].
    pub patch: String,
    /// Bytes of the stored patch (computed: ignored on insert).
    pub patch_bytes: i64,
    pub patch_truncated: bool,
    /// With `push: true`: whether the push was taken, and git's words
    /// when not.
    pub pushed: Option<bool>,
    pub push_message: Option<String>,
    pub recorded_at: DateTime<Utc>,
}

/// Workspace results. Part of every [`crate::Tx`].
#[async_trait]
pub trait RunResultTx: Send {
    /// Inserts results; one already recorded for its (run, attempt) is
    /// kept (a result is reported once, with its `finished` signal). A
    /// missing run is NotFound.
    async fn insert_run_results(&mut self, rows: &[RunResultRow]) -> StoreResult<()>;
    /// A run's results, by attempt ascending; `attempt` names one.
    async fn run_results(
        &mut self,
        run_id: Uuid,
        attempt: Option<i32>,
    ) -> StoreResult<Vec<RunResultRow>>;
    /// Each run's latest attempt's result, patch left out (`patch_bytes`
    /// still set): what a run's status shows, one statement for a list.
    async fn latest_run_results(&mut self, run_ids: &[Uuid]) -> StoreResult<Vec<RunResultRow>>;
}
