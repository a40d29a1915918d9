//! Managed fields: apply that merges, as Kubernetes'
//! server-side apply does. Every object keeps, per manager, the field
//! paths it set (`spec.title`, `metadata.labels.tier`,
//! `metadata.annotations.note`); the record is `managed_fields` (one row
//! per object, read and written in bulk: one statement each per batch).
//!
//! # Managers
//! `apply:TOKEN` (`pamctl apply`, `POST /api/v1/apply`), `label:TOKEN`,
//! `annotate:TOKEN` and `edit:TOKEN` (the verbs of that name, through
//! `?fieldManager=`), `source:NAME` (a Source's sync); `TOKEN` is the
//! request's token name. pamd's own batches apply as `apply:pamd`.
//!
//! # Apply (operation `Apply`): manifest M as manager X
//! - the fields M names are set, and X owns them;
//! - the fields X owned before that M no longer names are removed —
//!   unless another manager owns them too (they stay, X lets go);
//! - the fields other managers own that M does not name stay;
//! - fields no manager owns (set before managed fields existed, or by a
//!   verb that is no manager: `stop`, the board) are replaced as M says,
//!   as apply always did;
//! - a field M names that another manager owns with a different value is
//!   a conflict (409 `field_conflict`, nothing written) unless
//!   `forceConflicts`, which takes it from them; the same value is shared
//!   ownership.
//!
//! # Update (`label`, `annotate`, `edit`)
//! These send the whole object they read (with its resourceVersion): the
//! fields whose value they change become theirs; a removed field leaves
//! every manager; changing a field another manager owns is a conflict
//! unless `forceConflicts`.
//!
//! # A Source's sync
//! Applies as `source:NAME` with `forceConflicts`, as Argo CD and Flux
//! restore what git declares: its merge is the inventory's
//! ([`super::ownership`]), this record says who owns what.
//!
//! A Secret's spec (its values) is not tracked field by field: its labels
//! and annotations are.

use std::collections::{BTreeSet, HashMap};

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{Kind, Manifest};
use pam_manifests::load::Document;
use pam_store::prelude::*;
use pam_store::{Labels, ManagedEntry, ManagedFields, Meta};
use serde_json::Value;
use uuid::Uuid;

use super::stored::{key_of, Lookup, ObjectKey};
use super::{Action, ApplyError, ApplyResult};
use crate::rules::meta::Desired;

const SPEC: &str = "spec.";
const LABELS: &str = "metadata.labels.";
const ANNOTATIONS: &str = "metadata.annotations.";

/// How a manager writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// The verb a request writes as (`?fieldManager=`): the manager is
/// `VERB:TOKEN`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FieldManager {
    #[default]
    Apply,
    Label,
    Annotate,
    Edit,
}

/// Who writes a batch, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manager {
    pub name: String,
    pub operation: Operation,
    /// The fields an Update may claim (`metadata.labels.` for `label`):
    /// the object it sends back is printed, and a field printed otherwise
    /// than stored is no change of its.
    only: Option<&'static str>,
}

impl Manager {
    /// A request's manager: its verb and its token's name.
    pub fn of_request(verb: FieldManager, token: &str) -> Manager {
        let (verb, operation, only) = match verb {
            FieldManager::Apply => ("apply", Operation::Apply, None),
            FieldManager::Label => ("label", Operation::Update, Some(LABELS)),
            FieldManager::Annotate => ("annotate", Operation::Update, Some(ANNOTATIONS)),
            FieldManager::Edit => ("edit", Operation::Update, None),
        };
        Manager {
            name: format!("{verb}:{token}"),
            operation,
            only,
        }
    }

    /// A Source's sync.
    pub fn source(name: &str) -> Manager {
        Manager {
            name: format!("source:{name}"),
            operation: Operation::Apply,
            only: None,
        }
    }

    /// pamd's own batches (no request).
    pub fn pamd() -> Manager {
        Manager {
            name: "apply:pamd".into(),
            operation: Operation::Apply,
            only: None,
        }
    }
}

/// The fields a document names: the spec keys as written, every label and
/// annotation key.
pub fn named(d: &Document) -> Vec<String> {
    let m = &d.manifest;
    let mut out = Vec::new();
    if m.kind() != Kind::Secret {
        out.extend(d.spec_fields().map(|k| format!("{SPEC}{k}")));
    }
    out.extend(m.labels().keys().map(|k| format!("{LABELS}{}", k.as_str())));
    out.extend(
        m.annotations()
            .keys()
            .map(|k| format!("{ANNOTATIONS}{}", k.as_str())),
    );
    out
}

