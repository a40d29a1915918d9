//! The Store behaviour suite: one `pub async fn` per behaviour, each taking
//! a fresh, empty store. [`store_conformance_tests!`](crate::store_conformance_tests)
//! turns the list into one `#[tokio::test]` per behaviour, so a failure
//! names the behaviour and (by test file) the store:
//!
//! ```ignore
//! pam_controller::store_conformance_tests!(make_store().await);
//! ```
//!
//! Times are a fixed base plus whole seconds (PostgreSQL keeps
//! microseconds; these survive the round trip exactly).

use chrono::{DateTime, Duration, TimeZone, Utc};
use pam_manifests::state::{
    FailureReason, HostStatus, Platform, ProjectStatus, RunStatus, WorkItemKind, WorkItemStatus,
};
use serde_json::json;
use uuid::Uuid;

use super::{
    short_id, ApiToken, Host, Labels, Meta, Project, Run, RunFilter, RunUpdate, SignalMarker,
    Store, StoreError, Target, TokenKind, WorkItem,
};

/// Generates one `#[tokio::test]` per behaviour; `$make` is an expression
/// (evaluated per test) giving something that derefs to a [`Store`].
#[macro_export]
macro_rules! store_conformance_tests {
    ($make:expr) => {
        $crate::store_conformance_tests!(@each $make;
            project_crud,
            project_slug_unique_and_tx_usable_after,
            project_update_guarded_by_resource_version,
            records_round_trip,
            work_item_paths,
            work_item_parent_and_name_checks,
            insert_work_items_batch,
            subtree_prefix_equals_recursive,
            reparent_rewrites_descendant_paths,
            reparent_refuses_cycle_self_and_cross_project,
            work_item_status_guarded,
            work_item_update_guarded,
            delete_project_cascades,
            delete_work_item_cascades,
            run_list_filters_and_order,
            run_name_unique_and_task_checks,
            session_name_unique_per_host,
            transition_run_guarded,
            requeue_run_resets_attempt,
            claim_runs_by_target,
            claim_runs_order_limit_and_stop_requested,
            claim_runs_at_most_once,
            run_by_session_after_claim,
            advance_progress_monotonic,
            signal_batch_primitives,
            run_events_of_topic_filters,
            pending_and_requeue_due_lists,
            mark_eligible_host_seen_only_pending,
            update_run_spec_guarded,
            count_live_runs,
            host_crud_and_update,
            host_status_guarded,
            list_silent_hosts,
            delete_host_refused_while_referenced,
            events_append_after_bounds_purge,
            append_events_batch,
            events_commit_returns_and_rollback_discards,
            tokens_insert_lookup_revoke,
            rollback_on_drop,
        );
    };
    (@each $make:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let store = $make;
                $crate::store::conformance::$name(&*store).await;
            }
        )+
    };
}

// ---- fixtures -------------------------------------------------------------------

/// The fixed base time plus `secs` seconds.
pub fn t(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap() + Duration::seconds(secs)
}

pub fn project(slug: &str) -> Project {
    Project {
        id: Uuid::new_v4(),
        name: format!("Project {slug}"),
        slug: slug.to_string(),
        description: String::new(),
        status: ProjectStatus::Active,
        meta: Meta::default(),
        created_at: t(0),
        updated_at: t(0),
    }
}

pub fn item(p: &Project, parent: Option<&WorkItem>, name: &str) -> WorkItem {
    WorkItem {
        id: Uuid::new_v4(),
        project_id: p.id,
        parent_id: parent.map(|w| w.id),
        name: name.to_string(),
        kind: WorkItemKind::Task,
        title: format!("Title {name}"),
        description: String::new(),
        status: WorkItemStatus::Todo,
        assignee: None,
        path: String::new(),
        sort_order: 0,
        meta: Meta::default(),
        created_at: t(0),
        updated_at: t(0),
    }
}

