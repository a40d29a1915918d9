//! Conformance: projects.

use super::*;

pub async fn project_crud(s: &dyn Store) {
    let (b, a, c) = (project("b"), project("a"), project("c"));
    let mut tx = s.begin().await.unwrap();
    for p in [&b, &a, &c] {
        tx.insert(p).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get::<Project>(a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(
        tx.by_name::<Project>((), "b").await.unwrap(),
        Some(b.clone())
    );
    assert_eq!(tx.by_name::<Project>((), "zz").await.unwrap(), None);
    let slugs = names_of(tx.list::<Project>(()).await, |p| &p.slug);
    assert_eq!(slugs, ["a", "b", "c"]);

    let mut changed = a.clone();
    changed.name = "Renamed".into();
    changed.status = ProjectStatus::Archived;
    changed.slug = "ignored".into();
    changed.updated_at = t(5);
    let stored = tx.update(&changed, 1).await.unwrap();
    assert_eq!(stored.name, "Renamed");
    assert_eq!(stored.status, ProjectStatus::Archived);
    assert_eq!(stored.slug, "a", "the slug is not written by update");
    assert_eq!(stored.meta.resource_version, 2);
    assert_eq!(stored.updated_at, t(5));

    assert!(tx.delete::<Project>(c.id).await.unwrap());
    assert!(!tx.delete::<Project>(c.id).await.unwrap());
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get::<Project>(c.id).await.unwrap(), None);
    assert_eq!(tx.get::<Project>(a.id).await.unwrap(), Some(stored));
}

pub async fn project_slug_unique_and_tx_usable_after(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    tx.insert(&project("x")).await.unwrap();
    assert_err!(tx.insert(&project("x")).await, StoreError::AlreadyExists(_));
    // A failed insert leaves the transaction usable.
    tx.insert(&project("y")).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.list::<Project>(()).await.unwrap().len(), 2);
}

pub async fn project_update_guarded_by_resource_version(s: &dyn Store) {
    let p = project("p");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    let mut first = p.clone();
    first.description = "first".into();
    let v2 = tx.update(&first, 1).await.unwrap();
    assert_eq!(v2.meta.resource_version, 2);
    let mut stale = p.clone();
    stale.description = "stale".into();
    assert_err!(tx.update(&stale, 1).await, StoreError::Conflict(_));
    assert_err!(
        tx.update(&project("gone"), 1).await,
        StoreError::NotFound(_)
    );
    let v3 = tx.update(&stale, 2).await.unwrap();
    assert_eq!(v3.meta.resource_version, 3);
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let got = tx.get::<Project>(p.id).await.unwrap().unwrap();
    assert_eq!(got.description, "stale");
    assert_eq!(got.meta.resource_version, 3);
}

/// Every field of every record survives the store (row mapping, JSONB
/// labels/annotations, target shapes, optional columns).
pub async fn records_round_trip(s: &dyn Store) {
    let meta = Meta {
        spec: json!({"displayName": "X", "n": [1, 2]}),
        labels: labels_of(&[("team", "core"), ("tier", "1")]),
        annotations: labels_of(&[("note", "hello")]),
        generation: 3,
        resource_version: 7,
        observed_generation: 2,
        conditions: json!([{"type": "Ready", "status": "True"}]),
    };
    let mut p = project("rt");
    p.description = "desc".into();
    p.meta = meta.clone();
    p.updated_at = t(1);
    let mut w = item(&p, None, "w");
    w.kind = WorkItemKind::Subtask;
    w.status = WorkItemStatus::Doing;
    w.assignee = Some("ann".into());
    w.sort_order = 4;
    w.meta = meta.clone();
    let mut h = host("h1", &[("gpu", "yes")]);
    h.platform = Platform::Macos;
    h.token_fingerprint = Some("fp".into());
    h.status = HostStatus::Online;
    h.instance_id = Some(Uuid::new_v4());
    h.instance_suspect = true;
    h.instance_flagged_at = Some(t(2));
    h.last_seen_at = Some(t(3));
    h.capacity = 9;
    h.disabled = true;
    h.presented_instance_id = Some(Uuid::new_v4());
    h.meta.labels = labels_of(&[("team", "infra")]);
    h.worker_labels = labels_of(&[("worker.pam.dev/gpu", "a100")]);
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    let w_stored = tx.insert_work_item(&w).await.unwrap();
    tx.insert(&h).await.unwrap();
    let mut runs = Vec::new();
    for (i, target) in [
        Target::Any,
        Target::Host("h1".into()),
        Target::Selector(labels_of(&[("gpu", "yes"), ("os", "linux")])),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = run(&w_stored, &format!("r{i}"), t(10 + i as i64));
        r.target = target;
        r.meta = meta.clone();
        if i == 0 {
            r.host_id = Some(h.id);
            r.status = RunStatus::Failed;
            r.attempt = 3;
            r.last_progress_seq = Some(42);
            r.failure_reason = Some(FailureReason::HostLost);
            r.exit_code = Some(2);
            r.started_at = Some(t(11));
            r.finished_at = Some(t(12));
            r.max_attempts = 5;
            r.backoff_seconds = 1;
            r.backoff_max_seconds = 8;
            r.dispatch_timeout_seconds = Some(60);
            r.stop_requested = true;
            r.requeue_at = Some(t(13));
            r.eligible_host_seen = true;
            r.updated_at = t(14);
        }
        tx.insert_run(&r).await.unwrap();
        runs.push(r);
    }
    let tok = token("w1", TokenKind::Worker, "abc", 1);
    tx.insert_token(&tok).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get::<Project>(p.id).await.unwrap(), Some(p.clone()));
    let mut w_expected = w.clone();
    w_expected.path = short_id(w.id);
    assert_eq!(w_stored, w_expected);
    assert_eq!(tx.get_work_item(w.id).await.unwrap(), Some(w_expected));
    assert_eq!(tx.get::<Host>(h.id).await.unwrap(), Some(h.clone()));
    assert_eq!(tx.by_name::<Host>((), "h1").await.unwrap(), Some(h.clone()));
    for r in &runs {
        assert_eq!(tx.get_run(r.id).await.unwrap().as_ref(), Some(r));
    }
    assert_eq!(
        tx.get_run_by_name(p.id, "r1").await.unwrap().as_ref(),
        Some(&runs[1])
    );
    assert_eq!(tx.get_run_by_name(p.id, "nope").await.unwrap(), None);
    assert_eq!(tx.get_token_by_fingerprint("abc").await.unwrap(), Some(tok));
}
