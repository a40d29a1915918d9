//! Applysets' records (`applysets`): the kinds and projects an applyset
//! holds, as kubectl's ApplySet parent records the group-kinds it
//! contains, so a prune covers what left the input.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::StoreResult;

/// What one applyset holds.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ApplySetRecord {
    pub name: String,
    /// Kind names (`Secret`), sorted, each once.
    pub kinds: Vec<String>,
    /// Project slugs, sorted, each once.
    pub projects: Vec<String>,
}

/// Applysets. Part of every [`crate::Tx`].
#[async_trait]
pub trait ApplySetTx: Send {
    /// The record of applyset `name`, if one was written.
    async fn applyset(&mut self, name: &str) -> StoreResult<Option<ApplySetRecord>>;
    /// Writes (replaces) the record of `r.name`.
    async fn put_applyset(&mut self, r: &ApplySetRecord, now: DateTime<Utc>) -> StoreResult<()>;
}
