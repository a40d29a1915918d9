//! Conformance: sources (GitOps) — the Source rows, their status, and the
//! inventory with one owner per object.

use super::*;

pub fn source(name: &str) -> Source {
    Source {
        id: Uuid::new_v4(),
        name: name.to_string(),
        meta: Meta {
            spec: json!({"path": "/srv/x", "projects": ["p"]}),
            ..Meta::default()
        },
        status: SourceStatus::default(),
        created_at: t(0),
        updated_at: t(0),
    }
}

fn owned(s: &Source, kind: &str, id: Uuid, name: &str) -> SourceObject {
    SourceObject {
        source_id: s.id,
        kind: kind.to_string(),
        object_id: id,
        project: (kind != "Project").then(|| "seed".to_string()),
        name: name.to_string(),
        declared: json!({"spec": {"title": name}}),
        file: "tree.yaml".to_string(),
    }
}

pub async fn source_crud_and_status(s: &dyn Store) {
    let (a, b) = (source("b-src"), source("a-src"));
    let mut tx = s.begin().await.unwrap();
    tx.insert(&a).await.unwrap();
    tx.insert(&b).await.unwrap();
    assert_err!(
        tx.insert(&source("a-src")).await,
        StoreError::AlreadyExists(_)
    );
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let got = tx.by_name::<Source>((), "b-src").await.unwrap().unwrap();
    assert_eq!(got.id, a.id);
    assert_eq!(got.meta.spec, a.meta.spec);
    assert_eq!(got.status.sync, pam_manifests::kinds::SyncState::Unknown);
    assert_eq!(
        got.status.health,
        pam_manifests::kinds::HealthState::Unknown
    );
    assert_eq!(got.status.errors, json!([]));
    assert_eq!(tx.get::<Source>(b.id).await.unwrap().unwrap().name, "a-src");
    let names = names_of(tx.list::<Source>(()).await, |s| &s.name);
    assert_eq!(names, ["a-src", "b-src"]);

    // Spec writes are guarded by resource_version.
    let mut edit = got.clone();
    edit.meta.spec = json!({"path": "/srv/y", "projects": ["p"]});
    edit.meta.generation = 2;
    let stored = tx.update(&edit, got.meta.resource_version).await.unwrap();
    assert_eq!(stored.meta.resource_version, got.meta.resource_version + 1);
    assert_eq!(stored.meta.spec["path"], "/srv/y");
    assert_err!(
        tx.update(&edit, got.meta.resource_version).await,
        StoreError::Conflict(_)
    );

    // A sync request is cleared only by a status write that saw it.
    let req = tx.request_source_sync(a.id, t(10)).await.unwrap();
    assert_eq!(req.status.sync_requested_at, Some(t(10)));
    let mut st = req.clone();
    st.status = SourceStatus {
        revision: Some("abc".into()),
        attempted_revision: Some("abd".into()),
        last_synced_at: Some(t(11)),
        last_attempt_at: Some(t(12)),
        sync: pam_manifests::kinds::SyncState::Failed,
        sync_message: "bad".into(),
        health: pam_manifests::kinds::HealthState::Degraded,
        health_message: "1 run failed".into(),
        errors: json!([{"file": "a.yaml", "line": 3, "message": "x"}]),
        drift: json!([{"kind": "Task", "name": "t", "fields": ["spec.title"]}]),
        departed: json!([{"kind": "Run", "project": "p", "name": "r0", "sync": "Pruned"}]),
        sync_requested_at: Some(t(9)),
    };
    let written = tx.write_source_status(&st, true).await.unwrap();
    assert_eq!(
        written.status.sync_requested_at,
        Some(t(10)),
        "a newer request stays"
    );
    assert_eq!(written.status.sync, pam_manifests::kinds::SyncState::Failed);
    assert_eq!(written.status.errors, st.status.errors);
    assert_eq!(written.status.drift, st.status.drift);
    assert_eq!(written.status.departed, st.status.departed);
    assert_eq!(written.status.revision.as_deref(), Some("abc"));
    assert_eq!(
        written.meta.spec, req.meta.spec,
        "status writes leave the spec"
    );
    st.status.sync_requested_at = Some(t(10));
    let written = tx.write_source_status(&st, true).await.unwrap();
    assert_eq!(written.status.sync_requested_at, None);
    // A sync state outside Unknown|Synced|OutOfSync|Failed cannot be
    // written: the status is typed (SyncState), and the table's CHECK
    // stays as the database's own guard.
    tx.commit().await.unwrap();
}

