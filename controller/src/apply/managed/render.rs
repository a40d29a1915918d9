//! What managed fields say: the conflict's words, the record as an
//! object shows it.

use std::collections::BTreeSet;

use pam_store::ManagedEntry;
use serde_json::Value;

use super::super::stored::ObjectKey;
use super::super::ApplyError;

fn object_ref((kind, project, name): &ObjectKey) -> String {
    match project {
        Some(p) => format!("{kind} {p}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// The 409 of a batch that would change fields other managers own: every
/// object, field and manager, and the ways out.
pub(super) fn conflict_error(conflicts: Vec<(ObjectKey, String, String)>) -> ApplyError {
    // Object → field → its managers, in the order found.
    type ByField = Vec<(String, Vec<String>)>;
    let mut by_object: Vec<(ObjectKey, ByField)> = Vec::new();
    let mut sources = BTreeSet::new();
    for (key, field, by) in conflicts {
        if let Some(s) = by.strip_prefix("source:") {
            sources.insert(s.to_string());
        }
        let at = match by_object.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                by_object.push((key, Vec::new()));
                by_object.len() - 1
            }
        };
        let fields = &mut by_object[at].1;
        match fields.iter_mut().find(|(f, _)| *f == field) {
            Some((_, managers)) => managers.push(by),
            None => fields.push((field, vec![by])),
        }
    }
    let objects: Vec<String> = by_object
        .iter()
        .map(|(k, fields)| {
            let fields: Vec<String> = fields
                .iter()
                .map(|(f, by)| format!("{f} (owned by {})", by.join(", ")))
                .collect();
            format!("{}: {}", object_ref(k), fields.join(", "))
        })
        .collect();
    let mut hint = String::from(
        "these fields hold other values set by their managers: apply with --force-conflicts to take them, or leave them out",
    );
    for s in sources {
        hint.push_str(&format!(", or change them in Source {s}'s manifests"));
    }
    // A big batch can conflict on every object: the first few name the
    // fields, the rest are counted (an error stays a readable size).
    let shown = objects.len().min(CONFLICTS_SHOWN);
    let mut listed = objects[..shown].join("; ");
    if objects.len() > shown {
        listed.push_str(&format!("; and {} more object(s)", objects.len() - shown));
    }
    ApplyError::FieldConflict(format!(
        "conflict with other field managers: {listed}; {hint}"
    ))
}

/// Objects a conflict names at most; the rest are counted.
const CONFLICTS_SHOWN: usize = 10;

/// The `metadata.managedFields` an object shows (`get -o yaml`,
/// `describe`): its record, kubectl's shape.
/// Oldest first, by the stored time (finer than the printed seconds): the
/// last entry is the last applier (`describe`'s Last Applied By).
pub fn managed_fields_json(entries: &[ManagedEntry]) -> Value {
    let mut entries: Vec<&ManagedEntry> = entries.iter().collect();
    entries.sort_by(|a, b| (a.time, &a.manager).cmp(&(b.time, &b.manager)));
    Value::Array(
        entries
            .into_iter()
            .map(|e| {
                serde_json::json!({
                    "manager": e.manager, "operation": e.operation,
                    "time": crate::clock::ts(e.time), "fields": e.fields,
                })
            })
            .collect(),
    )
}