/// The fields a Source's document declares, from the document as written
/// (its merged document holds the operators' fields too).
pub fn declared(raw: &Value) -> Vec<String> {
    let d = super::ownership::Declared::of_document(raw);
    let mut out: Vec<String> = d.spec.keys().map(|k| format!("{SPEC}{k}")).collect();
    out.extend(d.labels.keys().map(|k| format!("{LABELS}{k}")));
    out.extend(d.annotations.keys().map(|k| format!("{ANNOTATIONS}{k}")));
    out
}

/// The fields of a desired state: a manifest's ([`Desired`]) or a stored
/// object's ([`Meta`], read in place: no copy per object of a batch).
trait Fields {
    fn parts(&self) -> (&Value, &Labels, &Labels);
}

impl Fields for Desired {
    fn parts(&self) -> (&Value, &Labels, &Labels) {
        (&self.spec, &self.labels, &self.annotations)
    }
}

impl Fields for Meta {
    fn parts(&self) -> (&Value, &Labels, &Labels) {
        (&self.spec, &self.labels, &self.annotations)
    }
}

/// The value at `path` (labels and annotations as JSON strings).
fn value_at(d: &impl Fields, path: &str) -> Option<Value> {
    let (spec, labels, annotations) = d.parts();
    if let Some(k) = path.strip_prefix(SPEC) {
        spec.get(k).cloned()
    } else if let Some(k) = path.strip_prefix(LABELS) {
        labels.get(k).cloned().map(Value::String)
    } else if let Some(k) = path.strip_prefix(ANNOTATIONS) {
        annotations.get(k).cloned().map(Value::String)
    } else {
        None
    }
}

/// Every field path.
fn paths(d: &impl Fields, spec: bool) -> BTreeSet<String> {
    let (s, labels, annotations) = d.parts();
    let mut out = BTreeSet::new();
    if spec {
        if let Some(o) = s.as_object() {
            out.extend(o.keys().map(|k| format!("{SPEC}{k}")));
        }
    }
    out.extend(labels.keys().map(|k| format!("{LABELS}{k}")));
    out.extend(annotations.keys().map(|k| format!("{ANNOTATIONS}{k}")));
    out
}

/// One document's part of the plan.
struct Item {
    /// The object's new record (this manager's entry with its old time:
    /// [`Plan::record`] stamps it when something changed).
    entries: Vec<ManagedEntry>,
    /// Whether the record differs from the stored one (fields or
    /// managers; times aside).
    changed: bool,
    /// Fields other managers own that the document does not name: kept
    /// from the stored object by [`Plan::merge`].
    kept: Vec<String>,
}

/// What a batch does to managed fields: planned before the write (the
/// conflicts, the fields kept), recorded after it (the ids of new
/// objects are known then).
pub struct Plan {
    manager: Manager,
    items: HashMap<ObjectKey, Item>,
}

fn same_fields(a: &[ManagedEntry], b: &[ManagedEntry]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.manager == y.manager && x.operation == y.operation && x.fields == y.fields
        })
}

/// Plans `docs` written by `manager` against the stored objects
/// (`stored`, of these documents): reads their records in one statement,
/// and refuses the batch on a conflict unless `force`. `named[i]` is what
/// document `i` names (for [`Operation::Apply`]; see [`named`]).
pub async fn plan(
    tx: &mut dyn Tx,
    stored: &dyn Lookup,
    docs: &[Document],
    named: Vec<Vec<String>>,
    manager: &Manager,
    force: bool,
    now: DateTime<Utc>,
) -> Result<Plan, ApplyError> {
    let ids: Vec<(String, Uuid)> = docs
        .iter()
        .filter_map(|d| {
            let (id, _) = stored.find(&key_of(&d.manifest))?;
            Some((d.manifest.kind().as_str().to_string(), id))
        })
        .collect();
    let mut records: HashMap<Uuid, Vec<ManagedEntry>> = tx
        .managed_fields_of(&ids)
        .await?
        .into_iter()
        .map(|r| (r.object_id, r.entries))
        .collect();
    let mut items = HashMap::with_capacity(docs.len());
    let mut conflicts: Vec<(ObjectKey, String, String)> = Vec::new();
    for (d, named) in docs.iter().zip(named) {
        let key = key_of(&d.manifest);
        let here = stored.find(&key);
        let record = here
            .and_then(|(id, _)| records.remove(&id))
            .unwrap_or_default();
        let item = match here {
            None => Item {
                entries: vec![entry(manager, named, now)],
                changed: true,
                kept: Vec::new(),
            },
            Some((_, meta)) => {
                let stored_record = StoredRecord {
                    manager,
                    force,
                    stored: meta,
                    record: &record,
                    spec: key.0 != Kind::Secret,
                };
                match manager.operation {
                    Operation::Apply => {
                        stored_record.apply(&d.manifest, named, now, &mut |f, by| {
                            conflicts.push((key.clone(), f, by))
                        })
                    }
                    Operation::Update => stored_record.update(&d.manifest, now, &mut |f, by| {
                        conflicts.push((key.clone(), f, by))
                    }),
                }
            }
        };
        items.insert(key, item);
    }
    if !conflicts.is_empty() && !force {
        return Err(conflict_error(conflicts));
    }
    Ok(Plan {
        manager: manager.clone(),
        items,
    })
}

