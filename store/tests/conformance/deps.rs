//! Conformance: task dependencies — links, the closure apply
//! reads, and the dispatch gate (`dispatchable_since`, the claim, the
//! gating pass, cancelled dependencies).

use super::*;

/// Project "deps" with tasks of these names (roots), committed.
async fn tasks(s: &dyn Store, names: &[&str]) -> (Project, Vec<WorkItem>) {
    let p = project("deps");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    let mut v = Vec::new();
    for n in names {
        v.push(tx.insert_work_item(&item(&p, None, n)).await.unwrap());
    }
    tx.commit().await.unwrap();
    (p, v)
}

async fn link(s: &dyn Store, task: &WorkItem, on: &[&WorkItem]) {
    let mut tx = s.begin().await.unwrap();
    let ids: Vec<Uuid> = on.iter().map(|w| w.id).collect();
    tx.set_dependencies(task.id, &ids).await.unwrap();
    tx.commit().await.unwrap();
}

async fn set_status(s: &dyn Store, w: &WorkItem, from: WorkItemStatus, to: WorkItemStatus) {
    let mut tx = s.begin().await.unwrap();
    tx.set_work_item_status(w.id, from, to, t(50))
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

fn pairs(v: &[pam_store::DependencyLink]) -> Vec<(Uuid, String)> {
    v.iter()
        .map(|l| (l.task_id, l.other.name.clone()))
        .collect()
}

pub async fn deps_set_list_and_checks(s: &dyn Store) {
    let (p, v) = tasks(s, &["a", "b", "c", "d"]).await;
    let (a, b, c, d) = (&v[0], &v[1], &v[2], &v[3]);
    link(s, c, &[b, a]).await;
    link(s, d, &[c]).await;
    let mut tx = s.begin().await.unwrap();
    let out = tx.dependencies_of(&[c.id, d.id]).await.unwrap();
    let mut want = vec![
        (c.id, "a".to_string()),
        (c.id, "b".to_string()),
        (d.id, "c".to_string()),
    ];
    want.sort();
    let mut got = pairs(&out);
    got.sort();
    assert_eq!(got, want);
    let into = tx.dependents_of(&[a.id, c.id]).await.unwrap();
    let mut got = pairs(&into);
    got.sort();
    let mut want = vec![(a.id, "c".to_string()), (c.id, "d".to_string())];
    want.sort();
    assert_eq!(got, want);
    // Replacing drops the old links.
    tx.set_dependencies(c.id, &[a.id]).await.unwrap();
    assert_eq!(
        pairs(&tx.dependencies_of(&[c.id]).await.unwrap()),
        [(c.id, "a".to_string())]
    );
    // Itself, another project's task, a missing task: refused.
    assert_err!(
        tx.set_dependencies(c.id, &[c.id]).await,
        StoreError::Invalid(_)
    );
    let other = project("other");
    tx.insert(&other).await.unwrap();
    let x = tx.insert_work_item(&item(&other, None, "x")).await.unwrap();
    assert_err!(
        tx.set_dependencies(c.id, &[x.id]).await,
        StoreError::Invalid(_)
    );
    assert_err!(
        tx.set_dependencies(c.id, &[Uuid::new_v4()]).await,
        StoreError::NotFound(_)
    );
    assert_err!(
        tx.set_dependencies(Uuid::new_v4(), &[a.id]).await,
        StoreError::NotFound(_)
    );
    tx.commit().await.unwrap();
    // Deleting a task removes its links both ways.
    let mut tx = s.begin().await.unwrap();
    assert!(tx.delete_work_item(c.id).await.unwrap());
    assert!(tx.dependents_of(&[a.id]).await.unwrap().is_empty());
    assert!(tx.dependencies_of(&[d.id]).await.unwrap().is_empty());
    assert_eq!(tx.list_work_items(p.id).await.unwrap().len(), 3);
    tx.commit().await.unwrap();
}

pub async fn deps_closure_follows_links(s: &dyn Store) {
    let (_, v) = tasks(s, &["a", "b", "c", "d", "e"]).await;
    let (a, b, c, d, e) = (&v[0], &v[1], &v[2], &v[3], &v[4]);
    link(s, a, &[b]).await;
    link(s, b, &[c, d]).await;
    link(s, e, &[a]).await; // not reachable from a
    let mut tx = s.begin().await.unwrap();
    let mut got = pairs(&tx.dependency_closure(&[a.id]).await.unwrap());
    got.sort();
    let mut want = vec![
        (a.id, "b".to_string()),
        (b.id, "c".to_string()),
        (b.id, "d".to_string()),
    ];
    want.sort();
    assert_eq!(got, want);
    assert!(tx.dependency_closure(&[c.id]).await.unwrap().is_empty());
    assert!(tx.dependency_closure(&[]).await.unwrap().is_empty());
}

pub async fn deps_gate_claims_and_refresh(s: &dyn Store) {
    let (_, v) = tasks(s, &["a", "b"]).await;
    let (a, b) = (&v[0], &v[1]);
    link(s, b, &[a]).await;
    let h = inserted_host(s, "h").await;
    let ra = run(a, "ra", t(1));
    let rb = run(b, "rb", t(2));
    insert_runs(s, &[ra.clone(), rb.clone()]).await;
    assert_eq!(get_run(s, ra.id).await.dispatchable_since, Some(t(1)));
    assert_eq!(get_run(s, rb.id).await.dispatchable_since, None);

    let mut tx = s.begin().await.unwrap();
    // The blocked run is neither claimed nor listed for the timeout.
    assert_eq!(
        ids(&tx.list_pending_runs(10).await.unwrap(), |r| r.id),
        [ra.id]
    );
    assert_eq!(
        ids(&tx.claim_runs(&h, 10, t(3)).await.unwrap(), |r| r.id),
        [ra.id]
    );
    // Nothing changes while a is not done.
    assert_eq!(
        tx.refresh_dispatchable(t(4)).await.unwrap(),
        pam_store::Gated::default()
    );
    tx.commit().await.unwrap();

    set_status(s, a, WorkItemStatus::Todo, WorkItemStatus::Done).await;
    let mut tx = s.begin().await.unwrap();
    // Still NULL until the gating pass marks when it became dispatchable.
    assert!(tx.claim_runs(&h, 10, t(5)).await.unwrap().is_empty());
    let gated = tx.refresh_dispatchable(t(6)).await.unwrap();
    assert_eq!(ids(&gated.unblocked, |r| r.id), [rb.id]);
    assert!(gated.blocked.is_empty());
    assert_eq!(gated.unblocked[0].dispatchable_since, Some(t(6)));
    assert_eq!(
        gated.unblocked[0].pending_since,
        t(2),
        "the seed's anchor is kept"
    );
    assert!(gated.unblocked[0].meta.resource_version > rb.meta.resource_version);
    // Idempotent.
    assert_eq!(
        tx.refresh_dispatchable(t(7)).await.unwrap(),
        pam_store::Gated::default()
    );
    let claimed = tx.claim_runs(&h, 10, t(8)).await.unwrap();
    assert_eq!(ids(&claimed, |r| r.id), [rb.id]);
    tx.commit().await.unwrap();
}

pub async fn deps_reopened_dependency_blocks_at_once(s: &dyn Store) {
    let (_, v) = tasks(s, &["a", "b"]).await;
    let (a, b) = (&v[0], &v[1]);
    set_status(s, a, WorkItemStatus::Todo, WorkItemStatus::Done).await;
    link(s, b, &[a]).await;
    let h = inserted_host(s, "h").await;
    let rb = run(b, "rb", t(2));
    insert_runs(s, std::slice::from_ref(&rb)).await;
    assert_eq!(get_run(s, rb.id).await.dispatchable_since, Some(t(2)));
    set_status(s, a, WorkItemStatus::Done, WorkItemStatus::Doing).await;
    let mut tx = s.begin().await.unwrap();
    // The claim checks the links itself: no dispatch before the pass.
    assert!(tx.claim_runs(&h, 10, t(3)).await.unwrap().is_empty());
    let gated = tx.refresh_dispatchable(t(4)).await.unwrap();
    assert_eq!(ids(&gated.blocked, |r| r.id), [rb.id]);
    assert_eq!(gated.blocked[0].dispatchable_since, None);
    assert!(tx.list_pending_runs(10).await.unwrap().is_empty());
    tx.commit().await.unwrap();
}

pub async fn deps_requeue_of_a_blocked_task(s: &dyn Store) {
    let (_, v) = tasks(s, &["a", "b"]).await;
    let (a, b) = (&v[0], &v[1]);
    let mut rb = run(b, "rb", t(1));
    rb.status = RunStatus::Failed;
    insert_runs(s, std::slice::from_ref(&rb)).await;
    link(s, b, &[a]).await;
    let mut tx = s.begin().await.unwrap();
    let r = tx.requeue_run(rb.id, 1, t(9)).await.unwrap();
    assert_eq!((r.pending_since, r.dispatchable_since), (t(9), None));
    tx.commit().await.unwrap();
    set_status(s, a, WorkItemStatus::Todo, WorkItemStatus::Done).await;
    let mut failed = get_run(s, rb.id).await;
    let mut tx = s.begin().await.unwrap();
    failed.id = Uuid::new_v4();
    failed.name = "rb2".into();
    failed.session_name = Run::session_name_for(failed.id);
    failed.status = RunStatus::Failed;
    failed.attempt = 1;
    tx.insert_run(&failed).await.unwrap();
    let r = tx.requeue_run(failed.id, 1, t(10)).await.unwrap();
    assert_eq!(r.dispatchable_since, Some(t(10)));
}

pub async fn deps_runs_waiting_on_cancelled(s: &dyn Store) {
    let (_, v) = tasks(s, &["a", "z", "b", "c"]).await;
    let (a, z, b, c) = (&v[0], &v[1], &v[2], &v[3]);
    link(s, b, &[z, a]).await;
    link(s, c, &[a]).await;
    let rb = run(b, "rb", t(1));
    let rc = run(c, "rc", t(2));
    insert_runs(s, &[rb.clone(), rc.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    assert!(tx.runs_waiting_on_cancelled(10).await.unwrap().is_empty());
    tx.commit().await.unwrap();
    set_status(s, z, WorkItemStatus::Todo, WorkItemStatus::Cancelled).await;
    set_status(s, a, WorkItemStatus::Todo, WorkItemStatus::Cancelled).await;
    let mut tx = s.begin().await.unwrap();
    let got = tx.runs_waiting_on_cancelled(10).await.unwrap();
    let mut want = vec![(rb.id, "a".to_string()), (rc.id, "a".to_string())];
    want.sort();
    let got: Vec<(Uuid, String)> = got.iter().map(|(r, w)| (r.id, w.name.clone())).collect();
    assert_eq!(
        got, want,
        "each run once, with the cancelled task of the smallest name"
    );
    assert_eq!(tx.runs_waiting_on_cancelled(1).await.unwrap().len(), 1);
}
