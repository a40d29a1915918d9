//! Conformance: dispatch — claims, the pending and requeue lists, live-run counts.

use super::*;

pub async fn claim_runs_by_target(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let h1 = host("h1", &[("gpu", "yes"), ("os", "linux")]);
    let h2 = host("h2", &[]);
    insert_hosts(s, &[&h1, &h2]).await;
    let any = run(&task, "any", t(1));
    let mut to_h1 = run(&task, "to-h1", t(2));
    to_h1.target = Target::Host("h1".into());
    let mut to_h2 = run(&task, "to-h2", t(3));
    to_h2.target = Target::Host("h2".into());
    let mut gpu = run(&task, "gpu", t(4));
    gpu.target = Target::Selector(labels_of(&[("gpu", "yes")]));
    let mut no_gpu = run(&task, "no-gpu", t(5));
    no_gpu.target = Target::Selector(labels_of(&[("gpu", "no")]));
    let mut both = run(&task, "both", t(6));
    both.target = Target::Selector(labels_of(&[("gpu", "yes"), ("os", "mac")]));
    insert_runs(
        s,
        &[
            any.clone(),
            to_h1.clone(),
            to_h2.clone(),
            gpu.clone(),
            no_gpu.clone(),
            both.clone(),
        ],
    )
    .await;

    let mut tx = s.begin().await.unwrap();
    let c1 = tx.claim_runs(&h1, 10, t(7)).await.unwrap();
    assert_eq!(ids(&c1, |r| r.id), [any.id, to_h1.id, gpu.id]);
    for r in &c1 {
        assert_eq!(r.status, RunStatus::Spawning);
        assert_eq!(r.host_id, Some(h1.id));
        assert_eq!(r.updated_at, t(7));
        assert_eq!(r.session_name, Run::session_name_for(r.id));
    }
    let c2 = tx.claim_runs(&h2, 10, t(8)).await.unwrap();
    assert_eq!(ids(&c2, |r| r.id), [to_h2.id]);
    tx.commit().await.unwrap();
    let pending = {
        let mut tx = s.begin().await.unwrap();
        tx.list_pending_runs(10).await.unwrap()
    };
    assert_eq!(ids(&pending, |r| r.id), [no_gpu.id, both.id]);
    assert_eq!(get_run(s, gpu.id).await.host_id, Some(h1.id));
}

/// A host's one label set — metadata.labels with the labels it
/// brings over them — is what selectors match: a label given only in
/// metadata selects, and the host's own value wins a conflict.
pub async fn claim_runs_match_the_hosts_one_label_set(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let mut h = host("h", &[("os", "linux")]);
    h.meta.labels = labels_of(&[("pool", "fast"), ("os", "macos")]);
    insert_hosts(s, &[&h]).await;
    let mut fast = run(&task, "fast", t(1));
    fast.target = Target::Selector(labels_of(&[("pool", "fast"), ("os", "linux")]));
    let mut mac = run(&task, "mac", t(2));
    mac.target = Target::Selector(labels_of(&[("os", "macos")]));
    insert_runs(s, &[fast.clone(), mac.clone()]).await;
    assert_eq!(h.labels(), labels_of(&[("os", "linux"), ("pool", "fast")]));
    let mut tx = s.begin().await.unwrap();
    let claimed = tx.claim_runs(&h, 10, t(3)).await.unwrap();
    assert_eq!(ids(&claimed, |r| r.id), [fast.id]);
    tx.commit().await.unwrap();
}

