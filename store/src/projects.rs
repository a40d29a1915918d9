//! The project aggregate: [`Project`] rows and the [`ProjectTx`] calls.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::ProjectStatus;
use uuid::Uuid;

use crate::{Meta, StoreResult};

#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    pub id: Uuid,
    /// Human-readable name (manifest `spec.displayName`).
    pub name: String,
    /// URL-safe identifier; the manifest's `metadata.name`.
    pub slug: String,
    pub description: String,
    pub status: ProjectStatus,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Projects (`projects`). Part of every [`crate::Tx`].
#[async_trait]
pub trait ProjectTx: Send {
    /// Inserts a project (`resource_version` is stored as given, normally 1).
    /// A taken slug is [`StoreError::AlreadyExists`].
    async fn insert_project(&mut self, p: &Project) -> StoreResult<()>;
    async fn get_project(&mut self, id: Uuid) -> StoreResult<Option<Project>>;
    async fn get_project_by_slug(&mut self, slug: &str) -> StoreResult<Option<Project>>;
    /// All projects ordered by slug.
    async fn list_projects(&mut self) -> StoreResult<Vec<Project>>;
    /// Writes name, description, status, meta (except resource_version) and
    /// updated_at where `resource_version = expected_rv`, bumping it; returns
    /// the stored row. Zero rows: Conflict (or NotFound if the id is gone).
    /// A status change passes the gate only in the sense that both values are
    /// legal; projects have no transition graph (active ⇄ archived).
    async fn update_project(&mut self, p: &Project, expected_rv: i64) -> StoreResult<Project>;
    /// Deletes a project and (by FK cascade) its work items, runs and
    /// processed signals. Returns whether it existed.
    async fn delete_project(&mut self, id: Uuid) -> StoreResult<bool>;
}

/// Issue 21: whether a project carries the condition `BudgetExceeded` with
/// status True — set by pamd's budget pass when its runs together reached
/// `spec.budget`. [`crate::RunTx::claim_runs`] dispatches none of its runs
/// while it does.
pub fn over_budget(meta: &crate::Meta) -> bool {
    meta.conditions.as_array().is_some_and(|c| {
        c.iter().any(|c| {
            c["type"] == pam_manifests::conditions::BUDGET_EXCEEDED && c["status"] == "True"
        })
    })
}
