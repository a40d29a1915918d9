//! What validation needs of the stored state: the projects a batch names,
//! their tasks and runs.

use std::collections::{HashMap, HashSet};

use pam_manifests::kinds::Manifest;
use pam_manifests::load::Document;
use pam_manifests::names::Name;
use pam_manifests::state::ProjectStatus;
use pam_manifests::validate::{InMemoryState, StoredProject, StoredTask};
use pam_store::prelude::*;
use pam_store::{RunFilter, StoreError, WorkItem};
use uuid::Uuid;

/// What validation needs of the stored state: the projects the batch
/// names, their tasks and runs.
pub(super) async fn load_existing(
    tx: &mut dyn Tx,
    docs: &[Document],
) -> Result<InMemoryState, StoreError> {
    let mut names: Vec<Name> = docs
        .iter()
        .filter_map(|d| match &d.manifest {
            Manifest::Project(p) => Some(p.metadata.name.clone()),
            m => m.project().cloned(),
        })
        .collect();
    names.sort();
    names.dedup();
    let mut st = InMemoryState::default();
    for name in names {
        let Some(p) = tx.get_project_by_slug(name.as_str()).await? else {
            continue;
        };
        st.projects.insert(
            name.clone(),
            StoredProject {
                archived: p.status == ProjectStatus::Archived,
            },
        );
        let items = tx.list_work_items(p.id).await?;
        let by_id: HashMap<Uuid, &WorkItem> = items.iter().map(|w| (w.id, w)).collect();
        for w in &items {
            let parent = w
                .parent_id
                .and_then(|id| by_id.get(&id))
                .and_then(|p| Name::parse(&p.name).ok());
            if let Ok(n) = Name::parse(&w.name) {
                st.tasks.insert(
                    (name.clone(), n),
                    StoredTask {
                        kind: w.kind,
                        parent,
                    },
                );
            }
        }
        for r in tx
            .list_runs(&RunFilter {
                project_id: Some(p.id),
                ..Default::default()
            })
            .await?
        {
            if let Ok(n) = Name::parse(&r.name) {
                st.runs.insert((name.clone(), n));
            }
        }
    }
    other_projects_tasks(tx, docs, &mut st).await?;
    Ok(st)
}

/// A parent (or a Run's task) found neither in its project (batch or
/// stored) may be stored in a project the batch does not name: those
/// tasks are added to `st` so that the error names that project (parents
/// and tasks must be in the same project). Only read when a reference does
/// not resolve, i.e. on the way to an error.
async fn other_projects_tasks(
    tx: &mut dyn Tx,
    docs: &[Document],
    st: &mut InMemoryState,
) -> Result<(), StoreError> {
    let in_batch: HashSet<(&Name, &Name)> = docs
        .iter()
        .filter_map(|d| match &d.manifest {
            Manifest::Task(t) => Some((&t.metadata.project, &t.metadata.name)),
            _ => None,
        })
        .collect();
    let mut missing: Vec<&Name> = docs
        .iter()
        .filter_map(|d| match &d.manifest {
            Manifest::Task(t) => t.spec.parent.as_ref().map(|p| (&t.metadata.project, p)),
            Manifest::Run(r) => Some((&r.metadata.project, &r.spec.task)),
            _ => None,
        })
        .filter(|&(project, task)| {
            !in_batch.contains(&(project, task))
                && !st.tasks.contains_key(&(project.clone(), task.clone()))
        })
        .map(|(_, task)| task)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    missing.sort();
    missing.dedup();
    for p in tx.list_projects().await? {
        let Ok(project) = Name::parse(&p.slug) else {
            continue;
        };
        if st.projects.contains_key(&project) {
            continue;
        }
        for &task in &missing {
            if let Some(w) = tx.get_work_item_by_name(p.id, task.as_str()).await? {
                st.tasks.insert(
                    (project.clone(), task.clone()),
                    StoredTask {
                        kind: w.kind,
                        parent: None,
                    },
                );
            }
        }
    }
    Ok(())
}
