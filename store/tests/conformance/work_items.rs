//! Conformance: work items.

use super::*;

fn is_short(seg: &str) -> bool {
    seg.len() == 8 && seg.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
}

pub async fn work_item_paths(s: &dyn Store) {
    let p = project("p");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    let mut root = item(&p, None, "root");
    root.path = "bogus".into();
    let root = tx.insert_work_item(&root).await.unwrap();
    let child = tx
        .insert_work_item(&item(&p, Some(&root), "child"))
        .await
        .unwrap();
    let grand = tx
        .insert_work_item(&item(&p, Some(&child), "grand"))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    assert_eq!(root.path, short_id(root.id));
    assert_eq!(
        child.path,
        format!("{}/{}", short_id(root.id), short_id(child.id))
    );
    assert_eq!(
        grand.path,
        format!(
            "{}/{}/{}",
            short_id(root.id),
            short_id(child.id),
            short_id(grand.id)
        )
    );
    assert!(grand.path.split('/').all(is_short), "{}", grand.path);
    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        tx.get_work_item(grand.id).await.unwrap(),
        Some(grand.clone())
    );
    assert_eq!(
        tx.get_work_item_by_name(p.id, "child").await.unwrap(),
        Some(child.clone())
    );
    let listed = tx.list_work_items(p.id).await.unwrap();
    assert_eq!(
        ids(&listed, |w| w.id),
        [root.id, child.id, grand.id],
        "ordered by path"
    );
}

/// The bulk insert apply uses: same paths and rows as one-by-one inserts,
/// parents stored or earlier in the batch, the same refusals.
pub async fn insert_work_items_batch(s: &dyn Store) {
    let (p, stored) = seed(s).await;
    let q = project("q");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&q).await.unwrap();
    tx.commit().await.unwrap();
    let a = item(&p, Some(&stored), "a");
    let b = item(&p, Some(&a), "b");
    let mut c = item(&p, None, "c");
    c.path = "bogus".into();
    c.kind = WorkItemKind::Epic;
    c.meta.labels = labels_of(&[("bench", "x")]);
    c.meta.spec = json!({"title": "c"});
    let mut tx = s.begin().await.unwrap();
    assert!(tx.insert_work_items(Vec::new()).await.unwrap().is_empty());
    let rows = tx
        .insert_work_items(vec![a.clone(), b.clone(), c.clone()])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(ids(&rows, |w| w.id), [a.id, b.id, c.id], "input order");
    assert_eq!(rows[0].path, format!("{}/{}", stored.path, short_id(a.id)));
    assert_eq!(rows[1].path, format!("{}/{}", rows[0].path, short_id(b.id)));
    assert_eq!(rows[2].path, short_id(c.id));
    assert_eq!(rows[2].kind, WorkItemKind::Epic);
    assert_eq!(rows[2].meta.labels, c.meta.labels);
    assert_eq!(rows[2].meta.spec, c.meta.spec);
    let mut tx = s.begin().await.unwrap();
    for w in &rows {
        assert_eq!(tx.get_work_item(w.id).await.unwrap().as_ref(), Some(w));
    }
    drop(tx);
    // Refusals: an unknown parent, a parent in another project, a taken
    // name — each an error; the caller rolls back.
    let ghost = item(&p, None, "ghost");
    let mut tx = s.begin().await.unwrap();
    assert_err!(
        tx.insert_work_items(vec![item(&p, None, "ok"), item(&p, Some(&ghost), "orphan")])
            .await,
        StoreError::Invalid(_) | StoreError::NotFound(_)
    );
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    assert_err!(
        tx.insert_work_items(vec![item(&q, Some(&stored), "x")])
            .await,
        StoreError::Invalid(_)
    );
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    assert_err!(
        tx.insert_work_items(vec![item(&p, None, "fresh"), item(&p, None, "a")])
            .await,
        StoreError::AlreadyExists(_)
    );
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        tx.list_work_items(p.id).await.unwrap().len(),
        4,
        "nothing of the refused batches was committed"
    );
}

