//! The project aggregate: [`Project`] rows; their calls are the generic
//! [`crate::NamedTx`] ones (a project is named by its slug).

use chrono::{DateTime, Utc};
use pam_manifests::state::ProjectStatus;
use uuid::Uuid;

use crate::Meta;

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

/// Whether a project carries the condition `BudgetExceeded` with
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

crate::named::row!(Project);

impl crate::NamedKind for Project {
    type Scope = ();
    const NOUN: &'static str = "project";
    fn scope(&self) {}
}
