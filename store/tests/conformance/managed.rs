//! Conformance: managed fields — one record per object, read
//! and written in bulk, an emptied record removed.

use super::*;
use pam_store::{ManagedEntry, ManagedFields};

fn entry(manager: &str, at: i64, fields: &[&str]) -> ManagedEntry {
    ManagedEntry {
        manager: manager.to_string(),
        operation: if manager.starts_with("apply:") {
            "Apply"
        } else {
            "Update"
        }
        .to_string(),
        time: t(at),
        fields: fields.iter().map(|f| f.to_string()).collect(),
    }
}

pub async fn managed_fields_bulk_round_trip(s: &dyn Store) {
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let task = |id: Uuid, entries: Vec<ManagedEntry>| ManagedFields {
        kind: "Task".to_string(),
        object_id: id,
        entries,
    };
    let ra = task(
        a,
        vec![
            entry("apply:ci", 1, &["spec.title", "metadata.labels.team"]),
            entry("label:admin", 2, &["metadata.labels.tier"]),
        ],
    );
    let rb = task(b, vec![entry("source:gops", 3, &["spec.title"])]);
    let mut tx = s.begin().await.unwrap();
    // A new object's record in bulk (COPY), an upsert for the other.
    tx.insert_managed_fields(std::slice::from_ref(&ra))
        .await
        .unwrap();
    tx.put_managed_fields(std::slice::from_ref(&rb))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    // Inserting a record that exists is refused (the caller inserts only
    // for the objects it created).
    let mut tx = s.begin().await.unwrap();
    assert!(tx
        .insert_managed_fields(std::slice::from_ref(&ra))
        .await
        .is_err());
    drop(tx);

    let mut tx = s.begin().await.unwrap();
    let keys = [
        ("Task".to_string(), a),
        ("Task".to_string(), b),
        ("Task".to_string(), c),
        // The same id under another kind is another object.
        ("Run".to_string(), a),
    ];
    let mut got = tx.managed_fields_of(&keys).await.unwrap();
    got.sort_by_key(|r| if r.object_id == a { 0 } else { 1 });
    // Entries keep their order, times their value.
    assert_eq!(got, [ra.clone(), rb.clone()]);

    // A second write replaces the record; an empty one removes it.
    let ra2 = task(a, vec![entry("label:admin", 4, &["metadata.labels.tier"])]);
    tx.put_managed_fields(&[ra2.clone(), task(b, vec![])])
        .await
        .unwrap();
    assert_eq!(tx.managed_fields_of(&keys).await.unwrap(), [ra2]);
    // Rolled back with its transaction.
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    let mut got = tx.managed_fields_of(&keys).await.unwrap();
    got.sort_by_key(|r| if r.object_id == a { 0 } else { 1 });
    assert_eq!(got, [ra, rb]);
    assert!(tx.managed_fields_of(&[]).await.unwrap().is_empty());
    tx.put_managed_fields(&[]).await.unwrap();
}

/// An applyset's record: none until written, then what was written last.
pub async fn applyset_records_round_trip(s: &dyn Store) {
    use pam_store::ApplySetRecord;
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.applyset("web").await.unwrap(), None);
    let r = ApplySetRecord {
        name: "web".into(),
        kinds: vec!["Secret".into(), "Task".into()],
        projects: vec!["web".into()],
    };
    tx.put_applyset(&r, t(1)).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.applyset("web").await.unwrap(), Some(r.clone()));
    let fewer = ApplySetRecord {
        kinds: vec!["Task".into()],
        projects: vec![],
        ..r
    };
    tx.put_applyset(&fewer, t(2)).await.unwrap();
    assert_eq!(tx.applyset("web").await.unwrap(), Some(fewer));
    assert_eq!(tx.applyset("other").await.unwrap(), None);
}