pub async fn work_item_parent_and_name_checks(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let (p, q) = projects_p_q(tx.as_mut()).await;
    let in_q = tx.insert_work_item(&item(&q, None, "a")).await.unwrap();
    let mut cross = item(&p, None, "cross");
    cross.parent_id = Some(in_q.id);
    assert_err!(tx.insert_work_item(&cross).await, StoreError::Invalid(_));
    let mut orphan = item(&p, None, "orphan");
    orphan.parent_id = Some(Uuid::new_v4());
    assert_err!(tx.insert_work_item(&orphan).await, StoreError::Invalid(_));
    assert_err!(
        tx.insert_work_item(&item(&project("nope"), None, "x"))
            .await,
        StoreError::NotFound(_)
    );
    tx.insert_work_item(&item(&p, None, "a")).await.unwrap();
    assert_err!(
        tx.insert_work_item(&item(&p, None, "a")).await,
        StoreError::AlreadyExists(_)
    );
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.list_work_items(p.id).await.unwrap().len(), 1);
    assert_eq!(tx.list_work_items(q.id).await.unwrap().len(), 1);
}

/// a{b{d,e},c} plus another root f and another project.
async fn tree(s: &dyn Store) -> (Project, Vec<WorkItem>) {
    let mut tx = s.begin().await.unwrap();
    let (p, q) = projects_p_q(tx.as_mut()).await;
    let a = tx.insert_work_item(&item(&p, None, "a")).await.unwrap();
    let b = tx.insert_work_item(&item(&p, Some(&a), "b")).await.unwrap();
    let mut c = item(&p, Some(&a), "c");
    c.sort_order = 2;
    let c = tx.insert_work_item(&c).await.unwrap();
    let d = tx.insert_work_item(&item(&p, Some(&b), "d")).await.unwrap();
    let e = tx.insert_work_item(&item(&p, Some(&b), "e")).await.unwrap();
    let f = tx.insert_work_item(&item(&p, None, "f")).await.unwrap();
    let qa = tx.insert_work_item(&item(&q, None, "a")).await.unwrap();
    tx.insert_work_item(&item(&q, Some(&qa), "b"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    (p, vec![a, b, c, d, e, f])
}

pub async fn subtree_prefix_equals_recursive(s: &dyn Store) {
    let (_, items) = tree(s).await;
    let [a, b, c, d, e, f] = &items[..] else {
        unreachable!()
    };
    let mut tx = s.begin().await.unwrap();
    for (root, expected) in [
        (a, vec![a, b, c, d, e]),
        (b, vec![b, d, e]),
        (d, vec![d]),
        (f, vec![f]),
    ] {
        let by_prefix = tx.subtree(root.id).await.unwrap();
        let by_cte = tx.subtree_recursive(root.id).await.unwrap();
        assert_eq!(by_prefix, by_cte, "subtree of {}", root.name);
        let mut want: Vec<&WorkItem> = expected;
        want.sort_by(|x, y| x.path.cmp(&y.path));
        assert_eq!(ids(&by_prefix, |w| w.id), ids(&want, |w| w.id));
    }
    assert_err!(tx.subtree(Uuid::new_v4()).await, StoreError::NotFound(_));
    assert_err!(
        tx.subtree_recursive(Uuid::new_v4()).await,
        StoreError::NotFound(_)
    );
}

pub async fn reparent_rewrites_descendant_paths(s: &dyn Store) {
    let p = project("p");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    let r1 = tx.insert_work_item(&item(&p, None, "r1")).await.unwrap();
    let r2 = tx.insert_work_item(&item(&p, None, "r2")).await.unwrap();
    let x = tx
        .insert_work_item(&item(&p, Some(&r1), "x"))
        .await
        .unwrap();
    let y = tx.insert_work_item(&item(&p, Some(&x), "y")).await.unwrap();
    let z = tx.insert_work_item(&item(&p, Some(&y), "z")).await.unwrap();
    let sib = tx
        .insert_work_item(&item(&p, Some(&r1), "sib"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let sx = short_id(x.id);
    let (sy, sz) = (short_id(y.id), short_id(z.id));

    let mut tx = s.begin().await.unwrap();
    let moved = tx
        .reparent_work_item(x.id, Some(r2.id), t(9))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    assert_eq!(moved.parent_id, Some(r2.id));
    assert_eq!(moved.meta.resource_version, 2);
    assert_eq!(moved.updated_at, t(9));
    let base = format!("{}/{sx}", r2.path);
    assert_eq!(moved.path, base);

    let mut tx = s.begin().await.unwrap();
    let path = |w: Option<WorkItem>| w.unwrap().path;
    assert_eq!(
        path(tx.get_work_item(y.id).await.unwrap()),
        format!("{base}/{sy}")
    );
    assert_eq!(
        path(tx.get_work_item(z.id).await.unwrap()),
        format!("{base}/{sy}/{sz}")
    );
    assert_eq!(path(tx.get_work_item(sib.id).await.unwrap()), sib.path);
    assert_eq!(path(tx.get_work_item(r1.id).await.unwrap()), r1.path);
    assert_eq!(
        tx.subtree(r2.id).await.unwrap(),
        tx.subtree_recursive(r2.id).await.unwrap()
    );
    assert_eq!(tx.subtree(r1.id).await.unwrap().len(), 2, "r1 and sib");

    // And back to the root.
    let moved = tx.reparent_work_item(x.id, None, t(10)).await.unwrap();
    assert_eq!(moved.parent_id, None);
    assert_eq!(moved.path, sx);
    assert_eq!(
        path(tx.get_work_item(z.id).await.unwrap()),
        format!("{sx}/{sy}/{sz}")
    );
    assert_eq!(
        tx.subtree(x.id).await.unwrap(),
        tx.subtree_recursive(x.id).await.unwrap()
    );
}

pub async fn reparent_refuses_cycle_self_and_cross_project(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let (p, q) = projects_p_q(tx.as_mut()).await;
    let a = tx.insert_work_item(&item(&p, None, "a")).await.unwrap();
    let b = tx.insert_work_item(&item(&p, Some(&a), "b")).await.unwrap();
    let c = tx.insert_work_item(&item(&p, Some(&b), "c")).await.unwrap();
    let other = tx.insert_work_item(&item(&q, None, "o")).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    for (id, parent) in [
        (a.id, c.id),     // at depth: a → b → c → a
        (a.id, b.id),     // direct child
        (b.id, b.id),     // self
        (a.id, other.id), // another project
        (a.id, Uuid::new_v4()),
    ] {
        assert_err!(
            tx.reparent_work_item(id, Some(parent), t(1)).await,
            StoreError::Invalid(_)
        );
    }
    assert_err!(
        tx.reparent_work_item(Uuid::new_v4(), None, t(1)).await,
        StoreError::NotFound(_)
    );
    // Nothing was written.
    for w in [&a, &b, &c] {
        assert_eq!(tx.get_work_item(w.id).await.unwrap().as_ref(), Some(w));
    }
}

pub async fn work_item_status_guarded(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let mut tx = s.begin().await.unwrap();
    let w = tx
        .set_work_item_status(task.id, WorkItemStatus::Todo, WorkItemStatus::Doing, t(1))
        .await
        .unwrap();
    assert_eq!(w.status, WorkItemStatus::Doing);
    assert_eq!(w.meta.resource_version, 2);
    assert_eq!(w.updated_at, t(1));
    assert_err!(
        tx.set_work_item_status(task.id, WorkItemStatus::Todo, WorkItemStatus::Done, t(2))
            .await,
        StoreError::Conflict(_)
    );
    tx.set_work_item_status(
        task.id,
        WorkItemStatus::Doing,
        WorkItemStatus::Cancelled,
        t(3),
    )
    .await
    .unwrap();
    assert_err!(
        tx.set_work_item_status(
            task.id,
            WorkItemStatus::Cancelled,
            WorkItemStatus::Done,
            t(4)
        )
        .await,
        StoreError::Illegal(_)
    );
    assert_err!(
        tx.set_work_item_status(
            Uuid::new_v4(),
            WorkItemStatus::Todo,
            WorkItemStatus::Doing,
            t(4)
        )
        .await,
        StoreError::NotFound(_)
    );
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let w = tx.get_work_item(task.id).await.unwrap().unwrap();
    assert_eq!(w.status, WorkItemStatus::Cancelled);
    assert_eq!(w.meta.resource_version, 3, "the refusals wrote nothing");
    assert_eq!(w.updated_at, t(3));
}

pub async fn work_item_update_guarded(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let mut tx = s.begin().await.unwrap();
    let mut next = task.clone();
    next.title = "new title".into();
    next.assignee = Some("bob".into());
    next.sort_order = 7;
    next.meta.generation = 2;
    next.meta.labels = labels_of(&[("k", "v")]);
    next.updated_at = t(5);
    // Fields update_work_item must not touch:
    next.status = WorkItemStatus::Done;
    next.kind = WorkItemKind::Epic;
    next.path = "elsewhere".into();
    next.parent_id = Some(Uuid::new_v4());
    next.name = "renamed".into();
    let got = tx.update_work_item(&next, 1).await.unwrap();
    assert_eq!(got.title, "new title");
    assert_eq!(got.assignee.as_deref(), Some("bob"));
    assert_eq!(got.sort_order, 7);
    assert_eq!(got.meta.generation, 2);
    assert_eq!(got.meta.labels, labels_of(&[("k", "v")]));
    assert_eq!(got.meta.resource_version, 2);
    assert_eq!(got.updated_at, t(5));
    assert_eq!(
        (got.status, got.kind, &got.path, got.parent_id, &got.name),
        (task.status, task.kind, &task.path, None, &task.name)
    );
    assert_err!(tx.update_work_item(&next, 1).await, StoreError::Conflict(_));
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        tx.get_work_item_by_name(p.id, "task").await.unwrap(),
        Some(got)
    );
}

pub async fn delete_project_cascades(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let (_, q_task) = other_project(s, "other").await;
    let mut tx = s.begin().await.unwrap();
    let child = tx
        .insert_work_item(&item(&p, Some(&task), "child"))
        .await
        .unwrap();
    let r = run(&child, "r", t(1));
    let qr = run(&q_task, "r", t(1));
    tx.insert_run(&r).await.unwrap();
    tx.insert_run(&qr).await.unwrap();
    assert_eq!(
        tx.insert_signal_markers(&[marker(r.id, 1, "started")], t(2))
            .await
            .unwrap(),
        1
    );
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert!(tx.delete::<Project>(p.id).await.unwrap());
    assert_eq!(tx.get_work_item(task.id).await.unwrap(), None);
    assert_eq!(tx.get_work_item(child.id).await.unwrap(), None);
    assert_eq!(tx.get_run(r.id).await.unwrap(), None);
    assert!(tx.get_run(qr.id).await.unwrap().is_some());
    assert!(tx.get_work_item(q_task.id).await.unwrap().is_some());
    tx.commit().await.unwrap();

    // The processed signal went with the run: recreating the run (same id)
    // and marking the same signal is a first time again.
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    let task = tx.insert_work_item(&task).await.unwrap();
    let mut again = r.clone();
    again.task_id = task.id;
    tx.insert_run(&again).await.unwrap();
    assert_eq!(
        tx.insert_signal_markers(&[marker(r.id, 1, "started")], t(3))
            .await
            .unwrap(),
        1
    );
}

pub async fn delete_work_item_cascades(s: &dyn Store) {
    let (p, a) = seed(s).await;
    let mut tx = s.begin().await.unwrap();
    let b = tx.insert_work_item(&item(&p, Some(&a), "b")).await.unwrap();
    let c = tx.insert_work_item(&item(&p, Some(&b), "c")).await.unwrap();
    let rc = run(&c, "rc", t(1));
    let ra = run(&a, "ra", t(1));
    tx.insert_run(&rc).await.unwrap();
    tx.insert_run(&ra).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert!(tx.delete_work_item(b.id).await.unwrap());
    assert!(!tx.delete_work_item(b.id).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get_work_item(c.id).await.unwrap(), None);
    assert_eq!(tx.get_run(rc.id).await.unwrap(), None);
    assert_eq!(
        ids(&tx.list_work_items(p.id).await.unwrap(), |w| w.id),
        [a.id]
    );
    assert!(tx.get_run(ra.id).await.unwrap().is_some());
}
