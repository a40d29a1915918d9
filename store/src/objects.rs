//! Objects of the kinds stored generically: one table,
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
    /// Every object of any kind in `project`, by kind then name (what
    /// deleting the project would take with it).
    async fn objects_in_project(&mut self, project: Uuid) -> StoreResult<Vec<Object>>;
}

crate::named::row!(Object);

impl crate::NamedKind for Object {
    type Scope = (String, Option<Uuid>);
    const NOUN: &'static str = "object";
    fn scope(&self) -> (String, Option<Uuid>) {
        (self.kind.clone(), self.project_id)
    }
    /// Named by its own kind and name.
    fn what(&self) -> String {
        format!("{} {}", self.kind.to_ascii_lowercase(), self.name)
    }
}
