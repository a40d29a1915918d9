//! One sync of one Source: the tree at a revision, loaded and validated
//! whole as `pamctl apply -R` loads a directory (errors name the file
//! relative to the Source's root, line, column and field), refused outside
//! `spec.projects`, merged with what operators own, and written in the
//! caller's transaction with the inventory and the prune.
//!
//! # Guarantees
//! - All or nothing: any problem returns [`SyncError::Invalid`] before the
//!   caller commits, so a bad revision (a truncated file, a cycle, an
//!   unknown field) applies nothing.
//! - Prune deletes only objects in this Source's inventory, never another
//!   Source's or an operator's; an object another Source owns is refused.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{Kind, Manifest, SourceError, SourceSpec};
use pam_manifests::load::Document;
use pam_manifests::ManifestError;
use pam_store::prelude::*;
use pam_store::{OwnedObject, Source, SourceObject};
use serde_json::Value;
use uuid::Uuid;

use crate::apply::managed;
use crate::apply::ownership::{merged_document, Declared};
use crate::apply::prune::{prune_objects, Doomed, Outcome};
use crate::apply::stored::{key_of, stored_objects, ObjectKey};
use crate::apply::{self, Action, ApplyError, ApplyResult};
use crate::rules::meta::Desired;
use crate::rules::sources::{self, Counts};

/// Why a sync applied nothing.
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    /// The tree is invalid: every problem, positioned.
    #[error("{} problem(s)", .0.len())]
    Invalid(Vec<ManifestError>),
    /// Anything else (the store, a lost race), as a message.
    #[error("{0}")]
    Other(String),
}

impl From<pam_store::StoreError> for SyncError {
    fn from(e: pam_store::StoreError) -> Self {
        SyncError::Other(e.to_string())
    }
}

impl From<ApplyError> for SyncError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Invalid(errors) => SyncError::Invalid(errors),
            other => SyncError::Other(other.to_string()),
        }
    }
}

/// A positioned problem as the Source's status shows it.
pub fn source_error(e: &ManifestError) -> SourceError {
    SourceError {
        file: e.file.clone(),
        document: e.document,
        line: e.line,
        column: e.column,
        path: e.path.clone(),
        message: e.message.clone(),
    }
}

fn key_of_row(o: &SourceObject) -> Option<ObjectKey> {
    Some((Kind::parse(&o.kind)?, o.project.clone(), o.name.clone()))
}

/// A document outside what this Source may write: another kind than
/// Project, Task and Run, or a project not in `spec.projects`.
fn out_of_scope(d: &Document, spec: &SourceSpec) -> Option<ManifestError> {
    let allowed: Vec<&str> = spec.projects.iter().map(|p| p.as_str()).collect();
    let (path, project) = match &d.manifest {
        Manifest::Project(p) => ("metadata.name", p.metadata.name.as_str()),
        Manifest::Task(t) => ("metadata.project", t.metadata.project.as_str()),
        Manifest::Run(r) => ("metadata.project", r.metadata.project.as_str()),
        Manifest::Secret(_) => {
            return Some(d.error_at(
                "kind",
                "a Source writes Projects, Tasks and Runs; Secrets hold values that belong in no repository, expected them applied with pamctl apply",
            ))
        }
        // Any other kind (and every kind stored generically).
        _ => {
            return Some(d.error_at(
                "kind",
                format!(
                    "a Source writes Projects, Tasks and Runs, expected no {} in its tree",
                    d.manifest.kind()
                ),
            ))
        }
    };
    if allowed.contains(&project) {
        return None;
    }
    Some(d.error_at(
        path,
        format!(
            "project {project:?} is outside this Source's spec.projects, expected one of {allowed:?}"
        ),
    ))
}

