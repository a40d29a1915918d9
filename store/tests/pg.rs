//! The Store conformance suite against [`PgStore`] (a fresh migrated
//! database per test), plus the PostgreSQL-only concurrency check.

use std::collections::HashMap;

use conformance::{host, item, project, run, t};
use pam_manifests::state::RunStatus;
use pam_store::postgres::PgStore;
use pam_store::prelude::*;
use pam_store::{Host, Position, RunFilter};
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
    tx.insert(&p).await.unwrap();
    let task = tx.insert_work_item(&item(&p, None, "task")).await.unwrap();
    for h in &hosts {
        tx.insert(h).await.unwrap();
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

/// Waits until no committed event of this database waits behind a
/// transaction in flight (the horizon is the shared cluster's).
async fn settled(store: &PgStore) {
    for _ in 0..1000 {
        if !store.read_journal(Position::START, 0).await.unwrap().held {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the journal's horizon stayed behind for 10 s");
}

/// Journaling transactions do not wait for each other (they used
/// to, one advisory lock ordering every commit), and followers read only
/// finished transactions, in (xid, seq) order: an event committed behind a
/// transaction still in flight waits for it, and a transaction that began
/// writing first comes first even with the higher seq.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_commit_concurrently_and_followers_wait_for_the_horizon() {
    use serde_json::json;
    let store = PgStore::new(fresh_pool().await.unwrap());
    let start = store.begin().await.unwrap().journal_end().await.unwrap();
    let mut tx1 = store.begin().await.unwrap();
    let first = tx1.append_event("a", json!({}), t(1)).await.unwrap();
    let mut tx2 = store.begin().await.unwrap();
    let second = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let e = tx2.append_event("b", json!({}), t(2)).await.unwrap();
        tx2.commit().await.unwrap();
        e
    })
    .await
    .expect("the second appender waited for the first to commit");
    assert!(second.seq > first.seq && second.xid > first.xid);
    // Committed, but behind the first, still in flight: a reader that
    // delivered it now would pass the first's place for ever.
    let page = store.read_journal(start, 100).await.unwrap();
    assert!(page.events.iter().all(|e| e.seq != second.seq), "{page:?}");
    assert!(page.held);
    tx1.commit().await.unwrap();
    settled(&store).await;
    let page = store.read_journal(start, 100).await.unwrap();
    let seqs: Vec<i64> = page.events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [first.seq, second.seq]);

    // A transaction that wrote first (its id older) but journals last.
    let mut early = store.begin().await.unwrap();
    early.insert(&host("early", &[])).await.unwrap();
    let mut late = store.begin().await.unwrap();
    let c = late.append_event("c", json!({}), t(3)).await.unwrap();
    late.commit().await.unwrap();
    let d = early.append_event("d", json!({}), t(4)).await.unwrap();
    early.commit().await.unwrap();
    assert!(d.seq > c.seq && d.xid < c.xid);
    settled(&store).await;
    let mut tx = store.begin().await.unwrap();
    let after = tx.journal_after(second.position(), 100).await.unwrap();
    let seqs: Vec<i64> = after.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        [d.seq, c.seq],
        "the journal's order is the transactions'"
    );
    // A resume from d (its seq) continues with c.
    let at = tx.journal_position(d.seq).await.unwrap();
    assert_eq!(at, d.position());
    let rest: Vec<i64> = tx
        .journal_after(at, 100)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(rest, [c.seq]);
}

/// Migration 0014: a host no Host manifest declares kept its
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
    tx.insert(&reported).await.unwrap();
    tx.insert(&declared).await.unwrap();
    tx.commit().await.unwrap();

    let sql = include_str!("../../migrations/0014_host_worker_labels.sql");
    let step = &sql[sql.find("UPDATE hosts").expect("the data step")..];
    sqlx::query(step).execute(&pool).await.unwrap();

    let mut tx = store.begin().await.unwrap();
    let r = tx.get::<Host>(reported.id).await.unwrap().unwrap();
    let d = tx.get::<Host>(declared.id).await.unwrap().unwrap();
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
