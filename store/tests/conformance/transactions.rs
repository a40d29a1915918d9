//! Conformance: transactions.

use super::*;

/// Every kind of write, made in a transaction that is then dropped, leaves
/// the store exactly as it was.
pub async fn rollback_on_drop(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let h = inserted_host(s, "h").await;
    let mut failed = run(&task, "failed", t(1));
    failed.status = RunStatus::Failed;
    let pending = run(&task, "pending", t(1));
    insert_runs(s, &[failed.clone(), pending.clone()]).await;
    let tok = token("admin", TokenKind::Operator, "fp", 1);
    let mut tx = s.begin().await.unwrap();
    tx.insert_token(&tok).await.unwrap();
    let child = tx
        .insert_work_item(&item(&p, Some(&task), "child"))
        .await
        .unwrap();
    tx.commit().await.unwrap();

    async fn snapshot(s: &dyn Store, p: &Project) -> String {
        let mut tx = s.begin().await.unwrap();
        format!(
            "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
            tx.list::<Project>(()).await.unwrap(),
            tx.list_work_items(p.id).await.unwrap(),
            tx.list_runs(&RunFilter::default()).await.unwrap(),
            tx.list::<Host>(()).await.unwrap(),
            tx.list_tokens().await.unwrap(),
            tx.events_after(0, 100).await.unwrap(),
        )
    }
    let before = snapshot(s, &p).await;

    let mut tx = s.begin().await.unwrap();
    tx.insert(&project("new")).await.unwrap();
    let mut p2 = p.clone();
    p2.name = "changed".into();
    tx.update(&p2, 1).await.unwrap();
    tx.insert_work_item(&item(&p, None, "new")).await.unwrap();
    tx.set_work_item_status(task.id, WorkItemStatus::Todo, WorkItemStatus::Doing, t(2))
        .await
        .unwrap();
    tx.reparent_work_item(child.id, None, t(2)).await.unwrap();
    tx.insert_run(&run(&task, "new", t(2))).await.unwrap();
    tx.requeue_run(failed.id, 1, t(2)).await.unwrap();
    tx.claim_runs(&h, 10, t(2)).await.unwrap();
    tx.advance_progress(pending.id, 1, 1).await.unwrap();
    assert_eq!(
        tx.insert_signal_markers(&[marker(pending.id, 1, "started")], t(2))
            .await
            .unwrap(),
        1
    );
    tx.insert(&host("h2", &[])).await.unwrap();
    tx.set_host_status(h.id, HostStatus::Registered, HostStatus::Online, t(2))
        .await
        .unwrap();
    tx.revoke_token(tok.id, t(2)).await.unwrap();
    tx.append_event("x", json!({}), t(2)).await.unwrap();
    tx.delete_work_item(task.id).await.unwrap();
    tx.delete::<Project>(p.id).await.unwrap();
    drop(tx);

    assert_eq!(snapshot(s, &p).await, before);
    // The signal mark was rolled back too.
    let mut tx = s.begin().await.unwrap();
    let (_, markers) = tx.lock_runs_with_signals(&[pending.id]).await.unwrap();
    assert!(markers.is_empty());
}

/// A fresh store serves (`/readyz`).
pub async fn store_is_ready(s: &dyn Store) {
    assert_eq!(s.ready().await, Ok(()));
}
