//! The merge rule on one object, without a store.

use super::*;
use chrono::TimeZone;
use serde_json::json;

fn at(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(secs)
}

fn e(manager: &str, fields: &[&str]) -> ManagedEntry {
    ManagedEntry {
        manager: manager.into(),
        operation: "Apply".into(),
        time: at(0),
        fields: fields.iter().map(|f| f.to_string()).collect(),
    }
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A stored Task: title "A", labels team=web (applied by ci) and
/// tier=frontend (labelled by admin).
fn stored() -> Meta {
    Meta {
        spec: json!({"title": "A", "type": "task", "status": "todo"}),
        labels: labels(&[("team", "web"), ("tier", "frontend")]),
        ..Meta::default()
    }
}

fn record() -> Vec<ManagedEntry> {
    vec![
        e("apply:ci", &["spec.title", "metadata.labels.team"]),
        ManagedEntry {
            operation: "Update".into(),
            ..e("label:admin", &["metadata.labels.tier"])
        },
    ]
}

fn task(labels: &str) -> Manifest {
    let doc = format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t\n  project: p\n{labels}spec:\n  title: A\n"
    );
    pam_manifests::load::parse_documents("t.yaml", &doc).unwrap()[0]
        .manifest
        .clone()
}

fn stored_record<'a>(
    manager: &'a Manager,
    force: bool,
    stored: &'a Meta,
    record: &'a [ManagedEntry],
) -> StoredRecord<'a> {
    StoredRecord {
        manager,
        force,
        stored,
        record,
        spec: true,
    }
}

fn run_apply(
    who: &str,
    force: bool,
    m: &Manifest,
    named: &[&str],
) -> (Item, Vec<(String, String)>) {
    let manager = Manager {
        name: who.into(),
        operation: Operation::Apply,
        only: None,
    };
    let (st, rec) = (stored(), record());
    let mut conflicts = Vec::new();
    let item = stored_record(&manager, force, &st, &rec).apply(
        m,
        named.iter().map(|f| f.to_string()).collect(),
        at(9),
        &mut |f, by| conflicts.push((f, by)),
    );
    (item, conflicts)
}

#[test]
fn an_apply_keeps_what_others_own_and_drops_what_it_no_longer_names() {
    // ci applies without its team label: team goes (only ci owned it),
    // the label admin set stays.
    let (item, conflicts) = run_apply("apply:ci", false, &task(""), &["spec.title"]);
    assert!(conflicts.is_empty());
    assert_eq!(item.kept, ["metadata.labels.tier"]);
    let managers: Vec<(&str, &[String])> = item
        .entries
        .iter()
        .map(|e| (e.manager.as_str(), e.fields.as_slice()))
        .collect();
    assert_eq!(
        managers,
        [
            ("apply:ci", &["spec.title".to_string()][..]),
            ("label:admin", &["metadata.labels.tier".to_string()][..])
        ]
    );
    assert!(item.changed);
}

#[test]
fn another_value_for_a_field_another_manager_owns_is_a_conflict_unless_forced() {
    let m = task("  labels:\n    tier: backend\n");
    let named = ["spec.title", "metadata.labels.tier"];
    let (_, conflicts) = run_apply("apply:ci", false, &m, &named);
    assert_eq!(
        conflicts,
        [(
            "metadata.labels.tier".to_string(),
            "label:admin".to_string()
        )]
    );
    // Forced: ci takes it, admin's entry is gone (it owned nothing else).
    let (item, _) = run_apply("apply:ci", true, &m, &named);
    assert_eq!(item.entries.len(), 1);
    assert_eq!(item.entries[0].fields, named);
    // The same value: shared, no conflict.
    let m = task("  labels:\n    tier: frontend\n");
    let (item, conflicts) = run_apply("apply:ci", false, &m, &named);
    assert!(conflicts.is_empty());
    assert!(item
        .entries
        .iter()
        .all(|e| e.fields.contains(&"metadata.labels.tier".to_string())));
}

#[test]
fn an_update_owns_what_it_changes_and_conflicts_on_others_fields() {
    let manager = Manager::of_request(FieldManager::Label, "ops");
    let (st, rec) = (stored(), record());
    // A new label: ops owns it; nothing else moves; unchanged times kept.
    let m = task("  labels:\n    team: web\n    tier: frontend\n    env: prod\n");
    let mut conflicts = Vec::new();
    let item = stored_record(&manager, false, &st, &rec)
        .update(&m, at(9), &mut |f, by| conflicts.push((f, by)));
    assert!(conflicts.is_empty(), "{conflicts:?}");
    let ops = item
        .entries
        .iter()
        .find(|e| e.manager == "label:ops")
        .unwrap();
    assert_eq!(ops.fields, ["metadata.labels.env"]);
    assert!(item.kept.is_empty());
    // Removing admin's label: a conflict; forced, admin lets go of it.
    let m = task("  labels:\n    team: web\n");
    let item = stored_record(&manager, false, &st, &rec)
        .update(&m, at(9), &mut |f, by| conflicts.push((f, by)));
    assert_eq!(
        conflicts,
        [(
            "metadata.labels.tier".to_string(),
            "label:admin".to_string()
        )]
    );
    drop(item);
    let item = stored_record(&manager, true, &st, &rec).update(&m, at(9), &mut |_, _| {});
    assert!(item.entries.iter().all(|e| e.manager == "apply:ci"));
}

#[test]
fn a_token_never_conflicts_with_itself() {
    // admin labelled tier=frontend; admin's apply says backend: no
    // conflict, the label moves to admin's apply. ci2's would conflict.
    let m = task("  labels:\n    tier: backend\n");
    let named = ["spec.title", "metadata.labels.tier"];
    let (item, conflicts) = run_apply("apply:admin", false, &m, &named);
    assert!(conflicts.is_empty(), "{conflicts:?}");
    assert!(item.entries.iter().all(|e| e.manager != "label:admin"));
    let (_, conflicts) = run_apply("apply:ci2", false, &m, &named);
    assert_eq!(conflicts.len(), 1);
    assert_eq!(actor("source:admin"), None);
    assert_eq!(actor("edit:admin"), Some("admin"));
}

#[test]
fn the_conflict_names_fields_managers_and_the_way_out() {
    let key = (Kind::Task, Some("p".to_string()), "t".to_string());
    let ApplyError::FieldConflict(m) = conflict_error(vec![
        (
            key.clone(),
            "metadata.labels.tier".into(),
            "label:admin".into(),
        ),
        (
            key.clone(),
            "metadata.labels.tier".into(),
            "apply:ci".into(),
        ),
        (key, "spec.title".into(), "source:gops".into()),
    ]) else {
        panic!("a field conflict")
    };
    assert!(
        m.contains("Task p/t: metadata.labels.tier (owned by label:admin, apply:ci), spec.title (owned by source:gops)"),
        "{m}"
    );
    assert!(m.contains("--force-conflicts"), "{m}");
    assert!(m.contains("Source gops's manifests"), "{m}");
}
