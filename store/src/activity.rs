//! What each attempt's agent did lately (`run_activity`): the newest
//! [`ACTIVITY_KEPT`] activity items per run and attempt, as progress
//! signals reported them. Small structured metadata only: the whole
//! transcript stays on the worker's disk (pam-data-model.txt, "Data
//! Retention").

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::protocol::{Entry, ACTIVITY_KEPT};
use uuid::Uuid;

use crate::StoreResult;

/// Items to add to one attempt's activity, oldest first, each with its
/// time (`at`) set.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityAppend {
    pub run_id: Uuid,
    pub attempt: i32,
    pub items: Vec<Entry>,
}

/// The newest [`ACTIVITY_KEPT`] of `old` then `new`, oldest first: the
/// one rule both stores keep (PostgreSQL's statement mirrors it).
pub fn keep_newest(mut old: Vec<Entry>, new: &[Entry]) -> Vec<Entry> {
    old.extend_from_slice(new);
    let drop = old.len().saturating_sub(ACTIVITY_KEPT);
    old.drain(..drop);
    old
}

/// Run activity. Part of every [`crate::Tx`].
#[async_trait]
pub trait RunActivityTx: Send {
    /// Adds each append's items to its attempt's activity, keeping the
    /// newest [`ACTIVITY_KEPT`]; one statement for them all. A missing run
    /// is NotFound.
    async fn append_run_activity(
        &mut self,
        appends: &[ActivityAppend],
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// One attempt's activity, oldest first (empty when none).
    async fn run_activity(&mut self, run_id: Uuid, attempt: i32) -> StoreResult<Vec<Entry>>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use pam_manifests::protocol::EntryKind;

    #[test]
    fn the_newest_are_kept_in_order() {
        let item = |n: usize| {
            let mut e = Entry::new(EntryKind::Message);
            e.text = Some(n.to_string());
            e
        };
        let old: Vec<Entry> = (0..15).map(item).collect();
        let new: Vec<Entry> = (15..30).map(item).collect();
        let kept = keep_newest(old, &new);
        assert_eq!(kept.len(), ACTIVITY_KEPT);
        assert_eq!(kept[0].text.as_deref(), Some("10"));
        assert_eq!(kept.last().unwrap().text.as_deref(), Some("29"));
    }
}
