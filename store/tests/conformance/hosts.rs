//! Conformance: hosts.

use super::*;

pub async fn host_crud_and_update(s: &dyn Store) {
    let (b, a) = (host("b", &[]), host("a", &[("x", "1")]));
    insert_hosts(s, &[&b, &a]).await;
    let mut tx = s.begin().await.unwrap();
    assert_err!(
        tx.insert(&host("a", &[])).await,
        StoreError::AlreadyExists(_)
    );
    let names = names_of(tx.list::<Host>(()).await, |h| &h.name);
    assert_eq!(names, ["a", "b"]);
    let mut next = a.clone();
    next.last_seen_at = Some(t(5));
    next.instance_id = Some(Uuid::new_v4());
    next.capacity = 1;
    next.disabled = true;
    next.meta.labels = labels_of(&[("x", "2")]);
    next.worker_labels = labels_of(&[("worker.pam.dev/gpu", "no")]);
    next.updated_at = t(5);
    next.status = HostStatus::Online; // not written by update_host
    next.name = "renamed".into(); // nor this
    let got = tx.update(&next, 1).await.unwrap();
    assert_err!(tx.update(&next, 1).await, StoreError::Conflict(_));
    assert_err!(
        tx.update(&host("gone", &[]), 1).await,
        StoreError::NotFound(_)
    );
    tx.commit().await.unwrap();
    let mut want = next.clone();
    want.status = HostStatus::Registered;
    want.name = "a".into();
    want.meta.resource_version = 2;
    assert_eq!(got, want);
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.by_name::<Host>((), "a").await.unwrap(), Some(want));
    assert!(tx.delete::<Host>(b.id).await.unwrap());
    assert!(!tx.delete::<Host>(b.id).await.unwrap());
}

pub async fn host_status_guarded(s: &dyn Store) {
    let h = inserted_host(s, "h").await;
    let mut tx = s.begin().await.unwrap();
    assert_err!(
        tx.set_host_status(h.id, HostStatus::Registered, HostStatus::Offline, t(1))
            .await,
        StoreError::Illegal(_)
    );
    assert_err!(
        tx.set_host_status(h.id, HostStatus::Offline, HostStatus::Online, t(1))
            .await,
        StoreError::Conflict(_)
    );
    assert_err!(
        tx.set_host_status(
            Uuid::new_v4(),
            HostStatus::Registered,
            HostStatus::Online,
            t(1)
        )
        .await,
        StoreError::NotFound(_)
    );
    let got = tx
        .set_host_status(h.id, HostStatus::Registered, HostStatus::Online, t(2))
        .await
        .unwrap();
    assert_eq!(got.status, HostStatus::Online);
    assert_eq!(got.updated_at, t(2));
    assert_eq!(got.meta.resource_version, 2);
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get::<Host>(h.id).await.unwrap(), Some(got));
}

pub async fn list_silent_hosts(s: &dyn Store) {
    let mk = |name: &str, status, seen: Option<i64>| {
        let mut h = host(name, &[]);
        h.status = status;
        h.last_seen_at = seen.map(t);
        h
    };
    let old2 = mk("old2", HostStatus::Online, Some(20));
    let old1 = mk("old1", HostStatus::Online, Some(10));
    let fresh = mk("fresh", HostStatus::Online, Some(100));
    let edge = mk("edge", HostStatus::Online, Some(50));
    let offline = mk("offline", HostStatus::Offline, Some(5));
    let never = mk("never", HostStatus::Registered, None);
    insert_hosts(s, &[&old2, &old1, &fresh, &edge, &offline, &never]).await;
    let mut tx = s.begin().await.unwrap();
    let silent = tx.list_silent_hosts(t(50)).await.unwrap();
    assert_eq!(
        ids(&silent, |h| h.id),
        [old1.id, old2.id],
        "strictly before"
    );
}

pub async fn delete_host_refused_while_referenced(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let h = inserted_host(s, "h").await;
    let mut r = run(&task, "r", t(1));
    r.host_id = Some(h.id);
    r.status = RunStatus::Running;
    insert_runs(s, std::slice::from_ref(&r)).await;
    let mut tx = s.begin().await.unwrap();
    assert_err!(tx.delete::<Host>(h.id).await, StoreError::Invalid(_));
    assert!(tx.delete_run(r.id).await.unwrap());
    assert!(!tx.delete_run(r.id).await.unwrap());
    assert!(tx.delete::<Host>(h.id).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert!(tx.list::<Host>(()).await.unwrap().is_empty());
}

/// The heartbeat batch's reads and write: hosts by names, the
/// plain liveness write guarded per host by its version, and the live
/// runs of many hosts in `list_runs`' order.
pub async fn host_batch_reads_and_touch(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (a, b, c) = (host("a", &[]), host("b", &[]), host("c", &[]));
    insert_hosts(s, &[&a, &b, &c]).await;
    let mut runs = Vec::new();
    for (i, (h, status)) in [
        (&a, RunStatus::Running),
        (&b, RunStatus::Spawning),
        (&a, RunStatus::Exited),
        (&c, RunStatus::Running),
        (&a, RunStatus::Spawning),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = run(&task, &format!("r{i}"), t(i as i64));
        r.host_id = Some(h.id);
        r.status = status;
        runs.push(r);
    }
    insert_runs(s, &runs).await;
    let mut tx = s.begin().await.unwrap();
    let mut got = names_of(
        tx.get_hosts_by_names(&["c".into(), "a".into(), "nope".into()])
            .await,
        |h| &h.name,
    );
    got.sort();
    assert_eq!(got, ["a", "c"]);
    let live = tx.live_runs_on_hosts(&[a.id, b.id]).await.unwrap();
    assert_eq!(ids(&live, |r| r.id), [runs[0].id, runs[1].id, runs[4].id]);
    assert!(tx.live_runs_on_hosts(&[]).await.unwrap().is_empty());
    // b is not at version 7: left out, unwritten.
    let mut written = tx
        .touch_hosts(&[(a.id, 1), (b.id, 7), (c.id, 1)], t(9))
        .await
        .unwrap();
    written.sort();
    let mut want = vec![a.id, c.id];
    want.sort();
    assert_eq!(written, want);
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    for (h, seen, rv) in [(&a, Some(t(9)), 2), (&b, None, 1), (&c, Some(t(9)), 2)] {
        let got = tx.get::<Host>(h.id).await.unwrap().unwrap();
        let mut want = h.clone();
        want.last_seen_at = seen;
        want.meta.resource_version = rv;
        assert_eq!(got, want, "{}", h.name);
    }
}
