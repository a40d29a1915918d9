//! Field ownership, server-side-apply style: the fields a Source's
//! manifest sets are owned by the Source; the fields it omits belong to
//! operators (a task's status moved on the board, say) and are never drift.
//!
//! Granularity: top-level `spec` fields, and label and annotation keys. A
//! field the Source declared before and no longer declares is released —
//! removed, so it falls back to its default — as when a field is deleted
//! from a server-side-applied configuration that alone managed it.
//!
//! It sits in apply because both sides use it: the push side refuses a
//! change to fields a Source owns ([`refuse_owned_changes`], a 409 unless
//! `forceConflicts`), and the sync loop merges and detects drift.

use std::collections::HashMap;

use pam_manifests::kinds::{Kind, Manifest};
use pam_store::prelude::*;
use pam_store::{Labels, Meta, Source, SourceObject};
use serde_json::{json, Map, Value};
use uuid::Uuid;

use super::stored::{stored_objects, ObjectKey};
use super::{Action, ApplyError, ApplyResult};
use crate::rules::meta::Desired;

/// What a Source's manifest declares of one object, as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Declared {
    pub spec: Map<String, Value>,
    pub labels: Map<String, Value>,
    pub annotations: Map<String, Value>,
}

fn object(v: Option<&Value>) -> Map<String, Value> {
    v.and_then(Value::as_object).cloned().unwrap_or_default()
}

impl Declared {
    /// From a manifest document as written (`{apiVersion, kind, metadata,
    /// spec}`).
    pub fn of_document(doc: &Value) -> Declared {
        let meta = doc.get("metadata");
        Declared {
            spec: object(doc.get("spec")),
            labels: object(meta.and_then(|m| m.get("labels"))),
            annotations: object(meta.and_then(|m| m.get("annotations"))),
        }
    }

    /// As kept in the inventory (`source_objects.declared`).
    pub fn to_json(&self) -> Value {
        self.clone().into_json()
    }

    /// [`Declared::to_json`] without copying (no serializer round trip).
    pub fn into_json(self) -> Value {
        let mut m = Map::with_capacity(3);
        m.insert("spec".into(), Value::Object(self.spec));
        m.insert("labels".into(), Value::Object(self.labels));
        m.insert("annotations".into(), Value::Object(self.annotations));
        Value::Object(m)
    }

    pub fn from_json(v: &Value) -> Declared {
        Declared {
            spec: object(v.get("spec")),
            labels: object(v.get("labels")),
            annotations: object(v.get("annotations")),
        }
    }
}

fn overlay(
    stored: Map<String, Value>,
    prev: Option<&Map<String, Value>>,
    now: &Map<String, Value>,
) -> Map<String, Value> {
    let mut out = stored;
    if let Some(prev) = prev {
        for k in prev.keys() {
            if !now.contains_key(k) {
                out.remove(k);
            }
        }
    }
    for (k, v) in now {
        out.insert(k.clone(), v.clone());
    }
    out
}

fn labels_map(l: &Labels) -> Map<String, Value> {
    l.iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect()
}

/// The document the Source applies for an object: what is stored (the
/// operators' fields), with the fields the Source declared before and no
/// longer declares removed, and the fields it declares now set. `doc` is
/// the Source's document (apiVersion, kind, metadata name and project
/// kept); `stored` is None for an object that does not exist yet, which
/// gets the document as written.
pub fn merged_document(doc: &Value, stored: Option<&Desired>, prev: Option<&Declared>) -> Value {
    let Some(stored) = stored else {
        return doc.clone();
    };
    let now = Declared::of_document(doc);
    let spec = overlay(object(Some(&stored.spec)), prev.map(|p| &p.spec), &now.spec);
    let labels = overlay(
        labels_map(&stored.labels),
        prev.map(|p| &p.labels),
        &now.labels,
    );
    let annotations = overlay(
        labels_map(&stored.annotations),
        prev.map(|p| &p.annotations),
        &now.annotations,
    );
    let mut out = doc.clone();
    out["spec"] = Value::Object(spec);
    let meta = out
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
        .expect("a manifest has metadata");
    meta.insert("labels".into(), Value::Object(labels));
    meta.insert("annotations".into(), Value::Object(annotations));
    // The Source's desired state is the version it declares: a stored
    // resourceVersion is not a precondition here.
    meta.remove("resourceVersion");
    out
}

/// The owned fields of a stored object that differ from what the Source
/// would write (`effective`: the merged document with its defaults
/// applied): `spec.title`, `metadata.labels.team`, … — drift.
pub fn drifted_fields(stored: &Desired, effective: &Desired, declared: &Declared) -> Vec<String> {
    let mut out = Vec::new();
    for k in declared.spec.keys() {
        if stored.spec.get(k) != effective.spec.get(k) {
            out.push(format!("spec.{k}"));
        }
    }
    for k in declared.labels.keys() {
        if stored.labels.get(k) != effective.labels.get(k) {
            out.push(format!("metadata.labels.{k}"));
        }
    }
    for k in declared.annotations.keys() {
        if stored.annotations.get(k) != effective.annotations.get(k) {
            out.push(format!("metadata.annotations.{k}"));
        }
    }
    out
}