pub fn run(task: &WorkItem, name: &str, pending_since: DateTime<Utc>) -> Run {
    let id = Uuid::new_v4();
    Run {
        id,
        project_id: task.project_id,
        task_id: task.id,
        name: name.to_string(),
        host_id: None,
        provider: "claude".into(),
        prompt: "do it".into(),
        cwd: "/src".into(),
        session_name: Run::session_name_for(id),
        status: RunStatus::Pending,
        attempt: 1,
        last_progress_seq: None,
        failure_reason: None,
        pending_since,
        exit_code: None,
        started_at: None,
        finished_at: None,
        target: Target::Any,
        max_attempts: 1,
        backoff_seconds: 10,
        backoff_max_seconds: 300,
        dispatch_timeout_seconds: None,
        stop_requested: false,
        requeue_at: None,
        eligible_host_seen: false,
        meta: Meta::default(),
        created_at: pending_since,
        updated_at: pending_since,
    }
}

pub fn host(name: &str, labels: &[(&str, &str)]) -> Host {
    Host {
        id: Uuid::new_v4(),
        name: name.to_string(),
        platform: Platform::Linux,
        token_fingerprint: None,
        status: HostStatus::Registered,
        instance_id: None,
        instance_suspect: false,
        instance_flagged_at: None,
        presented_instance_id: None,
        // Run target selectors match dispatch labels, not metadata labels.
        dispatch_labels: labels_of(labels),
        last_seen_at: None,
        capacity: 4,
        disabled: false,
        meta: Meta::default(),
        created_at: t(0),
        updated_at: t(0),
    }
}

fn labels_of(kv: &[(&str, &str)]) -> Labels {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn token(name: &str, kind: TokenKind, fp: &str, at: i64) -> ApiToken {
    ApiToken {
        id: Uuid::new_v4(),
        name: name.to_string(),
        kind,
        fingerprint: fp.to_string(),
        host_name: (kind == TokenKind::Worker).then(|| name.to_string()),
        created_at: t(at),
        last_used_at: None,
        revoked_at: None,
    }
}

/// A project with one task, committed.
async fn seed(s: &dyn Store) -> (Project, WorkItem) {
    let p = project("seed");
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
    let task = tx.insert_work_item(&item(&p, None, "task")).await.unwrap();
    tx.commit().await.unwrap();
    (p, task)
}

async fn insert_runs(s: &dyn Store, runs: &[Run]) {
    let mut tx = s.begin().await.unwrap();
    for r in runs {
        tx.insert_run(r).await.unwrap();
    }
    tx.commit().await.unwrap();
}

async fn insert_hosts(s: &dyn Store, hosts: &[&Host]) {
    let mut tx = s.begin().await.unwrap();
    for h in hosts {
        tx.insert_host(h).await.unwrap();
    }
    tx.commit().await.unwrap();
}

async fn get_run(s: &dyn Store, id: Uuid) -> Run {
    let mut tx = s.begin().await.unwrap();
    tx.get_run(id).await.unwrap().expect("run exists")
}

fn ids<T>(v: &[T], id: impl Fn(&T) -> Uuid) -> Vec<Uuid> {
    v.iter().map(id).collect()
}

macro_rules! assert_err {
    ($e:expr, $pat:pat) => {
        match $e {
            Err($pat) => {}
            other => panic!(
                "expected {}, got {:?}",
                stringify!($pat),
                other.map(|_| "Ok(..)")
            ),
        }
    };
}

// ---- projects -------------------------------------------------------------------

pub async fn project_crud(s: &dyn Store) {
    let (b, a, c) = (project("b"), project("a"), project("c"));
    let mut tx = s.begin().await.unwrap();
    for p in [&b, &a, &c] {
        tx.insert_project(p).await.unwrap();
    }
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get_project(a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(tx.get_project_by_slug("b").await.unwrap(), Some(b.clone()));
    assert_eq!(tx.get_project_by_slug("zz").await.unwrap(), None);
    let slugs: Vec<String> = tx
        .list_projects()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.slug)
        .collect();
    assert_eq!(slugs, ["a", "b", "c"]);

    let mut changed = a.clone();
    changed.name = "Renamed".into();
    changed.status = ProjectStatus::Archived;
    changed.slug = "ignored".into();
    changed.updated_at = t(5);
    let stored = tx.update_project(&changed, 1).await.unwrap();
    assert_eq!(stored.name, "Renamed");
    assert_eq!(stored.status, ProjectStatus::Archived);
    assert_eq!(stored.slug, "a", "the slug is not written by update");
    assert_eq!(stored.meta.resource_version, 2);
    assert_eq!(stored.updated_at, t(5));

    assert!(tx.delete_project(c.id).await.unwrap());
    assert!(!tx.delete_project(c.id).await.unwrap());
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get_project(c.id).await.unwrap(), None);
    assert_eq!(tx.get_project(a.id).await.unwrap(), Some(stored));
}