/// What a worker reports for itself lives under
/// `worker.pam.dev/` and satisfies only a selector naming that key; a
/// selector on an operator label (`secure: "true"`) is met by an
/// operator's label alone, and an operator key stored in the worker's
/// namespace (before validation refused it) counts for nothing.
pub async fn claim_runs_keep_worker_reported_labels_apart(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let mut reporter = host("reporter", &[]);
    reporter.worker_labels = labels_of(&[("worker.pam.dev/secure", "true")]);
    reporter.meta.labels = labels_of(&[("worker.pam.dev/gpu", "yes")]);
    let operator_set = host("operator-set", &[("secure", "true")]);
    insert_hosts(s, &[&reporter, &operator_set]).await;
    // Stored and read back as is, in both stores.
    let mut tx = s.begin().await.unwrap();
    let read = tx.get::<Host>(reporter.id).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    assert_eq!(read.worker_labels, reporter.worker_labels);
    assert_eq!(
        read.labels(),
        labels_of(&[("worker.pam.dev/secure", "true")])
    );

    let mut secure = run(&task, "secure", t(1));
    secure.target = Target::Selector(labels_of(&[("secure", "true")]));
    let mut trusted = run(&task, "trusted", t(2));
    trusted.target = Target::Selector(labels_of(&[("worker.pam.dev/secure", "true")]));
    let mut stray = run(&task, "stray", t(3));
    stray.target = Target::Selector(labels_of(&[("worker.pam.dev/gpu", "yes")]));
    insert_runs(s, &[secure.clone(), trusted.clone(), stray.clone()]).await;
    for r in [&secure, &trusted, &stray] {
        assert_eq!(
            r.target.matches(&read),
            r.id == trusted.id,
            "{} on the reporter",
            r.name
        );
    }

    let mut tx = s.begin().await.unwrap();
    let by_reporter = tx.claim_runs(&read, 10, t(4)).await.unwrap();
    assert_eq!(ids(&by_reporter, |r| r.id), [trusted.id]);
    let by_operator_set = tx.claim_runs(&operator_set, 10, t(5)).await.unwrap();
    assert_eq!(ids(&by_operator_set, |r| r.id), [secure.id]);
    tx.commit().await.unwrap();
    assert_eq!(get_run(s, stray.id).await.status, RunStatus::Pending);
}