/// What a sync wrote: the counts, and — for a whole tree — the
/// inventory's size and the owned runs with their statuses (for health).
pub struct Applied {
    pub counts: Counts,
    pub whole: Option<WholeInventory>,
    /// How many owned objects left the tree (pruned, or released with
    /// `prune: false`): what a directory's unsettled files must not
    /// decide (super::settle).
    pub left: usize,
    /// What changed, per object: created or configured by the write, and
    /// the objects that left the tree (`Pruned` with `spec.prune`, else
    /// `Kept`, released) — `pamctl diff source` prints them.
    pub changes: Vec<ApplyResult>,
    /// The objects that left the tree — `Pruned`, or `Held`
    /// with why — for the Source's status (at most
    /// [`pam_manifests::kinds::OBJECTS_SHOWN`]).
    pub departed: Vec<pam_manifests::kinds::OwnedState>,
}

/// The inventory a whole-tree sync left.
pub struct WholeInventory {
    pub size: usize,
    pub runs: Vec<(String, pam_manifests::state::RunStatus)>,
}

/// What a sync applies against.
pub enum Prev<'a> {
    /// The whole tree against the whole inventory with the stored objects
    /// ([`pam_store::SourceTx::owned_objects`]): owned objects the tree no
    /// longer declares are pruned.
    Whole(&'a [OwnedObject]),
    /// Part of the tree (its changed files, [`super::cache::Plan`]): the
    /// inventory rows of just these objects are read; nothing left the
    /// tree, so nothing is pruned.
    Part,
}

