//! The stored identity and desired state of named objects (Projects, Tasks,
//! Runs): what GitOps ownership compares against — the push side's
//! conflict check and the sync's merge and inventory.

use std::collections::{BTreeMap, HashMap, HashSet};

use pam_manifests::kinds::Kind;
use pam_store::prelude::*;
use pam_store::{Meta, Project, StoreError};
use uuid::Uuid;

/// An object by kind, project (Tasks and Runs) and name.
pub type ObjectKey = (Kind, Option<String>, String);

/// The key of a manifest's object.
pub fn key_of(m: &pam_manifests::kinds::Manifest) -> ObjectKey {
    (
        m.kind(),
        m.project().map(|p| p.to_string()),
        m.name().to_string(),
    )
}

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
        let Some(p) = tx.by_name::<Project>((), &slug).await? else {
            continue;
        };
        out.insert(
            (Kind::Project, None, slug.clone()),
            StoredObject {
                id: p.id,
                meta: p.meta.clone(),
            },
        );
        let mut put = |kind, name, id, meta| {
            out.insert((kind, Some(slug.clone()), name), StoredObject { id, meta });
        };
        if !tasks.is_empty() {
            for w in tx.work_items_with_ancestors(p.id, &tasks).await? {
                put(Kind::Task, w.name, w.id, w.meta);
            }
        }
        if !runs.is_empty() {
            for r in tx.runs_named(p.id, &runs).await? {
                put(Kind::Run, r.name, r.id, r.meta);
            }
        }
    }
    let wanted: HashSet<&ObjectKey> = keys.iter().collect();
    out.retain(|k, _| wanted.contains(k));
    Ok(out)
}

/// Where the managed-fields plan finds a stored object: its id and meta,
/// borrowed (a big batch's objects are not copied).
pub trait Lookup: Sync {
    fn find(&self, key: &ObjectKey) -> Option<(Uuid, &Meta)>;
}

impl Lookup for HashMap<ObjectKey, StoredObject> {
    fn find(&self, key: &ObjectKey) -> Option<(Uuid, &Meta)> {
        self.get(key).map(|o| (o.id, &o.meta))
    }
}

/// One stored object by kind, project and name.
pub async fn stored_one(
    tx: &mut dyn Tx,
    kind: Kind,
    project: Option<&str>,
    name: &str,
) -> Result<Option<StoredObject>, StoreError> {
    use crate::rules::kind::Stored;
    let project = match project {
        Some(slug) => tx.by_name::<Project>((), slug).await?,
        None => None,
    };
    async fn one<K: Stored>(
        tx: &mut dyn Tx,
        p: Option<&pam_store::Project>,
        name: &str,
    ) -> Result<Option<StoredObject>, StoreError> {
        Ok(K::by_name(tx, p, name).await?.map(|o| StoredObject {
            id: o.id(),
            meta: o.meta().clone(),
        }))
    }
    crate::rules::each_kind::for_kind!(kind, K => one::<K>(tx, project.as_ref(), name).await)
}