/// The document a Source declares for one of its inventory rows.
pub fn declared_document(row: &SourceObject) -> Value {
    let declared = Declared::from_json(&row.declared);
    let mut metadata = json!({
        "name": row.name, "labels": declared.labels, "annotations": declared.annotations,
    });
    if let Some(p) = &row.project {
        metadata["project"] = json!(p);
    }
    json!({"apiVersion": pam_manifests::kinds::API_VERSION, "kind": row.kind,
           "metadata": metadata, "spec": declared.spec})
}

/// The owned fields of a stored object that differ from what its Source
/// declares (drift); the fields its manifests omit are never drift.
pub fn owned_drift(row: &SourceObject, stored: &Meta) -> Vec<String> {
    let declared = Declared::from_json(&row.declared);
    let now = Desired::stored(stored);
    let merged = merged_document(&declared_document(row), Some(&now), Some(&declared));
    match Manifest::from_json(merged) {
        Ok(m) => drifted_fields(&now, &Desired::of(&m), &declared),
        // The stored object no longer types with the declared fields
        // over it: every declared field is in question.
        Err(_) => declared.spec.keys().map(|k| format!("spec.{k}")).collect(),
    }
}

/// The push side: refuses a batch that changed fields a Source owns (a
/// conflict naming the Source, the object and the fields), as
/// server-side apply does without `--force-conflicts`. Called after the
/// batch is written in `tx`, before the commit: the stored values are the
/// ones the batch would leave.
pub(super) async fn refuse_owned_changes(
    tx: &mut dyn Tx,
    results: &[ApplyResult],
) -> Result<(), ApplyError> {
    let keys: Vec<ObjectKey> = results
        .iter()
        .filter(|r| r.action == Action::Configured)
        .filter_map(|r| Some((Kind::parse(r.kind)?, r.project.clone(), r.name.clone())))
        .collect();
    if keys.is_empty() {
        return Ok(());
    }
    let stored = stored_objects(tx, &keys).await?;
    let ids: Vec<(String, Uuid)> = stored
        .iter()
        .map(|((kind, _, _), o)| (kind.as_str().to_string(), o.id))
        .collect();
    let owners = tx.owners_of(&ids).await?;
    if owners.is_empty() {
        return Ok(());
    }
    let by_id: HashMap<Uuid, &Meta> = stored.values().map(|o| (o.id, &o.meta)).collect();
    let mut problems = Vec::new();
    for row in &owners {
        let Some(meta) = by_id.get(&row.object_id) else {
            continue;
        };
        let fields = owned_drift(row, meta);
        if fields.is_empty() {
            continue;
        }
        let source = match tx.get::<Source>(row.source_id).await? {
            Some(s) => s.name,
            None => row.source_id.to_string(),
        };
        let object = match &row.project {
            Some(p) => format!("{} {p}/{}", row.kind, row.name),
            None => format!("{} {}", row.kind, row.name),
        };
        problems.push(format!(
            "{object}: {} owned by Source {source} (declared in {})",
            fields.join(", "),
            row.file
        ));
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(ApplyError::FieldConflict(format!(
        "conflict with a Source: {}; change the Source's manifests, or apply with --force-conflicts to take the fields (the Source then reports drift)",
        problems.join("; ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored() -> Desired {
        let mut labels = Labels::new();
        labels.insert("team".into(), "web".into());
        labels.insert("op".into(), "x".into());
        Desired {
            spec: json!({"title": "A", "status": "doing", "assignee": "bo", "type": "task"}),
            labels,
            annotations: Labels::new(),
        }
    }

    fn doc(spec: Value) -> Value {
        json!({"apiVersion": "pam.dev/v1", "kind": "Task",
               "metadata": {"name": "t", "project": "p", "labels": {"team": "api"}},
               "spec": spec})
    }

    #[test]
    fn the_source_sets_its_fields_and_keeps_the_operators() {
        let d = doc(json!({"title": "B"}));
        let m = merged_document(&d, Some(&stored()), None);
        assert_eq!(
            m["spec"],
            json!({"title": "B", "status": "doing", "assignee": "bo", "type": "task"})
        );
        assert_eq!(m["metadata"]["labels"], json!({"team": "api", "op": "x"}));
        // A new object is the document as written.
        assert_eq!(merged_document(&d, None, None), d);
    }

    #[test]
    fn a_field_no_longer_declared_is_released() {
        let prev = Declared::of_document(&doc(json!({"title": "B", "assignee": "bo"})));
        let m = merged_document(&doc(json!({"title": "B"})), Some(&stored()), Some(&prev));
        assert_eq!(
            m["spec"],
            json!({"title": "B", "status": "doing", "type": "task"})
        );
    }

    #[test]
    fn drift_is_an_owned_field_that_differs() {
        let declared = Declared::of_document(&doc(json!({"title": "B"})));
        let mut effective = stored();
        effective.spec["title"] = json!("B");
        effective.labels.insert("team".into(), "api".into());
        let fields = drifted_fields(&stored(), &effective, &declared);
        assert_eq!(fields, ["spec.title", "metadata.labels.team"]);
        // The status differs too, but the Source does not declare it.
        effective.spec["status"] = json!("todo");
        assert_eq!(drifted_fields(&stored(), &effective, &declared).len(), 2);
        assert!(drifted_fields(&effective, &effective, &declared).is_empty());
    }
}
