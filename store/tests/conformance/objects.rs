//! Conformance: the objects of generically stored kinds —
//! names unique per kind and scope, reads by kind, the guarded update
//! with the status, deletion with the project.

use super::*;
use pam_store::Object;

pub fn object(kind: &str, project: Option<Uuid>, name: &str) -> Object {
    Object {
        id: Uuid::new_v4(),
        kind: kind.to_string(),
        project_id: project,
        name: name.to_string(),
        meta: Meta {
            spec: json!({"rules": [{"verbs": ["get"], "kinds": ["runs"]}]}),
            ..Meta::default()
        },
        status: json!({}),
        created_at: t(0),
        updated_at: t(0),
    }
}

pub async fn objects_keyed_by_kind_scope_and_name(s: &dyn Store) {
    let p = project("web");
    let a = object("Role", None, "b-role");
    let b = object("Role", None, "a-role");
    // The same name in another kind or another scope is another object.
    let other_kind = object("Gadget", None, "a-role");
    let scoped = object("Role", Some(p.id), "a-role");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    for o in [&a, &b, &other_kind, &scoped] {
        tx.insert(o).await.unwrap();
    }
    assert_err!(
        tx.insert(&object("Role", None, "a-role")).await,
        StoreError::AlreadyExists(_)
    );
    assert_err!(
        tx.insert(&object("Role", Some(p.id), "a-role")).await,
        StoreError::AlreadyExists(_)
    );
    assert_err!(
        tx.insert(&object("Role", Some(Uuid::new_v4()), "x")).await,
        StoreError::NotFound(_)
    );
    // The transaction is still usable after the refusals.
    tx.insert(&object("Role", None, "c-role")).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let names = names_of(tx.list::<Object>(("Role".into(), None)).await, |o| &o.name);
    assert_eq!(names, ["a-role", "b-role", "c-role"]);
    let names = names_of(tx.list::<Object>(("Role".into(), Some(p.id))).await, |o| {
        &o.name
    });
    assert_eq!(names, ["a-role"]);
    let names = names_of(tx.list::<Object>(("Gadget".into(), None)).await, |o| {
        &o.name
    });
    assert_eq!(names, ["a-role"]);
    assert!(tx
        .list::<Object>(("Nothing".into(), None))
        .await
        .unwrap()
        .is_empty());
    let got = tx
        .by_name::<Object>(("Role".into(), None), "a-role")
        .await
        .unwrap();
    assert_eq!(got.as_ref().map(|o| o.id), Some(b.id));
    assert_eq!(got.unwrap(), b, "round-trips whole");
    let got = tx
        .by_name::<Object>(("Role".into(), Some(p.id)), "a-role")
        .await
        .unwrap();
    assert_eq!(got.map(|o| o.id), Some(scoped.id));
    let got = tx
        .by_name::<Object>(("Gadget".into(), None), "b-role")
        .await
        .unwrap();
    assert!(got.is_none());
    assert_eq!(tx.get::<Object>(a.id).await.unwrap(), Some(a.clone()));
    assert!(tx.get::<Object>(Uuid::new_v4()).await.unwrap().is_none());
    let inside = ids(&tx.objects_in_project(p.id).await.unwrap(), |o| o.id);
    assert_eq!(inside, [scoped.id]);
}

pub async fn object_update_guarded_and_deleted_with_project(s: &dyn Store) {
    let p = project("web");
    let a = object("Role", None, "reader");
    let scoped = object("Role", Some(p.id), "local");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    tx.insert(&a).await.unwrap();
    tx.insert(&scoped).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let mut changed = a.clone();
    changed.meta.spec = json!({"rules": []});
    changed.meta.generation = 2;
    changed.status = json!({"note": "seen"});
    changed.updated_at = t(5);
    let written = tx.update(&changed, 1).await.unwrap();
    assert_eq!(written.meta.resource_version, 2);
    assert_eq!(written.meta.spec, json!({"rules": []}));
    assert_eq!(written.status, json!({"note": "seen"}));
    assert_eq!(written.updated_at, t(5));
    // A stale version is a Conflict naming the object; a gone one NotFound.
    match tx.update(&changed, 1).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("role reader"), "{m}"),
        other => panic!("expected a Conflict, got {:?}", other.map(|_| "Ok(..)")),
    }
    let mut gone = object("Role", None, "gone");
    gone.meta.resource_version = 1;
    assert_err!(tx.update(&gone, 1).await, StoreError::NotFound(_));
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get::<Object>(a.id).await.unwrap(), Some(written));
    assert!(tx.delete::<Object>(a.id).await.unwrap());
    assert!(!tx.delete::<Object>(a.id).await.unwrap());
    assert!(tx.delete::<Project>(p.id).await.unwrap());
    assert!(tx.get::<Object>(scoped.id).await.unwrap().is_none());
    tx.commit().await.unwrap();
}
