//! The Store conformance suite against [`PgStore`] (a fresh migrated
//! database per test), plus the PostgreSQL-only concurrency check.

use std::collections::HashMap;

use conformance::{host, item, project, run, t};
use pam_manifests::state::RunStatus;
use pam_store::postgres::PgStore;
use pam_store::prelude::*;
use pam_store::RunFilter;
use pam_testkit::testdb::fresh_pool;

async fn pg_store() -> Box<PgStore> {
    Box::new(PgStore::new(
        fresh_pool().await.expect("fresh test database"),
    ))
}

#[macro_use]
mod conformance;

store_conformance_tests!(pg_store().await);

/// 8 claimers race over 1,000 pending runs: `FOR UPDATE SKIP LOCKED` must
/// hand every run to exactly one host.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_claimers_claim_each_run_exactly_once() {
    let store = PgStore::new(fresh_pool().await.unwrap());
    let p = project("p");
    let hosts: Vec<_> = (0..8).map(|i| host(&format!("h{i}"), &[])).collect();
    let mut tx = store.begin().await.unwrap();
    tx.insert_project(&p).await.unwrap();
    let task = tx.insert_work_item(&item(&p, None, "task")).await.unwrap();
    for h in &hosts {
        tx.insert_host(h).await.unwrap();
    }
    for i in 0..1000 {
        tx.insert_run(&run(&task, &format!("r{i}"), t(i)))
            .await
            .unwrap();
    }
    tx.commit().await.unwrap();

    let mut handles = Vec::new();
    for h in hosts.clone() {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let mut claimed = Vec::new();
            loop {
                let mut tx = store.begin().await.unwrap();
                let got = tx.claim_runs(&h, 10, t(5000)).await.unwrap();
                tx.commit().await.unwrap();
                if got.is_empty() {
                    return claimed;
                }
                claimed.extend(got.into_iter().map(|r| (r.id, r.host_id)));
            }
        }));
    }
    let mut by_run: HashMap<_, Vec<_>> = HashMap::new();
    let mut hosts_used = 0;
    for (h, handle) in hosts.iter().zip(handles) {
        let claimed = handle.await.unwrap();
        if !claimed.is_empty() {
            hosts_used += 1;
        }
        for (id, host_id) in claimed {
            assert_eq!(host_id, Some(h.id));
            by_run.entry(id).or_default().push(h.id);
        }
    }
    assert_eq!(by_run.len(), 1000, "every run claimed");
    assert!(
        by_run.values().all(|v| v.len() == 1),
        "no run claimed twice"
    );
    assert!(hosts_used > 1, "the claimers actually raced");

    // The database agrees with what the claimers were told.
    let mut tx = store.begin().await.unwrap();
    let runs = tx.list_runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1000);
    for r in runs {
        assert_eq!(r.status, RunStatus::Spawning);
        assert_eq!(r.host_id, Some(by_run[&r.id][0]));
    }
}

/// The event-order lock: a second transaction's first append waits until
/// the first appender commits, so seqs become visible in commit order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_appends_serialize_until_commit() {
    let store = PgStore::new(fresh_pool().await.unwrap());
    let mut tx1 = store.begin().await.unwrap();
    let first = tx1
        .append_event("a", serde_json::json!({}), t(1))
        .await
        .unwrap();

    let store2 = store.clone();
    let second = tokio::spawn(async move {
        let mut tx2 = store2.begin().await.unwrap();
        let e = tx2
            .append_event("b", serde_json::json!({}), t(2))
            .await
            .unwrap();
        tx2.commit().await.unwrap();
        e
    });

    // Wait (by observation, not by sleeping) until tx2 is blocked on the
    // advisory lock that tx1 holds.
    let mut blocked = false;
    for _ in 0..10_000 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
        )
        .fetch_one(store.pool())
        .await
        .unwrap();
        if waiting == 1 {
            blocked = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(blocked, "the second appender never waited for the first");
    assert!(!second.is_finished());

    assert_eq!(tx1.commit().await.unwrap(), vec![first.clone()]);
    let second = second.await.unwrap();
    assert!(second.seq > first.seq);
}

/// Migration 0014 (issue 30): a host no Host manifest declares kept its
/// worker's report in `dispatch_labels`; the migration files it under
/// `worker.pam.dev/` (by the key's name part) so it no longer satisfies an
/// operator selector. A declared host's `dispatch_labels` (its
/// `spec.labels`) stay. Rows are written as 0013 left them, then the
/// migration's data step runs on them.
#[tokio::test]
async fn migration_0014_files_worker_reports_under_their_namespace() {
    let pool = fresh_pool().await.unwrap();
    let store = PgStore::new(pool.clone());
    let reported = host(
        "reported",
        &[("secure", "true"), ("example.com/gpu", "a100")],
    );
    let mut declared = host("declared", &[("pool", "fast")]);
    declared.meta.spec = serde_json::json!({"platform": "linux"});
    let mut tx = store.begin().await.unwrap();
    tx.insert_host(&reported).await.unwrap();
    tx.insert_host(&declared).await.unwrap();
    tx.commit().await.unwrap();

    let sql = include_str!("../../migrations/0014_host_worker_labels.sql");
    let step = &sql[sql.find("UPDATE hosts").expect("the data step")..];
    sqlx::query(step).execute(&pool).await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let r = tx.get_host(reported.id).await.unwrap().unwrap();
    let d = tx.get_host(declared.id).await.unwrap().unwrap();
    tx.commit().await.unwrap();
    assert!(r.dispatch_labels.is_empty(), "{r:?}");
    let want: pam_store::Labels = [
        ("worker.pam.dev/gpu".to_string(), "a100".to_string()),
        ("worker.pam.dev/secure".to_string(), "true".to_string()),
    ]
    .into();
    assert_eq!(r.worker_labels, want);
    assert_eq!(r.labels(), want);
    assert_eq!(d.dispatch_labels, declared.dispatch_labels);
    assert!(d.worker_labels.is_empty());
}