/// A host gets only runs whose provider it reported, at the
/// version `spec.providerVersion` asks for; a host that never reported
/// capabilities (an older worker) gets any provider's runs but meets no
/// version requirement. Both stores, the Rust predicate and the SQL.
pub async fn claim_runs_match_the_hosts_providers_and_versions(s: &dyn Store) {
    use pam_manifests::protocol::{Capabilities, ProviderCapability};
    let caps = |ps: &[(&str, Option<&str>)]| {
        Some(Capabilities {
            providers: ps
                .iter()
                .map(|(n, v)| ProviderCapability {
                    name: n.to_string(),
                    version: v.map(str::to_string),
                })
                .collect(),
            workspace_free_bytes: Some(1 << 30),
            workspace_min_free_bytes: None,
            ..Capabilities::default()
        })
    };
    let (_, task) = seed(s).await;
    let mut new_claude = host("new-claude", &[]);
    new_claude.capabilities = caps(&[("claude", Some("2.1.0")), ("exec", None)]);
    let mut old_claude = host("old-claude", &[]);
    old_claude.capabilities = caps(&[("claude", Some("1.4.2")), ("exec", None)]);
    let mut exec_only = host("exec-only", &[]);
    exec_only.capabilities = caps(&[("exec", None)]);
    let legacy = host("legacy", &[]);
    insert_hosts(s, &[&new_claude, &old_claude, &exec_only, &legacy]).await;
    // Stored and read back as is.
    let mut tx = s.begin().await.unwrap();
    let read = tx.get::<Host>(new_claude.id).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    assert_eq!(read.capabilities, new_claude.capabilities);

    let with_req = |name: &str, at: i64, provider: &str, req: Option<&str>| {
        let mut r = run(&task, name, t(at));
        r.provider = provider.into();
        if let Some(req) = req {
            r.meta.spec = serde_json::json!({ "providerVersion": req });
        }
        r
    };
    let v2 = with_req("v2", 1, "claude", Some(">=2"));
    let any_claude = with_req("any-claude", 2, "claude", None);
    let v1 = with_req("v1", 3, "claude", Some("^1.4"));
    let codex = with_req("codex", 4, "codex", None);
    let exec = with_req("exec", 5, "exec", None);
    let all = [
        v2.clone(),
        any_claude.clone(),
        v1.clone(),
        codex.clone(),
        exec.clone(),
    ];
    insert_runs(s, &all).await;
    // The Rust form, as the memory store and the dispatch pass use it.
    let w = pam_store::dispatch::Waits::default();
    let claimable = |h: &Host| -> Vec<Uuid> {
        all.iter()
            .filter(|r| pam_store::dispatch::run_claimable(r, h, w))
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(claimable(&exec_only), [exec.id]);
    assert_eq!(claimable(&legacy), [any_claude.id, codex.id, exec.id]);

    // Claims one at a time, so each host's first pick shows its order.
    let mut tx = s.begin().await.unwrap();
    let c = tx.claim_runs(&exec_only, 10, t(6)).await.unwrap();
    assert_eq!(ids(&c, |r| r.id), [exec.id]);
    let c = tx.claim_runs(&old_claude, 10, t(7)).await.unwrap();
    assert_eq!(ids(&c, |r| r.id), [any_claude.id, v1.id]);
    let c = tx.claim_runs(&new_claude, 10, t(8)).await.unwrap();
    assert_eq!(ids(&c, |r| r.id), [v2.id]);
    let c = tx.claim_runs(&legacy, 10, t(9)).await.unwrap();
    assert_eq!(ids(&c, |r| r.id), [codex.id]);
    tx.commit().await.unwrap();
}

/// A host whose workspace volume is below its worker's
/// `min_free_bytes` takes no run with a workspace — the run's own
/// `spec.workspace`, or its task's for a run that names no `cwd` — and
/// still takes the others. Both stores, the Rust predicate and the SQL,
/// and the pending list says which runs use one.
pub async fn claim_runs_keep_workspace_runs_off_low_disk_hosts(s: &dyn Store) {
    use pam_manifests::protocol::Capabilities;
    let disk = |free: u64| {
        Some(Capabilities {
            providers: vec![pam_manifests::protocol::ProviderCapability {
                name: "exec".into(),
                version: None,
            }],
            workspace_free_bytes: Some(free),
            workspace_min_free_bytes: Some(1000),
            ..Capabilities::default()
        })
    };
    let (p, plain_task) = seed(s).await;
    let mut ws_task = item(&p, None, "ws-task");
    ws_task.meta.spec = serde_json::json!({ "workspace": { "keep": "always" } });
    let mut tx = s.begin().await.unwrap();
    let ws_task = tx.insert_work_item(&ws_task).await.unwrap();
    tx.commit().await.unwrap();
    let mut low = host("low", &[]);
    low.capabilities = disk(999);
    let mut roomy = host("roomy", &[]);
    roomy.capabilities = disk(1000);
    insert_hosts(s, &[&low, &roomy]).await;
    let exec = |task: &WorkItem, name: &str, at: i64, cwd: &str, own: bool| {
        let mut r = run(task, name, t(at));
        r.provider = "exec".into();
        r.cwd = cwd.into();
        if own {
            r.meta.spec = serde_json::json!({ "workspace": {} });
        }
        r
    };
    let own = exec(&plain_task, "own", 1, "", true);
    let inherits = exec(&ws_task, "inherits", 2, "", false);
    let has_cwd = exec(&ws_task, "has-cwd", 3, "/src", false);
    let plain = exec(&plain_task, "plain", 4, "", false);
    let all = [
        own.clone(),
        inherits.clone(),
        has_cwd.clone(),
        plain.clone(),
    ];
    insert_runs(s, &all).await;
    let uses = [true, true, false, false];
    let task_of = |r: &Run| {
        if r.task_id == ws_task.id {
            &ws_task.meta.spec
        } else {
            &plain_task.meta.spec
        }
    };
    for (r, u) in all.iter().zip(uses) {
        assert_eq!(
            pam_store::dispatch::uses_workspace(r, Some(task_of(r))),
            u,
            "{}",
            r.name
        );
    }
    let mut tx = s.begin().await.unwrap();
    let listed = tx.list_pending_runs(10).await.unwrap();
    let listed_uses: Vec<bool> = listed.iter().map(|r| r.uses_workspace).collect();
    assert_eq!(listed_uses, uses);
    for (l, r) in listed.iter().zip(&all) {
        assert_eq!(*l, PendingRun::of(r, Some(task_of(r))));
    }
    let by_low = tx.claim_runs(&low, 10, t(5)).await.unwrap();
    assert_eq!(ids(&by_low, |r| r.id), [has_cwd.id, plain.id]);
    let by_roomy = tx.claim_runs(&roomy, 10, t(6)).await.unwrap();
    assert_eq!(ids(&by_roomy, |r| r.id), [own.id, inherits.id]);
    tx.commit().await.unwrap();
}

/// A run whose permissions are `full` goes only to a host that takes
/// them (its operator accepted unconfined full autonomy); a host that
/// reported no capabilities does not. Other modes, and runs created
/// before permissions existed, go anywhere. Both stores, the Rust
/// predicate and the SQL, and the pending list says which runs ask.
pub async fn claim_runs_keep_full_permissions_to_hosts_that_take_them(s: &dyn Store) {
    use pam_manifests::kinds::{
        EffectivePermissions, PermissionMode, Permissions, PermissionsFrom,
    };
    use pam_manifests::protocol::Capabilities;
    let (_, task) = seed(s).await;
    let caps = |unconfined_full: bool| {
        Some(Capabilities {
            providers: vec![pam_manifests::protocol::ProviderCapability {
                name: "exec".into(),
                version: None,
            }],
            unconfined_full,
            ..Capabilities::default()
        })
    };
    let mut strict = host("strict", &[]);
    strict.capabilities = caps(false);
    let mut open = host("open", &[]);
    open.capabilities = caps(true);
    let unknown = host("unknown", &[]);
    insert_hosts(s, &[&strict, &open, &unknown]).await;
    let with = |name: &str, at: i64, mode: Option<PermissionMode>| {
        let mut r = run(&task, name, t(at));
        r.provider = "exec".into();
        r.permissions = mode.map(|mode| EffectivePermissions {
            permissions: Permissions {
                mode,
                ..Permissions::default()
            },
            from: PermissionsFrom::Run,
        });
        r
    };
    let full = with("full", 1, Some(PermissionMode::Full));
    let full2 = with("full2", 2, Some(PermissionMode::Full));
    let edits = with("edits", 3, Some(PermissionMode::Edits));
    let legacy = with("legacy", 4, None);
    insert_runs(
        s,
        &[full.clone(), full2.clone(), edits.clone(), legacy.clone()],
    )
    .await;
    assert!(pam_store::dispatch::asks_full(&full));
    assert!(!pam_store::dispatch::asks_full(&edits) && !pam_store::dispatch::asks_full(&legacy));
    let mut tx = s.begin().await.unwrap();
    let asks: Vec<bool> = tx
        .list_pending_runs(10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.asks_full)
        .collect();
    assert_eq!(asks, [true, true, false, false]);
    let by_strict = tx.claim_runs(&strict, 10, t(5)).await.unwrap();
    assert_eq!(ids(&by_strict, |r| r.id), [edits.id, legacy.id]);
    let by_unknown = tx.claim_runs(&unknown, 10, t(5)).await.unwrap();
    assert!(by_unknown.is_empty());
    let by_open = tx.claim_runs(&open, 1, t(6)).await.unwrap();
    assert_eq!(ids(&by_open, |r| r.id), [full.id]);
    tx.commit().await.unwrap();
}

/// Live runs per host, for the dispatch pass's "at capacity".
pub async fn live_runs_are_counted_per_host(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let a = host("a", &[]);
    let b = host("b", &[]);
    insert_hosts(s, &[&a, &b]).await;
    let runs: Vec<Run> = (0..3).map(|i| run(&task, &format!("r{i}"), t(i))).collect();
    insert_runs(s, &runs).await;
    let mut tx = s.begin().await.unwrap();
    assert!(tx.count_live_runs_per_host().await.unwrap().is_empty());
    tx.claim_runs(&a, 2, t(5)).await.unwrap();
    tx.claim_runs(&b, 1, t(5)).await.unwrap();
    let mut counts = tx.count_live_runs_per_host().await.unwrap();
    counts.sort();
    let mut want = vec![(a.id, 2), (b.id, 1)];
    want.sort();
    assert_eq!(counts, want);
    tx.commit().await.unwrap();
}

pub async fn claim_runs_order_limit_and_stop_requested(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let h = inserted_host(s, "h").await;
    let newer = run(&task, "newer", t(3));
    let older = run(&task, "older", t(1));
    let mut stopped = run(&task, "stopped", t(0));
    stopped.stop_requested = true;
    insert_runs(s, &[newer.clone(), older.clone(), stopped.clone()]).await;

    let mut tx = s.begin().await.unwrap();
    let first = tx.claim_runs(&h, 1, t(5)).await.unwrap();
    assert_eq!(ids(&first, |r| r.id), [older.id]);
    let rest = tx.claim_runs(&h, 10, t(5)).await.unwrap();
    assert_eq!(ids(&rest, |r| r.id), [newer.id]);
    assert!(tx.claim_runs(&h, 10, t(5)).await.unwrap().is_empty());
    tx.commit().await.unwrap();
    assert_eq!(get_run(s, stopped.id).await.status, RunStatus::Pending);
}

/// Session names are `pam-` and 8 hex digits of the run id, so two runs
/// may share one (the seed's "Short-id collisions"); `UNIQUE (host_id,
/// session_name)` binds at dispatch. A claim takes the first of two such
/// runs and leaves the other for a host that does not hold the name: it
/// used to fail whole (a 500 to every host claiming the head of the queue,
/// found by bench-queue).
pub async fn claim_runs_skip_a_session_name_the_host_holds(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (h1, h2) = (host("h1", &[]), host("h2", &[]));
    insert_hosts(s, &[&h1, &h2]).await;
    let twin = |name: &str, low: u128, at: i64| {
        let mut r = run(&task, name, t(at));
        r.id = Uuid::from_u128((0x3b35_e851_u128 << 96) | low);
        r.session_name = Run::session_name_for(r.id);
        r
    };
    // a is older, b has the smaller id: of the two, the smaller id goes.
    let (a, b) = (twin("a", 2, 1), twin("b", 1, 2));
    assert_eq!(a.session_name, b.session_name);
    let c = run(&task, "c", t(3));
    insert_runs(s, &[a.clone(), b.clone(), c.clone()]).await;

    let mut tx = s.begin().await.unwrap();
    let first = tx.claim_runs(&h1, 10, t(5)).await.unwrap();
    assert_eq!(ids(&first, |r| r.id), [b.id, c.id]);
    assert!(
        tx.claim_runs(&h1, 10, t(5)).await.unwrap().is_empty(),
        "h1 holds a's session name"
    );
    let second = tx.claim_runs(&h2, 10, t(5)).await.unwrap();
    assert_eq!(ids(&second, |r| r.id), [a.id]);
    tx.commit().await.unwrap();
}

pub async fn claim_runs_at_most_once(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (h1, h2) = (host("h1", &[]), host("h2", &[]));
    insert_hosts(s, &[&h1, &h2]).await;
    let runs: Vec<Run> = (0..5).map(|i| run(&task, &format!("r{i}"), t(i))).collect();
    insert_runs(s, &runs).await;

    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.claim_runs(&h1, 10, t(9)).await.unwrap().len(), 5);
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert!(tx.claim_runs(&h2, 10, t(9)).await.unwrap().is_empty());
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.count_live_runs(h1.id).await.unwrap(), 5);
    assert_eq!(tx.count_live_runs(h2.id).await.unwrap(), 0);
}