/// Applies `loaded` (the whole tree, or its changed files' documents) as
/// `source`'s desired state in `tx`: returns what changed.
#[allow(clippy::too_many_arguments)]
pub async fn apply_tree(
    tx: &mut dyn Tx,
    source: &Source,
    spec: &SourceSpec,
    loaded: &[&(Document, Value)],
    prev: Prev<'_>,
    now: DateTime<Utc>,
    offline_after: std::time::Duration,
) -> Result<Applied, SyncError> {
    let scope: Vec<ManifestError> = loaded
        .iter()
        .filter_map(|(d, _)| out_of_scope(d, spec))
        .collect();
    if !scope.is_empty() {
        return Err(SyncError::Invalid(scope));
    }
    let keys: Vec<ObjectKey> = loaded.iter().map(|(d, _)| key_of(&d.manifest)).collect();
    // The stored state the tree names, read once: the merge's, the
    // inventory's and the write's.
    let manifests: Vec<&Manifest> = loaded.iter().map(|(d, _)| &d.manifest).collect();
    let existing = apply::existing::load_existing(tx, &manifests).await?;
    let stored = existing.stored(&keys);
    let ids: Vec<(String, Uuid)> = stored
        .iter()
        .map(|((k, _, _), o)| (k.as_str().to_string(), o.id))
        .collect();
    let (foreign, mine): (Vec<SourceObject>, Vec<SourceObject>) = tx
        .owners_of(&ids)
        .await?
        .into_iter()
        .partition(|o| o.source_id != source.id);
    let foreign: HashMap<Uuid, Uuid> = foreign
        .into_iter()
        .map(|o| (o.object_id, o.source_id))
        .collect();
    // The inventory rows of these objects: from the whole inventory, or
    // (part of a tree) the ones just read.
    let whole = match prev {
        Prev::Whole(rows) => Some(rows),
        Prev::Part => None,
    };
    let prev_rows: Vec<&SourceObject> = match whole {
        Some(rows) => rows.iter().map(|o| &o.owner).collect(),
        None => mine.iter().collect(),
    };
    let prev_by_key: HashMap<ObjectKey, &SourceObject> = prev_rows
        .iter()
        .filter_map(|o| Some((key_of_row(o)?, *o)))
        .collect();
    let mut errors = Vec::new();
    let mut merged = Vec::with_capacity(loaded.len());
    for (d, raw) in loaded {
        let key = key_of(&d.manifest);
        let here = stored.get(&key);
        if let Some(other) = here.and_then(|o| foreign.get(&o.id)) {
            let name = match tx.get::<Source>(*other).await? {
                Some(s) => s.name,
                None => other.to_string(),
            };
            errors.push(d.error_at(
                "metadata.name",
                format!("owned by Source {name:?}, expected an object no other Source owns"),
            ));
            continue;
        }
        let prev_declared = prev_by_key
            .get(&key)
            .map(|o| Declared::from_json(&o.declared));
        let doc = merged_document(
            raw,
            here.map(|o| Desired::stored(&o.meta)).as_ref(),
            prev_declared.as_ref(),
        );
        match Manifest::from_json(doc) {
            Ok(m) => merged.push(d.with_manifest(m)),
            Err(e) => errors.push(d.error_at("", e.to_string())),
        }
    }
    if !errors.is_empty() {
        return Err(SyncError::Invalid(errors));
    }
    // Managed fields: what the tree declares is the Source's,
    // taken from any other manager as Argo CD and Flux restore git's.
    let named = loaded
        .iter()
        .map(|(_, raw)| managed::declared(raw))
        .collect();
    let manager = managed::Manager::source(&source.name);
    let plan = managed::plan(tx, &stored, &merged, named, &manager, true, now).await?;
    // No keyring: a Source never carries Secrets (refused above).
    let written = apply::write_loaded(
        tx,
        None,
        now,
        offline_after,
        merged,
        apply::Prune::default(),
        existing,
    )
    .await?;
    plan.record(tx, &written.results, &written.ids, now).await?;
    let mut counts = Counts::default();
    let mut changes = Vec::new();
    for r in &written.results {
        match r.action {
            Action::Created => counts.created += 1,
            Action::Configured => counts.configured += 1,
            _ => continue,
        }
        changes.push(r.clone());
    }
    let now_keys: HashSet<&ObjectKey> = keys.iter().collect();
    let gone: Vec<&OwnedObject> = whole
        .unwrap_or_default()
        .iter()
        .filter(|o| key_of_row(&o.owner).is_none_or(|k| !now_keys.contains(&k)))
        .collect();
    let left = gone.len();
    let why_released = "left the tree; released (spec.prune: false)";
    changes.extend(gone.iter().filter_map(|o| {
        Some(ApplyResult {
            kind: Kind::parse(&o.owner.kind)?.as_str(),
            project: o.owner.project.clone(),
            name: o.owner.name.clone(),
            action: if spec.prune {
                Action::Pruned
            } else {
                Action::Kept
            },
            generation: None,
            message: (!spec.prune).then(|| why_released.to_string()),
        })
    }));
    let departed = if spec.prune {
        let (n, departed) = prune(tx, source, &gone, now).await?;
        counts.pruned = n;
        departed
    } else {
        gone.iter()
            .map(|o| super::objects::departed(o, false, why_released.into()))
            .collect()
    };
    let (departed, _) = super::objects::bounded(departed, pam_manifests::kinds::OBJECTS_SHOWN);
    if !gone.is_empty() {
        let objects: Vec<(String, Uuid)> = gone
            .iter()
            .map(|o| (o.owner.kind.clone(), o.owner.object_id))
            .collect();
        tx.delete_source_objects(source.id, &objects).await?;
    }
    // Ids of what exists now: the objects read before the write keep
    // theirs (a sync updates in place); only the new ones are read.
    let new_keys: Vec<ObjectKey> = keys
        .iter()
        .filter(|k| !stored.contains_key(*k))
        .cloned()
        .collect();
    let created = stored_objects(tx, &new_keys).await?;
    let id_of = |key: &ObjectKey| stored.get(key).or_else(|| created.get(key)).map(|o| o.id);
    let rows: Vec<SourceObject> = loaded
        .iter()
        .filter_map(|(d, raw)| {
            let key = key_of(&d.manifest);
            let id = id_of(&key)?;
            Some(SourceObject {
                source_id: source.id,
                kind: key.0.as_str().to_string(),
                object_id: id,
                project: key.1,
                name: key.2,
                declared: Declared::of_document(raw).into_json(),
                file: d.file.to_string(),
            })
        })
        .collect();
    // Only rows that are new or changed are written: a one-file change in
    // a big tree rewrites that file's rows, not the whole inventory.
    let before: HashMap<(&str, Uuid), &SourceObject> = prev_rows
        .iter()
        .map(|o| ((o.kind.as_str(), o.object_id), *o))
        .collect();
    let changed: Vec<SourceObject> = rows
        .iter()
        .filter(|r| before.get(&(r.kind.as_str(), r.object_id)) != Some(r))
        .cloned()
        .collect();
    let put = tx.put_source_objects(&changed).await?;
    if put as usize != changed.len() {
        return Err(SyncError::Other(format!(
            "another Source took {} object(s) of this one during the sync; retrying",
            changed.len() - put as usize
        )));
    }
    let whole = whole.map(|prev| {
        let status_of: HashMap<Uuid, pam_manifests::state::RunStatus> = prev
            .iter()
            .filter_map(|o| Some((o.owner.object_id, o.run_status?)))
            .collect();
        let runs = rows
            .iter()
            .filter(|r| r.kind == Kind::Run.as_str())
            .map(|r| {
                // A run this sync created is pending.
                let status = status_of
                    .get(&r.object_id)
                    .copied()
                    .unwrap_or(pam_manifests::state::RunStatus::Pending);
                (r.name.clone(), status)
            })
            .collect();
        WholeInventory {
            size: rows.len(),
            runs,
        }
    });
    Ok(Applied {
        counts,
        whole,
        left,
        changes,
        departed,
    })
}

