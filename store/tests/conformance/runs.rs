//! Conformance: runs.

use super::*;

pub async fn run_list_filters_and_order(s: &dyn Store) {
    let (p, t1) = seed(s).await;
    let q = project("q");
    let h = host("h", &[]);
    let mut tx = s.begin().await.unwrap();
    let t2 = tx.insert_work_item(&item(&p, None, "t2")).await.unwrap();
    tx.insert(&q).await.unwrap();
    let qt = tx.insert_work_item(&item(&q, None, "qt")).await.unwrap();
    tx.insert(&h).await.unwrap();
    tx.commit().await.unwrap();

    let r3 = run(&t1, "r3", t(3));
    let r1 = run(&t1, "r1", t(1));
    let mut r2 = run(&t2, "r2", t(2));
    r2.status = RunStatus::Running;
    r2.host_id = Some(h.id);
    let r4 = run(&qt, "r4", t(4));
    insert_runs(s, &[r3.clone(), r1.clone(), r2.clone(), r4.clone()]).await;

    let mut tx = s.begin().await.unwrap();
    let cases: Vec<(RunFilter, Vec<Uuid>)> = vec![
        (RunFilter::default(), vec![r1.id, r2.id, r3.id, r4.id]),
        (
            RunFilter {
                project_id: Some(p.id),
                ..Default::default()
            },
            vec![r1.id, r2.id, r3.id],
        ),
        (
            RunFilter {
                task_id: Some(t1.id),
                ..Default::default()
            },
            vec![r1.id, r3.id],
        ),
        (
            RunFilter {
                host_id: Some(h.id),
                ..Default::default()
            },
            vec![r2.id],
        ),
        (
            RunFilter {
                statuses: Some(vec![RunStatus::Pending]),
                ..Default::default()
            },
            vec![r1.id, r3.id, r4.id],
        ),
        (
            RunFilter {
                project_id: Some(p.id),
                statuses: Some(vec![RunStatus::Running, RunStatus::Failed]),
                ..Default::default()
            },
            vec![r2.id],
        ),
        (
            RunFilter {
                statuses: Some(vec![]),
                ..Default::default()
            },
            vec![],
        ),
    ];
    for (f, want) in cases {
        let got = tx.list_runs(&f).await.unwrap();
        assert_eq!(ids(&got, |r| r.id), want, "{f:?}");
    }
}

pub async fn run_name_unique_and_task_checks(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let q = project("q");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&q).await.unwrap();
    let qt = tx.insert_work_item(&item(&q, None, "qt")).await.unwrap();
    tx.insert_run(&run(&task, "r", t(1))).await.unwrap();
    assert_err!(
        tx.insert_run(&run(&task, "r", t(2))).await,
        StoreError::AlreadyExists(_)
    );
    // Same name in another project is fine.
    tx.insert_run(&run(&qt, "r", t(1))).await.unwrap();
    let mut wrong_project = run(&task, "w", t(1));
    wrong_project.project_id = q.id;
    assert_err!(tx.insert_run(&wrong_project).await, StoreError::Invalid(_));
    let mut no_task = run(&task, "n", t(1));
    no_task.task_id = Uuid::new_v4();
    assert_err!(tx.insert_run(&no_task).await, StoreError::NotFound(_));
    let mut no_host = run(&task, "nh", t(1));
    no_host.host_id = Some(Uuid::new_v4());
    assert_err!(tx.insert_run(&no_host).await, StoreError::NotFound(_));
    let mut bad = run(&task, "bad", t(1));
    bad.max_attempts = 0;
    assert_err!(tx.insert_run(&bad).await, StoreError::Invalid(_));
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let all = tx.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(all.len(), 2);
    assert!(tx.get_run_by_name(p.id, "r").await.unwrap().is_some());
}

