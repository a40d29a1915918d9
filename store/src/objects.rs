//! Objects of the kinds stored generically (issue 29): one table,
//! `objects`, for every kind whose objects are metadata, a spec and a
//! status — as Kubernetes keeps every kind in one store. The kind's
//! registry row (`pam_manifests::kinds::KindInfo::generic`) says a kind is
//! stored here; its type is parsed at the edge (apply, printing) and the
//! store holds the spec and status as JSON.
//!
//! # Guarantees
//! - A name is unique per kind in its scope (a project, or the cluster for
//!   `project_id: None`): a taken one is AlreadyExists.
//! - A project-scoped object needs its project (NotFound otherwise) and is
//!   deleted with it.
//! - Updates are guarded by the resource version (Conflict when another
//!   write moved it).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::{Meta, StoreResult};

/// One object of a generically stored kind.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub id: Uuid,
    /// Its `kind:` (`"Role"`).
    pub kind: String,
    /// The project it lives in; `None` for a cluster-scoped kind.
    pub project_id: Option<Uuid>,
    pub name: String,
    pub meta: Meta,
    /// Its observed state beyond the conditions, as the kind prints it
    /// (`{}` while nothing was observed).
    pub status: Value,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The `objects` table. Part of every [`crate::Tx`].
#[async_trait]
pub trait ObjectTx: Send {
    /// Inserts an object. A taken (kind, scope, name) is AlreadyExists; a
    /// missing project NotFound.
    async fn insert_object(&mut self, o: &Object) -> StoreResult<()>;
    /// The object with this id, of any kind.
    async fn get_object(&mut self, id: Uuid) -> StoreResult<Option<Object>>;
    /// The object of `kind` named `name` in `project` (`None`: cluster
    /// scope).
    async fn get_object_by_name(
        &mut self,
        kind: &str,
        project: Option<Uuid>,
        name: &str,
    ) -> StoreResult<Option<Object>>;
    /// Every object of `kind` in `project` (`None`: cluster scope), by name
    /// (byte order).
    async fn list_objects(&mut self, kind: &str, project: Option<Uuid>)
        -> StoreResult<Vec<Object>>;
    /// Every object of any kind in `project`, by kind then name (what
    /// deleting the project would take with it).
    async fn objects_in_project(&mut self, project: Uuid) -> StoreResult<Vec<Object>>;
    /// Writes meta (except resource_version), status and updated_at where
    /// `resource_version = expected_rv`, bumping it.
    async fn update_object(&mut self, o: &Object, expected_rv: i64) -> StoreResult<Object>;
    /// Deletes it; whether it was there.
    async fn delete_object(&mut self, id: Uuid) -> StoreResult<bool>;
}