pub async fn run_by_session_after_claim(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (h1, h2) = (host("h1", &[]), host("h2", &[]));
    insert_hosts(s, &[&h1, &h2]).await;
    let r = run(&task, "r", t(1));
    insert_runs(s, std::slice::from_ref(&r)).await;
    let mut tx = s.begin().await.unwrap();
    assert!(
        tx.get_run_by_session(h1.id, &r.session_name)
            .await
            .unwrap()
            .is_none(),
        "pending: no host yet"
    );
    tx.claim_runs(&h1, 1, t(2)).await.unwrap();
    let found = tx.get_run_by_session(h1.id, &r.session_name).await.unwrap();
    assert_eq!(found.map(|r| r.id), Some(r.id));
    assert!(tx
        .get_run_by_session(h2.id, &r.session_name)
        .await
        .unwrap()
        .is_none());
    assert!(tx
        .get_run_by_session(h1.id, "pam-00000000")
        .await
        .unwrap()
        .is_none());
}

pub async fn pending_and_requeue_due_lists(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let p3 = run(&task, "p3", t(3));
    // The fields a pending run is listed with (the pass's narrow read)
    // are the whole row's, in both stores.
    let mut p1 = run(&task, "p1", t(1));
    p1.meta.spec = json!({"prompt": "x", "providerVersion": ">=1.2"});
    p1.target = Target::Selector(labels_of(&[("pool", "gpu")]));
    p1.dispatch_timeout_seconds = Some(60);
    p1.meta.conditions = json!([
        {"type": "Applied", "status": "True", "reason": "Applied", "message": ""},
        {"type": "Scheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/1 hosts can run it: 1 lacks provider claude"},
    ]);
    let p2 = run(&task, "p2", t(2));
    let failed = |name: &str, at: Option<i64>| {
        let mut r = run(&task, name, t(0));
        r.status = RunStatus::Failed;
        r.requeue_at = at.map(t);
        r
    };
    let (f20, f10, fnone) = (
        failed("f20", Some(20)),
        failed("f10", Some(10)),
        failed("fn", None),
    );
    insert_runs(
        s,
        &[
            p3.clone(),
            p1.clone(),
            p2.clone(),
            f20.clone(),
            f10.clone(),
            fnone,
        ],
    )
    .await;
    let mut tx = s.begin().await.unwrap();
    let id = |r: &Run| r.id;
    let listed = tx.list_pending_runs(10).await.unwrap();
    assert_eq!(ids(&listed, |r: &PendingRun| r.id), [p1.id, p2.id, p3.id]);
    for (l, r) in listed.iter().zip([&p1, &p2, &p3]) {
        assert_eq!(*l, PendingRun::of(r, Some(&task.meta.spec)));
    }
    assert_eq!(
        listed[0].scheduled,
        Some((
            "Unschedulable".into(),
            "0/1 hosts can run it: 1 lacks provider claude".into()
        ))
    );
    assert_eq!(listed[0].provider_version.as_deref(), Some(">=1.2"));
    assert_eq!(listed[1].scheduled, None);
    assert_eq!(
        ids(&tx.list_pending_runs(2).await.unwrap(), |r: &PendingRun| r
            .id),
        [p1.id, p2.id]
    );
    assert!(tx.list_requeue_due(t(9), 10).await.unwrap().is_empty());
    assert_eq!(
        ids(&tx.list_requeue_due(t(15), 10).await.unwrap(), id),
        [f10.id]
    );
    assert_eq!(
        ids(&tx.list_requeue_due(t(20), 10).await.unwrap(), id),
        [f10.id, f20.id],
        "at or before now"
    );
    assert_eq!(
        ids(&tx.list_requeue_due(t(20), 1).await.unwrap(), id),
        [f10.id]
    );
}

