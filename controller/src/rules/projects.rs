//! Project rules: create, update (archive and un-archive), delete.
//!
//! Archived semantics (pam-data-model.txt, projects): an archived project
//! takes no new work items and no new runs (validation refuses them);
//! runs in flight continue. Un-archiving restores full mutability.

use chrono::{DateTime, Utc};
use pam_manifests::kinds;
use pam_manifests::state::ProjectStatus;
use pam_store::prelude::*;
use pam_store::{Project, StoreResult};
use uuid::Uuid;

use super::meta::{self, Change, Desired};
use super::runs::usage;
use crate::events::{payload, topic};

/// A project as declared.
#[derive(Debug, Clone)]
pub struct ProjectDesired {
    pub slug: String,
    pub display_name: String,
    pub description: String,
    pub archived: bool,
    pub desired: Desired,
}

impl ProjectDesired {
    pub fn of(p: &kinds::Project, desired: Desired) -> ProjectDesired {
        let slug = p.metadata.name.to_string();
        ProjectDesired {
            display_name: p.spec.display_name.clone().unwrap_or_else(|| slug.clone()),
            slug,
            description: p.spec.description.clone(),
            archived: p.spec.archived,
            desired,
        }
    }

    fn status(&self) -> ProjectStatus {
        if self.archived {
            ProjectStatus::Archived
        } else {
            ProjectStatus::Active
        }
    }
}

/// Creates a project; journals `project.created` (and `project.archived`
/// when it is born archived).
pub async fn create(
    tx: &mut dyn Tx,
    d: ProjectDesired,
    now: DateTime<Utc>,
) -> StoreResult<Project> {
    let status = d.status();
    let row = Project {
        id: Uuid::new_v4(),
        name: d.display_name,
        slug: d.slug,
        description: d.description,
        status,
        meta: meta::new_meta(d.desired, now),
        created_at: now,
        updated_at: now,
    };
    tx.insert(&row).await?;
    let p = payload::project(&row);
    tx.append_event(topic::PROJECT_CREATED, p.clone(), now)
        .await?;
    if status == ProjectStatus::Archived {
        tx.append_event(topic::PROJECT_ARCHIVED, p, now).await?;
    }
    Ok(row)
}

/// Updates a project to its desired state (guarded by its
/// resourceVersion); journals `project.archived` when this archives it,
/// else `project.updated`. The same desired state writes nothing.
pub async fn update(
    tx: &mut dyn Tx,
    row: Project,
    d: ProjectDesired,
    now: DateTime<Utc>,
) -> StoreResult<(Project, Change)> {
    let was = row.status;
    let status = d.status();
    let (name, description) = (d.display_name, d.description);
    let (row, change) = meta::write_desired(tx, row, d.desired, now, |row| {
        row.name = name;
        row.description = description;
        row.status = status;
    })
    .await?;
    if !change.changed() {
        return Ok((row, change));
    }
    let t = if was != ProjectStatus::Archived && status == ProjectStatus::Archived {
        topic::PROJECT_ARCHIVED
    } else {
        topic::PROJECT_UPDATED
    };
    tx.append_event(t, payload::project(&row), now).await?;
    Ok((row, change))
}

/// Deletes a project with (by cascade) its work items, runs and their
/// signal markers. The seed's journal has no project deletion topic.
pub async fn delete(tx: &mut dyn Tx, p: &Project) -> StoreResult<bool> {
    tx.delete::<Project>(p.id).await
}

/// The project's budget state — the condition `BudgetExceeded`
/// True with the figures (`exceeded`: which limit its runs together
/// reached), or False once they are within it again (the budget was
/// raised). While True, no run of the project is dispatched
/// ([`pam_store::RunTx::claim_runs`]) and its pending runs show the
/// condition too. Writes only a change; returns whether it wrote.
pub async fn set_budget_state(
    tx: &mut dyn Tx,
    mut p: Project,
    exceeded: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let was = pam_store::projects::over_budget(&p.meta);
    if was == exceeded.is_some() {
        return Ok(false);
    }
    let rv = p.meta.resource_version;
    let (reason, message) = match exceeded {
        Some(why) => (
            usage::BUDGET_EXCEEDED,
            format!("{why}: no new runs are dispatched"),
        ),
        None => (
            "WithinBudget",
            "the project's runs are within its budget".to_string(),
        ),
    };
    meta::set_condition(
        &mut p.meta,
        usage::BUDGET_EXCEEDED,
        exceeded.is_some(),
        reason,
        &message,
        now,
    );
    let p = tx.update(&p, rv).await?;
    tx.append_event(topic::PROJECT_UPDATED, payload::project(&p), now)
        .await?;
    Ok(true)
}
