//! The source aggregate (GitOps): [`Source`] rows — where desired state
//! lives and how its last sync went — and their inventory
//! ([`SourceObject`]: the objects a Source owns, with the fields its
//! manifests declare), and the [`SourceTx`] calls.
//!
//! # Guarantees
//! - An object has at most one owning Source (`PRIMARY KEY (kind,
//!   object_id)`); [`SourceTx::put_source_objects`] never takes an object
//!   from another Source.
//! - Deleting a Source deletes its inventory rows, never the objects.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::{Meta, StoreResult};
pub use pam_manifests::kinds::{HealthState, SyncState};

/// A Source: its desired state (`meta.spec`: path or git, projects, prune,
/// selfHeal, suspend, interval) and what its sync loop observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub id: Uuid,
    /// Operator name, unique.
    pub name: String,
    pub meta: Meta,
    pub status: SourceStatus,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What the sync loop observed of a Source; written only by the loop
/// ([`SourceTx::write_source_status`]), except the sync request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SourceStatus {
    /// The last revision applied in full (the last good one).
    pub revision: Option<String>,
    /// The last revision a sync tried, good or bad.
    pub attempted_revision: Option<String>,
    /// When a sync last applied a revision or confirmed nothing changed.
    pub last_synced_at: Option<DateTime<Utc>>,
    /// When a sync was last tried.
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub sync: SyncState,
    pub sync_message: String,
    pub health: HealthState,
    pub health_message: String,
    /// The last failed sync's problems (`[{file, document, line, column,
    /// path, message}]`); empty after a good one.
    pub errors: Value,
    /// Owned objects whose owned fields differ from the Source's
    /// (`[{kind, project, name, fields}]`).
    pub drift: Value,
    /// The objects that left the tree at the last sync that
    /// wrote (`[{kind, project, name, sync, health, message}]`, sync
    /// `Pruned` or `Held`); replaced by the next write.
    pub departed: Value,
    /// `pamctl sync NAME`: a sync is due now (cleared by the loop's next
    /// status write).
    pub sync_requested_at: Option<DateTime<Utc>>,
}

/// One object a Source owns.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceObject {
    pub source_id: Uuid,
    /// `Project`, `Task` or `Run`.
    pub kind: String,
    pub object_id: Uuid,
    /// The project's name for tasks and runs.
    pub project: Option<String>,
    pub name: String,
    /// What the Source's manifest declares of the object, as written
    /// (`{"spec": {…}, "labels": {…}, "annotations": {…}}`): its keys are
    /// the fields the Source owns.
    pub declared: Value,
    /// The file the object was declared in (for messages).
    pub file: String,
}

/// An owned object as it is stored now.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedObject {
    pub owner: SourceObject,
    /// `None`: the object no longer exists (deleted behind the Source's
    /// back).
    pub meta: Option<Meta>,
    /// Runs only: the run's status (for health).
    pub run_status: Option<pam_manifests::state::RunStatus>,
    /// Tasks only: the task's status (its own health).
    pub task_status: Option<pam_manifests::state::WorkItemStatus>,
}

/// Sources (`sources`, `source_objects`). Part of every [`crate::Tx`].
#[async_trait]
pub trait SourceTx: Send {
    /// Writes the status columns (not the sync request, unless
    /// `clear_request`, which clears a request made at or before
    /// `s.status.sync_requested_at`), bumping resource_version. The sync
    /// loop is the only writer of status.
    async fn write_source_status(&mut self, s: &Source, clear_request: bool)
        -> StoreResult<Source>;
    /// Records a request to sync now; returns the Source.
    async fn request_source_sync(&mut self, id: Uuid, at: DateTime<Utc>) -> StoreResult<Source>;

    /// A Source's inventory, ordered by kind, project, name.
    async fn list_source_objects(&mut self, source_id: Uuid) -> StoreResult<Vec<SourceObject>>;
    /// How many objects each of these Sources owns, in one read (Sources
    /// owning nothing are absent), for listings.
    async fn count_source_objects(
        &mut self,
        source_ids: &[Uuid],
    ) -> StoreResult<std::collections::HashMap<Uuid, u64>>;
    /// The owners of these objects (`(kind, object_id)`), any Source.
    async fn owners_of(&mut self, objects: &[(String, Uuid)]) -> StoreResult<Vec<SourceObject>>;
    /// Inserts or updates inventory rows of one Source. A row whose object
    /// another Source owns is not written; returns how many were written
    /// (the caller compares with how many it gave).
    async fn put_source_objects(&mut self, rows: &[SourceObject]) -> StoreResult<u64>;
    /// Removes these objects from a Source's inventory.
    async fn delete_source_objects(
        &mut self,
        source_id: Uuid,
        objects: &[(String, Uuid)],
    ) -> StoreResult<()>;
    /// A Source's inventory with each object's stored meta (None when it is
    /// gone), and each run's status.
    async fn owned_objects(&mut self, source_id: Uuid) -> StoreResult<Vec<OwnedObject>>;
    /// The runs a Source owns that exist, by name with their status (its
    /// health, without reading the whole inventory).
    async fn owned_runs(
        &mut self,
        source_id: Uuid,
    ) -> StoreResult<Vec<(String, pam_manifests::state::RunStatus)>>;
}

crate::named::row!(Source);

impl crate::NamedKind for Source {
    type Scope = ();
    const NOUN: &'static str = "source";
    fn scope(&self) {}
    /// Named by its name, as its operator knows it.
    fn what(&self) -> String {
        format!("{} {}", Self::NOUN, self.name)
    }
}