pub async fn mark_eligible_host_seen_only_pending(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let pending = run(&task, "p", t(1));
    let mut failed = run(&task, "f", t(1));
    failed.status = RunStatus::Failed;
    insert_runs(s, &[pending.clone(), failed.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    tx.mark_eligible_host_seen(&[pending.id, failed.id, Uuid::new_v4()])
        .await
        .unwrap();
    tx.mark_eligible_host_seen(&[]).await.unwrap();
    tx.commit().await.unwrap();
    assert!(get_run(s, pending.id).await.eligible_host_seen);
    assert!(!get_run(s, failed.id).await.eligible_host_seen);
}

pub async fn count_live_runs(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (h1, h2) = (host("h1", &[]), host("h2", &[]));
    insert_hosts(s, &[&h1, &h2]).await;
    let mut runs = Vec::new();
    for (i, (status, h)) in [
        (RunStatus::Spawning, &h1),
        (RunStatus::Running, &h1),
        (RunStatus::Exited, &h1),
        (RunStatus::Failed, &h1),
        (RunStatus::Running, &h2),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = run(&task, &format!("r{i}"), t(1));
        r.status = status;
        r.host_id = Some(h.id);
        runs.push(r);
    }
    insert_runs(s, &runs).await;
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.count_live_runs(h1.id).await.unwrap(), 2);
    assert_eq!(tx.count_live_runs(h2.id).await.unwrap(), 1);
    assert_eq!(tx.count_live_runs(Uuid::new_v4()).await.unwrap(), 0);
}

/// The phase counts `/metrics` reports: every status with at least one row.
pub async fn status_counts(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (h1, mut h2) = (host("h1", &[]), host("h2", &[]));
    h2.status = HostStatus::Online;
    insert_hosts(s, &[&h1, &h2]).await;
    let mut runs = Vec::new();
    for (i, status) in [RunStatus::Pending, RunStatus::Failed, RunStatus::Failed]
        .into_iter()
        .enumerate()
    {
        let mut r = run(&task, &format!("r{i}"), t(1));
        r.status = status;
        runs.push(r);
    }
    insert_runs(s, &runs).await;
    let mut tx = s.begin().await.unwrap();
    let mut by_run = tx.count_runs_by_status().await.unwrap();
    by_run.sort_by_key(|(s, _)| s.as_str());
    assert_eq!(by_run, [(RunStatus::Failed, 2), (RunStatus::Pending, 1)]);
    let mut by_host = tx.count_hosts_by_status().await.unwrap();
    by_host.sort_by_key(|(s, _)| s.as_str());
    assert_eq!(
        by_host,
        [(HostStatus::Online, 1), (HostStatus::Registered, 1)]
    );
}
