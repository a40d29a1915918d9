//! Managed fields (`managed_fields`): per object, which field
//! paths each manager set, server-side-apply style. The merge itself is
//! the controller's (`apply/managed/mod.rs`); the store keeps the record.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::StoreResult;

/// One manager's part of an object: the field paths it set
/// (`spec.title`, `metadata.labels.tier`), how (`Apply` or `Update`) and
/// when it last changed them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedEntry {
    pub manager: String,
    pub operation: String,
    pub time: DateTime<Utc>,
    pub fields: Vec<String>,
}

/// An object's record: every manager that owns a field of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagedFields {
    /// The object's kind (`Task`, `Project`, …).
    pub kind: String,
    pub object_id: Uuid,
    pub entries: Vec<ManagedEntry>,
}

/// Managed fields. Part of every [`crate::Tx`].
#[async_trait]
pub trait ManagedFieldsTx: Send {
    /// The records of these objects (kind, id), one statement; an object
    /// with none is left out.
    async fn managed_fields_of(
        &mut self,
        objects: &[(String, Uuid)],
    ) -> StoreResult<Vec<ManagedFields>>;
    /// Writes records in one statement: each replaces its object's; one
    /// with no entries removes it.
    async fn put_managed_fields(&mut self, rows: &[ManagedFields]) -> StoreResult<()>;
    /// Writes the first records of objects that have none (objects this
    /// transaction created), in one statement — PostgreSQL's `COPY`, the
    /// cheapest bulk write: a big apply creates thousands. A record that
    /// exists already is an error.
    async fn insert_managed_fields(&mut self, rows: &[ManagedFields]) -> StoreResult<()>;
}