pub async fn project_slug_unique_and_tx_usable_after(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&project("x")).await.unwrap();
    assert_err!(
        tx.insert_project(&project("x")).await,
        StoreError::AlreadyExists(_)
    );
    // A failed insert leaves the transaction usable.
    tx.insert_project(&project("y")).await.unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.list_projects().await.unwrap().len(), 2);
}

pub async fn project_update_guarded_by_resource_version(s: &dyn Store) {
    let p = project("p");
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
    let mut first = p.clone();
    first.description = "first".into();
    let v2 = tx.update_project(&first, 1).await.unwrap();
    assert_eq!(v2.meta.resource_version, 2);
    let mut stale = p.clone();
    stale.description = "stale".into();
    assert_err!(tx.update_project(&stale, 1).await, StoreError::Conflict(_));
    assert_err!(
        tx.update_project(&project("gone"), 1).await,
        StoreError::NotFound(_)
    );
    let v3 = tx.update_project(&stale, 2).await.unwrap();
    assert_eq!(v3.meta.resource_version, 3);
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let got = tx.get_project(p.id).await.unwrap().unwrap();
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
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
    let w_stored = tx.insert_work_item(&w).await.unwrap();
    tx.insert_host(&h).await.unwrap();
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
    assert_eq!(tx.get_project(p.id).await.unwrap(), Some(p.clone()));
    let mut w_expected = w.clone();
    w_expected.path = short_id(w.id);
    assert_eq!(w_stored, w_expected);
    assert_eq!(tx.get_work_item(w.id).await.unwrap(), Some(w_expected));
    assert_eq!(tx.get_host(h.id).await.unwrap(), Some(h.clone()));
    assert_eq!(tx.get_host_by_name("h1").await.unwrap(), Some(h.clone()));
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

// ---- work items -----------------------------------------------------------------

fn is_short(seg: &str) -> bool {
    seg.len() == 8 && seg.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
}

pub async fn work_item_paths(s: &dyn Store) {
    let p = project("p");
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
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
    tx.insert_project(&q).await.unwrap();
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
    let (p, q) = (project("p"), project("q"));
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
    tx.insert_project(&q).await.unwrap();
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
    let (p, q) = (project("p"), project("q"));
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
    tx.insert_project(&q).await.unwrap();
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
    tx.insert_project(&p).await.unwrap();
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
    let (p, q) = (project("p"), project("q"));
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
    tx.insert_project(&q).await.unwrap();
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
    let q = project("other");
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&q).await.unwrap();
    let child = tx
        .insert_work_item(&item(&p, Some(&task), "child"))
        .await
        .unwrap();
    let q_task = tx.insert_work_item(&item(&q, None, "qt")).await.unwrap();
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
    assert!(tx.delete_project(p.id).await.unwrap());
    assert_eq!(tx.get_work_item(task.id).await.unwrap(), None);
    assert_eq!(tx.get_work_item(child.id).await.unwrap(), None);
    assert_eq!(tx.get_run(r.id).await.unwrap(), None);
    assert!(tx.get_run(qr.id).await.unwrap().is_some());
    assert!(tx.get_work_item(q_task.id).await.unwrap().is_some());
    tx.commit().await.unwrap();

    // The processed signal went with the run: recreating the run (same id)
    // and marking the same signal is a first time again.
    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
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

// ---- runs -----------------------------------------------------------------------

pub async fn run_list_filters_and_order(s: &dyn Store) {
    let (p, t1) = seed(s).await;
    let q = project("q");
    let h = host("h", &[]);
    let mut tx = s.begin().await.unwrap();
    let t2 = tx.insert_work_item(&item(&p, None, "t2")).await.unwrap();
    tx.insert_project(&q).await.unwrap();
    let qt = tx.insert_work_item(&item(&q, None, "qt")).await.unwrap();
    tx.insert_host(&h).await.unwrap();
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
    tx.insert_project(&q).await.unwrap();
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
    let h = host("h", &[]);
    insert_hosts(s, &[&h]).await;
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
    assert_eq!(got.requeue_at, Some(t(14)));
    assert_eq!(got.meta.resource_version, 4);
    assert_eq!(got.attempt, 1);
}

pub async fn requeue_run_resets_attempt(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let h = host("h", &[]);
    insert_hosts(s, &[&h]).await;
    let mut r = run(&task, "r", t(1));
    r.status = RunStatus::Failed;
    r.host_id = Some(h.id);
    r.started_at = Some(t(2));
    r.finished_at = Some(t(3));
    r.exit_code = Some(1);
    r.last_progress_seq = Some(9);
    r.failure_reason = Some(FailureReason::HostLost);
    r.requeue_at = Some(t(4));
    r.eligible_host_seen = true;
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
    want.requeue_at = None;
    want.eligible_host_seen = false;
    want.pending_since = t(50);
    want.updated_at = t(50);
    want.meta.resource_version = 2;
    assert_eq!(got, want);
    assert_eq!(get_run(s, r.id).await, want);
    assert_eq!(want.created_at, t(1), "created_at never changes");
}

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

pub async fn claim_runs_order_limit_and_stop_requested(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let h = host("h", &[]);
    insert_hosts(s, &[&h]).await;
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

pub async fn advance_progress_monotonic(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let r = run(&task, "r", t(1));
    insert_runs(s, std::slice::from_ref(&r)).await;
    let mut tx = s.begin().await.unwrap();
    assert!(tx.advance_progress(r.id, 1, 5).await.unwrap());
    assert!(!tx.advance_progress(r.id, 1, 5).await.unwrap());
    assert!(!tx.advance_progress(r.id, 1, 3).await.unwrap());
    assert!(!tx.advance_progress(r.id, 2, 100).await.unwrap(), "attempt");
    assert!(!tx.advance_progress(r.id, 0, 100).await.unwrap(), "attempt");
    assert!(tx.advance_progress(r.id, 1, 6).await.unwrap());
    assert_err!(
        tx.advance_progress(Uuid::new_v4(), 1, 1).await,
        StoreError::NotFound(_)
    );
    tx.commit().await.unwrap();
    assert_eq!(get_run(s, r.id).await.last_progress_seq, Some(6));
}

fn marker(run_id: Uuid, attempt: i32, kind: &str) -> SignalMarker {
    SignalMarker {
        run_id,
        attempt,
        kind: kind.into(),
    }
}

/// Signal ingest's batch primitives: the locked read of runs and their
/// markers, the bulk marker insert (exactly once per (run, attempt, kind)),
/// and the all-or-nothing guarded write of run state.
pub async fn signal_batch_primitives(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (r, r2) = (run(&task, "r", t(1)), run(&task, "r2", t(1)));
    insert_runs(s, &[r.clone(), r2.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    let (runs, markers) = tx.lock_runs_with_signals(&[]).await.unwrap();
    assert!(runs.is_empty() && markers.is_empty());
    // The existing runs of the ids, in id order; unknown ids are skipped.
    let (got, markers) = tx
        .lock_runs_with_signals(&[r2.id, Uuid::new_v4(), r.id])
        .await
        .unwrap();
    let mut want = vec![
        tx.get_run(r.id).await.unwrap().unwrap(),
        tx.get_run(r2.id).await.unwrap().unwrap(),
    ];
    want.sort_by_key(|x| x.id);
    assert_eq!(got, want);
    assert!(markers.is_empty());

    assert_eq!(tx.insert_signal_markers(&[], t(2)).await.unwrap(), 0);
    let first = [marker(r.id, 1, "started")];
    assert_eq!(tx.insert_signal_markers(&first, t(2)).await.unwrap(), 1);
    assert_eq!(tx.insert_signal_markers(&first, t(3)).await.unwrap(), 0);
    let more = [
        marker(r.id, 2, "started"),
        marker(r.id, 1, "finished"),
        marker(r2.id, 1, "started"),
        marker(r.id, 1, "started"),
    ];
    assert_eq!(tx.insert_signal_markers(&more, t(3)).await.unwrap(), 3);
    // An unknown run is NotFound, and the transaction stays usable.
    assert_err!(
        tx.insert_signal_markers(&[marker(Uuid::new_v4(), 1, "started")], t(4))
            .await,
        StoreError::NotFound(_)
    );
    assert_eq!(
        tx.insert_signal_markers(&[marker(r2.id, 1, "lost")], t(4))
            .await
            .unwrap(),
        1
    );
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let (_, mut markers) = tx.lock_runs_with_signals(&[r.id]).await.unwrap();
    markers.sort();
    let mut want = vec![
        marker(r.id, 1, "started"),
        marker(r.id, 2, "started"),
        marker(r.id, 1, "finished"),
    ];
    want.sort();
    assert_eq!(markers, want);

    // write_run_states: every per-attempt column, guarded on the
    // resource_version read; one stale row means nothing is written.
    let cur = tx.get_run(r.id).await.unwrap().unwrap();
    let cur2 = tx.get_run(r2.id).await.unwrap().unwrap();
    let mut next = cur.clone();
    next.status = RunStatus::Failed;
    next.exit_code = Some(3);
    next.failure_reason = Some(FailureReason::SessionLost);
    next.started_at = Some(t(5));
    next.finished_at = Some(t(6));
    next.requeue_at = Some(t(7));
    next.last_progress_seq = Some(9);
    next.updated_at = t(6);
    next.meta.resource_version = cur.meta.resource_version + 2;
    let mut next2 = cur2.clone();
    next2.last_progress_seq = Some(1);
    next2.meta.resource_version = cur2.meta.resource_version + 1;
    assert_err!(
        tx.write_run_states(&[
            (next.clone(), cur.meta.resource_version),
            (next2.clone(), cur2.meta.resource_version - 1),
        ])
        .await,
        StoreError::Conflict(_)
    );
    assert_eq!(tx.get_run(r.id).await.unwrap().unwrap(), cur);
    assert_eq!(tx.get_run(r2.id).await.unwrap().unwrap(), cur2);
    tx.write_run_states(&[
        (next.clone(), cur.meta.resource_version),
        (next2.clone(), cur2.meta.resource_version),
    ])
    .await
    .unwrap();
    tx.write_run_states(&[]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(get_run(s, r.id).await, next);
    assert_eq!(get_run(s, r2.id).await, next2);
}

pub async fn pending_and_requeue_due_lists(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let p3 = run(&task, "p3", t(3));
    let p1 = run(&task, "p1", t(1));
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
    assert_eq!(
        ids(&tx.list_pending_runs(10).await.unwrap(), id),
        [p1.id, p2.id, p3.id]
    );
    assert_eq!(
        ids(&tx.list_pending_runs(2).await.unwrap(), id),
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

// ---- hosts ----------------------------------------------------------------------

pub async fn host_crud_and_update(s: &dyn Store) {
    let (b, a) = (host("b", &[]), host("a", &[("x", "1")]));
    insert_hosts(s, &[&b, &a]).await;
    let mut tx = s.begin().await.unwrap();
    assert_err!(
        tx.insert_host(&host("a", &[])).await,
        StoreError::AlreadyExists(_)
    );
    let names: Vec<String> = tx
        .list_hosts()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.name)
        .collect();
    assert_eq!(names, ["a", "b"]);
    let mut next = a.clone();
    next.last_seen_at = Some(t(5));
    next.instance_id = Some(Uuid::new_v4());
    next.capacity = 1;
    next.disabled = true;
    next.meta.labels = labels_of(&[("x", "2")]);
    next.updated_at = t(5);
    next.status = HostStatus::Online; // not written by update_host
    next.name = "renamed".into(); // nor this
    let got = tx.update_host(&next, 1).await.unwrap();
    assert_err!(tx.update_host(&next, 1).await, StoreError::Conflict(_));
    assert_err!(
        tx.update_host(&host("gone", &[]), 1).await,
        StoreError::NotFound(_)
    );
    tx.commit().await.unwrap();
    let mut want = next.clone();
    want.status = HostStatus::Registered;
    want.name = "a".into();
    want.meta.resource_version = 2;
    assert_eq!(got, want);
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.get_host_by_name("a").await.unwrap(), Some(want));
    assert!(tx.delete_host(b.id).await.unwrap());
    assert!(!tx.delete_host(b.id).await.unwrap());
}

pub async fn host_status_guarded(s: &dyn Store) {
    let h = host("h", &[]);
    insert_hosts(s, &[&h]).await;
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
    assert_eq!(tx.get_host(h.id).await.unwrap(), Some(got));
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
    let h = host("h", &[]);
    insert_hosts(s, &[&h]).await;
    let mut r = run(&task, "r", t(1));
    r.host_id = Some(h.id);
    r.status = RunStatus::Running;
    insert_runs(s, std::slice::from_ref(&r)).await;
    let mut tx = s.begin().await.unwrap();
    assert_err!(tx.delete_host(h.id).await, StoreError::Invalid(_));
    assert!(tx.delete_run(r.id).await.unwrap());
    assert!(!tx.delete_run(r.id).await.unwrap());
    assert!(tx.delete_host(h.id).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert!(tx.list_hosts().await.unwrap().is_empty());
}

// ---- events ---------------------------------------------------------------------

pub async fn events_append_after_bounds_purge(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.event_bounds().await.unwrap(), None);
    let before = tx.event_high_water().await.unwrap();
    let mut seqs = Vec::new();
    for i in 0..5 {
        let e = tx
            .append_event("run.created", json!({ "i": i }), t(i))
            .await
            .unwrap();
        assert_eq!(e.topic, "run.created");
        assert_eq!(e.payload, json!({ "i": i }));
        assert_eq!(e.created_at, t(i));
        seqs.push(e.seq);
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert!(seqs[0] > before, "{before} {seqs:?}");
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let all = tx.events_after(0, 100).await.unwrap();
    assert_eq!(ids_i64(&all), seqs);
    assert_eq!(
        ids_i64(&tx.events_after(seqs[1], 2).await.unwrap()),
        &seqs[2..4]
    );
    assert!(tx.events_after(seqs[4], 10).await.unwrap().is_empty());
    assert_eq!(tx.event_bounds().await.unwrap(), Some((seqs[0], seqs[4])));
    assert_eq!(tx.purge_events_before(t(2)).await.unwrap(), 2);
    assert_eq!(tx.event_bounds().await.unwrap(), Some((seqs[2], seqs[4])));
    assert_eq!(ids_i64(&tx.events_after(0, 100).await.unwrap()), &seqs[2..]);
    assert_eq!(tx.purge_events_before(t(100)).await.unwrap(), 3);
    assert_eq!(tx.event_bounds().await.unwrap(), None);
    // The high-water mark outlives the purge.
    assert_eq!(tx.event_high_water().await.unwrap(), seqs[4]);
    tx.commit().await.unwrap();

    // Seqs keep increasing after a purge.
    let mut tx = s.begin().await.unwrap();
    let e = tx.append_event("x", json!({}), t(200)).await.unwrap();
    assert!(e.seq > seqs[4]);
}

/// Bulk event append: input order, increasing seqs, returned by commit
/// like single appends.
/// `run_events_of_topic`: the events of one topic naming one of the runs
/// (`payload.run_id`), in seq order.
pub async fn run_events_of_topic_filters(s: &dyn Store) {
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let mut tx = s.begin().await.unwrap();
    let mut want = Vec::new();
    for (topic, run) in [
        ("run.signal_received", a),
        ("run.started", a),
        ("run.signal_received", b),
        ("run.signal_received", c),
        ("run.signal_received", a),
    ] {
        let e = tx
            .append_event(topic, json!({"run_id": run, "signal": "INT"}), t(2))
            .await
            .unwrap();
        if topic == "run.signal_received" && run != c {
            want.push(e.seq);
        }
    }
    tx.append_event("run.signal_received", json!({}), t(2))
        .await
        .unwrap();
    let got: Vec<i64> = tx
        .run_events_of_topic("run.signal_received", &[b, a])
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(got, want);
    assert!(tx
        .run_events_of_topic("run.signal_received", &[])
        .await
        .unwrap()
        .is_empty());
}

pub async fn append_events_batch(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    assert!(tx.append_events(Vec::new(), t(0)).await.unwrap().is_empty());
    let first = tx.append_event("a", json!({"i": -1}), t(0)).await.unwrap();
    let batch: Vec<(&'static str, serde_json::Value)> = (0..7)
        .map(|i| (if i % 2 == 0 { "even" } else { "odd" }, json!({ "i": i })))
        .collect();
    let evs = tx.append_events(batch.clone(), t(1)).await.unwrap();
    assert_eq!(evs.len(), 7);
    for (e, (topic, payload)) in evs.iter().zip(&batch) {
        assert_eq!((e.topic.as_str(), &e.payload), (*topic, payload));
        assert_eq!(e.created_at, t(1));
    }
    assert!(first.seq < evs[0].seq);
    assert!(evs.windows(2).all(|w| w[0].seq < w[1].seq));
    let committed = tx.commit().await.unwrap();
    assert_eq!(committed.len(), 8, "commit returns every appended event");
    assert_eq!(ids_i64(&committed[1..]), ids_i64(&evs));
    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        ids_i64(&tx.events_after(first.seq, 100).await.unwrap()),
        ids_i64(&evs)
    );
}

fn ids_i64(v: &[super::Event]) -> Vec<i64> {
    v.iter().map(|e| e.seq).collect()
}

pub async fn events_commit_returns_and_rollback_discards(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let a = tx.append_event("a", json!({"n": 1}), t(1)).await.unwrap();
    let b = tx.append_event("b", json!({"n": 2}), t(2)).await.unwrap();
    let published = tx.commit().await.unwrap();
    assert_eq!(published, vec![a.clone(), b.clone()]);

    // A transaction without events returns none.
    let tx = s.begin().await.unwrap();
    assert!(tx.commit().await.unwrap().is_empty());

    let mut tx = s.begin().await.unwrap();
    let dropped = tx.append_event("c", json!({}), t(3)).await.unwrap();
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.events_after(0, 10).await.unwrap(), vec![a, b.clone()]);
    let d = tx.append_event("d", json!({}), t(4)).await.unwrap();
    assert!(d.seq > b.seq && d.seq > dropped.seq, "seqs never go back");
    assert_eq!(tx.commit().await.unwrap(), vec![d]);
}

// ---- tokens ---------------------------------------------------------------------

pub async fn tokens_insert_lookup_revoke(s: &dyn Store) {
    let op = token("admin", TokenKind::Operator, "fp-op", 2);
    let wk = token("h1", TokenKind::Worker, "fp-wk", 1);
    let mut tx = s.begin().await.unwrap();
    tx.insert_token(&op).await.unwrap();
    tx.insert_token(&wk).await.unwrap();
    assert_err!(
        tx.insert_token(&token("other", TokenKind::Operator, "fp-op", 3))
            .await,
        StoreError::AlreadyExists(_)
    );
    assert_err!(
        tx.insert_token(&token("admin", TokenKind::Operator, "fp-2", 3))
            .await,
        StoreError::AlreadyExists(_)
    );
    let mut hostless = token("w", TokenKind::Worker, "fp-3", 3);
    hostless.host_name = None;
    assert_err!(tx.insert_token(&hostless).await, StoreError::Invalid(_));
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        tx.get_token_by_fingerprint("fp-op").await.unwrap(),
        Some(op.clone())
    );
    assert_eq!(tx.get_token_by_fingerprint("nope").await.unwrap(), None);
    assert_eq!(
        tx.list_tokens().await.unwrap(),
        vec![wk.clone(), op.clone()]
    );
    assert!(tx.revoke_token(op.id, t(9)).await.unwrap());
    assert!(!tx.revoke_token(op.id, t(10)).await.unwrap());
    assert!(!tx.revoke_token(Uuid::new_v4(), t(10)).await.unwrap());
    // A revoked operator token frees its name.
    tx.insert_token(&token("admin", TokenKind::Operator, "fp-new", 11))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let got = tx.get_token_by_fingerprint("fp-op").await.unwrap().unwrap();
    assert_eq!(got.revoked_at, Some(t(9)), "revoked tokens are still found");
    assert_eq!(tx.list_tokens().await.unwrap().len(), 3);
}

// ---- transactions ---------------------------------------------------------------

/// Every kind of write, made in a transaction that is then dropped, leaves
/// the store exactly as it was.
pub async fn rollback_on_drop(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let h = host("h", &[]);
    insert_hosts(s, &[&h]).await;
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
            tx.list_projects().await.unwrap(),
            tx.list_work_items(p.id).await.unwrap(),
            tx.list_runs(&RunFilter::default()).await.unwrap(),
            tx.list_hosts().await.unwrap(),
            tx.list_tokens().await.unwrap(),
            tx.events_after(0, 100).await.unwrap(),
        )
    }
    let before = snapshot(s, &p).await;

    let mut tx = s.begin().await.unwrap();
    tx.insert_project(&project("new")).await.unwrap();
    let mut p2 = p.clone();
    p2.name = "changed".into();
    tx.update_project(&p2, 1).await.unwrap();
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
    tx.insert_host(&host("h2", &[])).await.unwrap();
    tx.set_host_status(h.id, HostStatus::Registered, HostStatus::Online, t(2))
        .await
        .unwrap();
    tx.revoke_token(tok.id, t(2)).await.unwrap();
    tx.append_event("x", json!({}), t(2)).await.unwrap();
    tx.delete_work_item(task.id).await.unwrap();
    tx.delete_project(p.id).await.unwrap();
    drop(tx);

    assert_eq!(snapshot(s, &p).await, before);
    // The signal mark was rolled back too.
    let mut tx = s.begin().await.unwrap();
    let (_, markers) = tx.lock_runs_with_signals(&[pending.id]).await.unwrap();
    assert!(markers.is_empty());
}