pub async fn source_inventory_has_one_owner(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let r = run(&task, "r1", t(1));
    insert_runs(s, std::slice::from_ref(&r)).await;
    let (a, b) = (source("a"), source("b"));
    let gone = Uuid::new_v4();
    let mut tx = s.begin().await.unwrap();
    tx.insert(&a).await.unwrap();
    tx.insert(&b).await.unwrap();
    let rows = vec![
        owned(&a, "Project", p.id, "seed"),
        owned(&a, "Task", task.id, "task"),
        owned(&a, "Run", r.id, "r1"),
        owned(&a, "Task", gone, "gone"),
    ];
    assert_eq!(tx.put_source_objects(&rows).await.unwrap(), 4);
    // Another Source cannot take them; its own new rows are written.
    let other = Uuid::new_v4();
    let n = tx
        .put_source_objects(&[
            owned(&b, "Task", task.id, "task"),
            owned(&b, "Task", other, "o"),
        ])
        .await
        .unwrap();
    assert_eq!(n, 1);
    let counts = tx.count_source_objects(&[a.id, b.id]).await.unwrap();
    assert_eq!(counts.len(), 2, "{counts:?}");
    assert_eq!((counts[&a.id], counts[&b.id]), (4, 1));
    let only_b = tx.count_source_objects(&[b.id]).await.unwrap();
    assert_eq!(only_b.into_iter().collect::<Vec<_>>(), [(b.id, 1)]);
    // Updating an owned row (same Source) is a write.
    let mut again = owned(&a, "Task", task.id, "task");
    again.declared = json!({"spec": {"title": "new"}});
    assert_eq!(tx.put_source_objects(&[again]).await.unwrap(), 1);
    let owners = tx
        .owners_of(&[
            ("Task".into(), task.id),
            ("Task".into(), other),
            ("Run".into(), Uuid::new_v4()),
        ])
        .await
        .unwrap();
    let mut by: Vec<(Uuid, Uuid)> = owners.iter().map(|o| (o.object_id, o.source_id)).collect();
    by.sort();
    let mut want = vec![(task.id, a.id), (other, b.id)];
    want.sort();
    assert_eq!(by, want);

    let inv = tx.list_source_objects(a.id).await.unwrap();
    let names: Vec<&str> = inv.iter().map(|o| o.name.as_str()).collect();
    assert_eq!(names, ["seed", "r1", "gone", "task"]);
    assert_eq!(inv[3].declared, json!({"spec": {"title": "new"}}));

    let objs = tx.owned_objects(a.id).await.unwrap();
    assert_eq!(objs.len(), 4);
    let by_name = |n: &str| objs.iter().find(|o| o.owner.name == n).unwrap();
    assert_eq!(by_name("seed").meta.as_ref().unwrap().spec, p.meta.spec);
    assert_eq!(
        by_name("task").meta.as_ref().unwrap().resource_version,
        task.meta.resource_version
    );
    assert!(by_name("gone").meta.is_none());
    assert_eq!(by_name("r1").run_status, Some(RunStatus::Pending));
    assert_eq!(by_name("task").run_status, None);
    // A task's own status, for its health.
    assert_eq!(by_name("task").task_status, Some(task.status));
    assert_eq!(by_name("r1").task_status, None);
    assert_eq!(by_name("gone").task_status, None);
    // The owned runs alone (health): the run that exists, with its status.
    assert_eq!(
        tx.owned_runs(a.id).await.unwrap(),
        [("r1".to_string(), RunStatus::Pending)]
    );
    assert!(tx.owned_runs(b.id).await.unwrap().is_empty());

    // Removing rows touches only the named Source's.
    tx.delete_source_objects(a.id, &[("Task".into(), gone), ("Task".into(), other)])
        .await
        .unwrap();
    assert_eq!(tx.list_source_objects(a.id).await.unwrap().len(), 3);
    assert_eq!(tx.list_source_objects(b.id).await.unwrap().len(), 1);
    let counts = tx.count_source_objects(&[a.id, b.id]).await.unwrap();
    assert_eq!((counts[&a.id], counts[&b.id]), (3, 1));
    // Deleting a Source drops its inventory, not the objects.
    assert!(tx.delete::<Source>(a.id).await.unwrap());
    assert!(tx.list_source_objects(a.id).await.unwrap().is_empty());
    assert!(!tx
        .count_source_objects(&[a.id])
        .await
        .unwrap()
        .contains_key(&a.id));
    assert!(tx.get_work_item(task.id).await.unwrap().is_some());
    assert_eq!(
        tx.put_source_objects(&[owned(&b, "Task", task.id, "task")])
            .await
            .unwrap(),
        1
    );
    tx.commit().await.unwrap();
}