pub async fn session_name_unique_per_host(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (h1, h2) = (host("h1", &[]), host("h2", &[]));
    insert_hosts(s, &[&h1, &h2]).await;
    let mut a = run(&task, "a", t(1));
    a.session_name = "pam-same".into();
    let mut b = run(&task, "b", t(1));
    b.session_name = "pam-same".into();
    // Both pending (host NULL): no collision.
    insert_runs(s, &[a.clone(), b.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    tx.transition_run(
        a.id,
        1,
        RunStatus::Pending,
        RunStatus::Spawning,
        &RunUpdate {
            host_id: Some(h1.id),
            ..Default::default()
        },
        t(2),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    // Another host: fine.
    let mut c = run(&task, "c", t(1));
    c.session_name = "pam-same".into();
    c.host_id = Some(h2.id);
    c.status = RunStatus::Spawning;
    insert_runs(s, &[c]).await;
    // The same host: refused.
    let mut d = run(&task, "d", t(1));
    d.session_name = "pam-same".into();
    d.host_id = Some(h1.id);
    d.status = RunStatus::Spawning;
    let mut tx = s.begin().await.unwrap();
    assert_err!(tx.insert_run(&d).await, StoreError::AlreadyExists(_));
}

pub async fn transition_run_guarded(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let h = inserted_host(s, "h").await;
    let r = run(&task, "r", t(1));
    insert_runs(s, std::slice::from_ref(&r)).await;

    let mut tx = s.begin().await.unwrap();
    let none = RunUpdate::default();
    let spawn = RunUpdate {
        host_id: Some(h.id),
        ..Default::default()
    };
    assert_err!(
        tx.transition_run(
            r.id,
            2,
            RunStatus::Pending,
            RunStatus::Spawning,
            &spawn,
            t(2)
        )
        .await,
        StoreError::Conflict(_)
    );
    assert_err!(
        tx.transition_run(
            r.id,
            1,
            RunStatus::Spawning,
            RunStatus::Running,
            &none,
            t(2)
        )
        .await,
        StoreError::Conflict(_)
    );
    assert_err!(
        tx.transition_run(r.id, 1, RunStatus::Pending, RunStatus::Running, &none, t(2))
            .await,
        StoreError::Illegal(_)
    );
    assert_err!(
        tx.transition_run(
            Uuid::new_v4(),
            1,
            RunStatus::Pending,
            RunStatus::Spawning,
            &none,
            t(2)
        )
        .await,
        StoreError::NotFound(_)
    );
    let got = tx
        .transition_run(
            r.id,
            1,
            RunStatus::Pending,
            RunStatus::Spawning,
            &spawn,
            t(2),
        )
        .await
        .unwrap();
    assert_eq!(got.status, RunStatus::Spawning);
    assert_eq!(got.host_id, Some(h.id));
    assert_eq!(got.updated_at, t(2));
    assert_eq!(got.meta.resource_version, 2);
    let started = RunUpdate {
        started_at: Some(t(3)),
        ..Default::default()
    };
    tx.transition_run(
        r.id,
        1,
        RunStatus::Spawning,
        RunStatus::Running,
        &started,
        t(3),
    )
    .await
    .unwrap();
    let failed = RunUpdate {
        exit_code: Some(3),
        failure_reason: Some(FailureReason::SessionLost),
        failure_message: Some("cwd /x is not a directory".into()),
        finished_at: Some(t(4)),
        requeue_at: Some(t(14)),
        ..Default::default()
    };
    tx.transition_run(
        r.id,
        1,
        RunStatus::Running,
        RunStatus::Failed,
        &failed,
        t(4),
    )
    .await
    .unwrap();
    assert_err!(
        tx.transition_run(r.id, 1, RunStatus::Failed, RunStatus::Running, &none, t(5))
            .await,
        StoreError::Illegal(_)
    );
    tx.commit().await.unwrap();

    let got = get_run(s, r.id).await;
    assert_eq!(got.status, RunStatus::Failed);
    assert_eq!(
        got.host_id,
        Some(h.id),
        "None fields leave columns as they are"
    );
    assert_eq!(got.started_at, Some(t(3)));
    assert_eq!(got.finished_at, Some(t(4)));
    assert_eq!(got.exit_code, Some(3));
    assert_eq!(got.failure_reason, Some(FailureReason::SessionLost));
    assert_eq!(
        got.failure_message.as_deref(),
        Some("cwd /x is not a directory")
    );
    assert_eq!(got.requeue_at, Some(t(14)));
    assert_eq!(got.meta.resource_version, 4);
    assert_eq!(got.attempt, 1);
}

pub async fn requeue_run_resets_attempt(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let h = inserted_host(s, "h").await;
    let mut r = run(&task, "r", t(1));
    r.status = RunStatus::Failed;
    r.host_id = Some(h.id);
    r.started_at = Some(t(2));
    r.finished_at = Some(t(3));
    r.exit_code = Some(1);
    r.last_progress_seq = Some(9);
    r.failure_reason = Some(FailureReason::HostLost);
    r.failure_message = Some("why".into());
    r.requeue_at = Some(t(4));
    r.eligible_host_seen = true;
    let used = pam_store::Usage {
        input_tokens: 10,
        cached_input_tokens: 2,
        output_tokens: 3,
        cost_micro_usd: 4,
    };
    r.usage.add_step(used);
    insert_runs(s, std::slice::from_ref(&r)).await;

    let mut tx = s.begin().await.unwrap();
    assert_err!(tx.requeue_run(r.id, 2, t(5)).await, StoreError::Conflict(_));
    assert_err!(
        tx.requeue_run(Uuid::new_v4(), 1, t(5)).await,
        StoreError::NotFound(_)
    );
    let got = tx.requeue_run(r.id, 1, t(50)).await.unwrap();
    assert_err!(
        tx.requeue_run(r.id, 1, t(51)).await,
        StoreError::Conflict(_)
    );
    tx.commit().await.unwrap();

    let mut want = r.clone();
    want.status = RunStatus::Pending;
    want.attempt = 2;
    want.host_id = None;
    want.started_at = None;
    want.finished_at = None;
    want.exit_code = None;
    want.last_progress_seq = None;
    want.failure_reason = None;
    want.failure_message = None;
    want.requeue_at = None;
    // The new attempt starts from zero; the total keeps the rest.
    want.usage.attempt = Default::default();
    assert_eq!(want.usage.total, used);
    want.eligible_host_seen = false;
    want.pending_since = t(50);
    want.dispatchable_since = Some(t(50));
    want.updated_at = t(50);
    want.meta.resource_version = 2;
    assert_eq!(got, want);
    assert_eq!(get_run(s, r.id).await, want);
    assert_eq!(want.created_at, t(1), "created_at never changes");
}

pub async fn update_run_spec_guarded(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let r = run(&task, "r", t(1));
    insert_runs(s, std::slice::from_ref(&r)).await;
    let mut next = r.clone();
    next.target = Target::Selector(labels_of(&[("a", "b")]));
    next.max_attempts = 3;
    next.backoff_seconds = 2;
    next.backoff_max_seconds = 20;
    next.dispatch_timeout_seconds = Some(30);
    next.stop_requested = true;
    next.meta.generation = 2;
    next.updated_at = t(9);
    // Not operator-owned: ignored.
    next.status = RunStatus::Running;
    next.prompt = "other".into();
    next.attempt = 7;
    let mut tx = s.begin().await.unwrap();
    let got = tx.update_run_spec(&next, 1).await.unwrap();
    assert_err!(tx.update_run_spec(&next, 1).await, StoreError::Conflict(_));
    let mut gone = next.clone();
    gone.id = Uuid::new_v4();
    assert_err!(tx.update_run_spec(&gone, 1).await, StoreError::NotFound(_));
    tx.commit().await.unwrap();
    let mut want = next.clone();
    want.status = r.status;
    want.prompt = r.prompt.clone();
    want.attempt = r.attempt;
    want.meta.resource_version = 2;
    assert_eq!(got, want);
    assert_eq!(get_run(s, r.id).await, want);
}
