//! The stored identity and desired state of named objects (Projects, Tasks,
//! Runs): what GitOps ownership compares against — the push side's
//! conflict check and the sync's merge and inventory.

use std::collections::{BTreeMap, HashMap, HashSet};

use pam_manifests::kinds::Kind;
use pam_store::prelude::*;
use pam_store::{Meta, StoreError};
use uuid::Uuid;

/// An object by kind, project (Tasks and Runs) and name.
pub type ObjectKey = (Kind, Option<String>, String);

/// One stored object.
#[derive(Debug, Clone)]
pub struct StoredObject {
    pub id: Uuid,
    pub meta: Meta,
}

/// The stored objects among `keys` (Projects, Tasks, Runs; other kinds
/// are left out), with one read per project and kind.
pub async fn stored_objects(
    tx: &mut dyn Tx,
    keys: &[ObjectKey],
) -> Result<HashMap<ObjectKey, StoredObject>, StoreError> {
    let mut by_project: BTreeMap<String, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for (kind, project, name) in keys {
        match (kind, project) {
            (Kind::Project, _) => {
                by_project.entry(name.clone()).or_default();
            }
            (Kind::Task, Some(p)) => by_project
                .entry(p.clone())
                .or_default()
                .0
                .push(name.clone()),
            (Kind::Run, Some(p)) => by_project
                .entry(p.clone())
                .or_default()
                .1
                .push(name.clone()),
            _ => {}
        }
    }
    let mut out = HashMap::new();
    for (slug, (tasks, runs)) in by_project {
        let Some(p) = tx.get_project_by_slug(&slug).await? else {
            continue;
        };
        out.insert(
            (Kind::Project, None, slug.clone()),
            StoredObject {
                id: p.id,
                meta: p.meta.clone(),
            },
        );
        if !tasks.is_empty() {
            for w in tx.work_items_with_ancestors(p.id, &tasks).await? {
                out.insert(
                    (Kind::Task, Some(slug.clone()), w.name.clone()),
                    StoredObject {
                        id: w.id,
                        meta: w.meta,
                    },
                );
            }
        }
        if !runs.is_empty() {
            for r in tx.runs_named(p.id, &runs).await? {
                out.insert(
                    (Kind::Run, Some(slug.clone()), r.name.clone()),
                    StoredObject {
                        id: r.id,
                        meta: r.meta,
                    },
                );
            }
        }
    }
    let wanted: HashSet<&ObjectKey> = keys.iter().collect();
    out.retain(|k, _| wanted.contains(k));
    Ok(out)
}
