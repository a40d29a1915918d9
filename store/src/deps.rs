//! Task dependencies: `work_item_deps (task_id, depends_on_id,
//! project_id)` and the dispatch gate they drive.
//!
//! A task is *blocked* while any task it depends on is not `done`. A pending
//! run of a blocked task has `dispatchable_since = NULL`; the claim skips it
//! (partial index `runs_dispatchable`) and the dispatch timeout (OQ-15) does
//! not count for it. Stores compute "blocked" in one place each (a SQL
//! predicate, a function over the memory state), used by
//! [`crate::RunTx::insert_run`], [`crate::RunTx::requeue_run`],
//! [`crate::RunTx::claim_runs`] and [`DependencyTx::refresh_dispatchable`].

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{Run, StoreResult, WorkItem};

/// One end of a dependency link: `task_id` and the task at the other end
/// (the task it depends on, or the task that depends on it).
#[derive(Debug, Clone, PartialEq)]
pub struct DependencyLink {
    pub task_id: Uuid,
    pub other: WorkItem,
}

/// What one gating pass changed ([`DependencyTx::refresh_dispatchable`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gated {
    /// Pending runs whose last dependency is done: `dispatchable_since`
    /// was NULL and is now `now`.
    pub unblocked: Vec<Run>,
    /// Pending runs that had become dispatchable and are blocked again (a
    /// dependency was reopened, or a link added): `dispatchable_since` is
    /// NULL again.
    pub blocked: Vec<Run>,
}

/// Task dependencies. Part of every [`crate::Tx`].
#[async_trait]
pub trait DependencyTx: Send {
    /// Replaces what `task_id` depends on with `on` (in that order; each
    /// once). Each must be another task of the same project: a missing one
    /// is NotFound, another project's or the task itself is Invalid.
    /// Cycles are validation's to refuse (the whole batch is known there).
    async fn set_dependencies(&mut self, task_id: Uuid, on: &[Uuid]) -> StoreResult<()>;
    /// The tasks these tasks depend on, ordered by task_id, then the other
    /// task's name.
    async fn dependencies_of(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>>;
    /// The tasks that depend on these tasks, same order.
    async fn dependents_of(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>>;
    /// Every link reachable from these tasks by following "depends on"
    /// (theirs included), each once, ordered like
    /// [`DependencyTx::dependencies_of`]: apply's cycle check reads the
    /// stored links its batch can reach, not the whole project.
    async fn dependency_closure(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>>;
    /// The gating pass, set-based: pending runs with `dispatchable_since`
    /// NULL and no dependency that is not done get `dispatchable_since =
    /// now`; pending runs with it set and a dependency not done get NULL.
    /// Both bump resource_version and updated_at. Returns the changed runs
    /// (each list ordered by id).
    async fn refresh_dispatchable(&mut self, now: DateTime<Utc>) -> StoreResult<Gated>;
    /// Pending runs that wait for a `cancelled` task, each once with the
    /// cancelled task of the smallest name; ordered by run id; at most
    /// `limit`.
    async fn runs_waiting_on_cancelled(&mut self, limit: i64) -> StoreResult<Vec<(Run, WorkItem)>>;
}