/// The token of a request's manager (`label:ci` → `ci`); none for a
/// Source's.
fn actor(manager: &str) -> Option<&str> {
    let (verb, token) = manager.split_once(':')?;
    (verb != "source").then_some(token)
}

fn entry(manager: &Manager, fields: Vec<String>, time: DateTime<Utc>) -> ManagedEntry {
    ManagedEntry {
        manager: manager.name.clone(),
        operation: manager.operation.as_str().to_string(),
        time,
        fields,
    }
}

/// A stored object's managed-fields record and the manager writing to it:
/// [`Self::apply`] or [`Self::update`] plans its next [`Item`].
struct StoredRecord<'a> {
    manager: &'a Manager,
    force: bool,
    stored: &'a Meta,
    record: &'a [ManagedEntry],
    /// Whether spec fields are tracked (not a Secret's).
    spec: bool,
}

impl StoredRecord<'_> {
    /// The other managers' entries, less the fields `taken` (a conflict
    /// forced, or a field removed), each conflicting field reported.
    fn others(
        &self,
        touched: &BTreeSet<String>,
        differs: &dyn Fn(&str) -> bool,
        conflict: &mut dyn FnMut(String, String),
    ) -> Vec<ManagedEntry> {
        let mut out = Vec::new();
        let me = actor(&self.manager.name);
        for e in self
            .record
            .iter()
            .filter(|e| e.manager != self.manager.name)
        {
            let mut e = e.clone();
            // A token never conflicts with itself (its apply, then its
            // edit): the field moves to this manager.
            let mine = me.is_some() && actor(&e.manager) == me;
            e.fields.retain(|f| {
                if !touched.contains(f) || !differs(f) {
                    return true;
                }
                if !mine {
                    conflict(f.clone(), e.manager.clone());
                }
                // Forced (or the same token's): taken from them.
                !(mine || self.force)
            });
            if !e.fields.is_empty() {
                out.push(e);
            }
        }
        out
    }

    fn finish(
        &self,
        mut entries: Vec<ManagedEntry>,
        mine: ManagedEntry,
        kept: Vec<String>,
    ) -> Item {
        let old = self.record.iter().find(|e| e.manager == self.manager.name);
        let mine = ManagedEntry {
            time: old.map_or(mine.time, |o| o.time),
            ..mine
        };
        if !mine.fields.is_empty() {
            entries.push(mine);
        }
        entries.sort_by(|a, b| a.manager.cmp(&b.manager));
        Item {
            changed: !same_fields(&entries, self.record),
            entries,
            kept,
        }
    }

    fn apply(
        &self,
        m: &Manifest,
        named: Vec<String>,
        now: DateTime<Utc>,
        conflict: &mut dyn FnMut(String, String),
    ) -> Item {
        let touched: BTreeSet<String> = named.iter().cloned().collect();
        // M's values, only when another manager owns one of its fields.
        let desired = self
            .record
            .iter()
            .any(|e| e.manager != self.manager.name && e.fields.iter().any(|f| touched.contains(f)))
            .then(|| Desired::of(m));
        let differs = |f: &str| {
            desired
                .as_ref()
                .is_some_and(|d| value_at(self.stored, f) != value_at(d, f))
        };
        let others = self.others(&touched, &differs, conflict);
        let kept: Vec<String> = others
            .iter()
            .flat_map(|e| e.fields.iter())
            .filter(|f| !touched.contains(*f) && value_at(self.stored, f).is_some())
            .cloned()
            .collect::<BTreeSet<String>>()
            .into_iter()
            .collect();
        self.finish(others, entry(self.manager, named, now), kept)
    }

    fn update(
        &self,
        m: &Manifest,
        now: DateTime<Utc>,
        conflict: &mut dyn FnMut(String, String),
    ) -> Item {
        let desired = Desired::of(m);
        let mut all = paths(self.stored, self.spec);
        all.extend(paths(&desired, self.spec));
        let touched: BTreeSet<String> = all
            .into_iter()
            .filter(|f| self.manager.only.is_none_or(|p| f.starts_with(p)))
            .filter(|f| value_at(self.stored, f) != value_at(&desired, f))
            .collect();
        let present = |f: &String| value_at(&desired, f).is_some();
        // A changed (or removed) field leaves the other managers: taken
        // (forced), or the batch is refused.
        let others = self.others(&touched, &|_| true, conflict);
        let mut mine: BTreeSet<String> = self
            .record
            .iter()
            .find(|e| e.manager == self.manager.name)
            .map(|e| e.fields.iter().cloned().collect())
            .unwrap_or_default();
        mine.retain(|f| !touched.contains(f) || present(f));
        mine.extend(touched.iter().filter(|f| present(f)).cloned());
        self.finish(
            others,
            entry(self.manager, mine.into_iter().collect(), now),
            Vec::new(),
        )
    }
}