/// Deletes the owned objects that left the tree through the one prune
/// ([`prune_objects`]: children first, no hidden cascade), journaling
/// `source.pruned` for each deleted one. An owned object whose deletion
/// would take anything that is not itself being pruned here (an operator's
/// subtask or run, another Source's object, one the tree still declares)
/// is kept and released from the inventory instead, journaled as
/// `source.prune_skipped` naming what held it. Returns how many were
/// deleted, and each one's state for the status (`Pruned`, `Held`).
async fn prune(
    tx: &mut dyn Tx,
    source: &Source,
    gone: &[&OwnedObject],
    now: DateTime<Utc>,
) -> Result<(usize, Vec<pam_manifests::kinds::OwnedState>), SyncError> {
    let by_id: HashMap<Uuid, &OwnedObject> = gone.iter().map(|o| (o.owner.object_id, *o)).collect();
    let doomed = gone
        .iter()
        .filter_map(|o| {
            Some(Doomed {
                kind: Kind::parse(&o.owner.kind)?,
                id: o.owner.object_id,
                project: o.owner.project.clone(),
                name: o.owner.name.clone(),
            })
        })
        .collect();
    let mut n = 0;
    let mut states = Vec::new();
    for (d, outcome) in prune_objects(tx, doomed, now).await? {
        let o = by_id[&d.id];
        let state = match outcome {
            Outcome::Pruned => {
                journal_prune(tx, source, o, None, now).await?;
                n += 1;
                super::objects::departed(o, true, "left the tree; pruned".into())
            }
            Outcome::Held(held) => {
                journal_prune(tx, source, o, Some(&held), now).await?;
                let why = format!(
                    "left the tree; kept: pruning would also delete {}",
                    held.join(", ")
                );
                super::objects::departed(o, false, why)
            }
            Outcome::Gone => {
                super::objects::departed(o, true, "left the tree; already gone".into())
            }
        };
        states.push(state);
    }
    Ok((n, states))
}

/// Journals an owned object's prune: done, or (`held`: what it would
/// also delete) kept because pruning it would cascade (see [`prune`]).
async fn journal_prune(
    tx: &mut dyn Tx,
    source: &Source,
    o: &OwnedObject,
    held: Option<&[String]>,
    now: DateTime<Utc>,
) -> Result<(), SyncError> {
    let (kind, project, name) = (&o.owner.kind, o.owner.project.as_deref(), &o.owner.name);
    match held {
        Some(held) => sources::prune_skipped(tx, source, kind, project, name, held, now).await?,
        None => sources::pruned(tx, source, kind, project, name, now).await?,
    }
    Ok(())
}