impl Plan {
    /// The documents to write: each with the fields other managers own
    /// that it does not name set from the stored object (an Apply that
    /// merges); a document with none is written as it is.
    pub fn merge(
        &self,
        stored: &dyn Lookup,
        docs: Vec<Document>,
    ) -> Result<Vec<Document>, ApplyError> {
        let mut errors = Vec::new();
        let mut out = Vec::with_capacity(docs.len());
        for d in docs {
            let key = key_of(&d.manifest);
            let (Some(item), Some((_, meta))) = (self.items.get(&key), stored.find(&key)) else {
                out.push(d);
                continue;
            };
            if item.kept.is_empty() {
                out.push(d);
                continue;
            }
            let mut doc = d.manifest.to_json();
            for f in &item.kept {
                let Some(v) = value_at(meta, f) else {
                    continue;
                };
                let (path, k) = if let Some(k) = f.strip_prefix(SPEC) {
                    ("spec", k)
                } else if let Some(k) = f.strip_prefix(LABELS) {
                    ("labels", k)
                } else if let Some(k) = f.strip_prefix(ANNOTATIONS) {
                    ("annotations", k)
                } else {
                    continue;
                };
                let target = if path == "spec" {
                    &mut doc["spec"]
                } else {
                    &mut doc["metadata"][path]
                };
                if !target.is_object() {
                    *target = Value::Object(Default::default());
                }
                target[k] = v;
            }
            match Manifest::from_json(doc) {
                Ok(m) => out.push(d.with_manifest(m)),
                Err(e) => errors.push(d.error_at(
                    "",
                    format!("merged with the fields other managers own: {e}"),
                )),
            }
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(ApplyError::Invalid(errors))
        }
    }

    /// Records the plan for what was written (`results`, with the object
    /// of each written one in `ids`), in one statement: a record is
    /// written when it or its object changed, this manager's entry then
    /// stamped `now`.
    pub async fn record(
        mut self,
        tx: &mut dyn Tx,
        results: &[ApplyResult],
        ids: &[Uuid],
        now: DateTime<Utc>,
    ) -> Result<(), ApplyError> {
        // The new objects' first records apart: the cheapest bulk write.
        let (mut rows, mut new) = (Vec::new(), Vec::new());
        for (r, id) in results.iter().zip(ids) {
            let Some(kind) = Kind::parse(r.kind) else {
                continue;
            };
            let key = (kind, r.project.clone(), r.name.clone());
            let Some(mut item) = self.items.remove(&key) else {
                continue;
            };
            if r.action == Action::Unchanged && !item.changed {
                continue;
            }
            for e in &mut item.entries {
                if e.manager == self.manager.name {
                    e.time = now;
                }
            }
            let row = ManagedFields {
                kind: kind.as_str().to_string(),
                object_id: *id,
                entries: item.entries,
            };
            if r.action == Action::Created {
                new.push(row);
            } else {
                rows.push(row);
            }
        }
        tx.insert_managed_fields(&new).await?;
        tx.put_managed_fields(&rows).await?;
        Ok(())
    }
}

mod render;

use render::conflict_error;
pub use render::managed_fields_json;

#[cfg(test)]
mod tests;
