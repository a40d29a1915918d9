//! Fencing of the loops' commits on real PostgreSQL: a
//! context fenced by a term that lost the lease commits nothing, and a
//! takeover waits for a fenced transaction that already passed its check.

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeZone, Utc};
use pam_controller::clock::ManualClock;
use pam_controller::ctx::{Ctx, Fence, Thresholds};
use pam_manifests::state::ProjectStatus;
use pam_store::postgres::PgStore;
use pam_store::prelude::*;
use pam_store::{Meta, Project, StoreError};
use uuid::Uuid;

fn project(slug: &str) -> Project {
    let now = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    Project {
        id: Uuid::new_v4(),
        name: slug.into(),
        slug: slug.into(),
        description: String::new(),
        status: ProjectStatus::Active,
        meta: Meta::default(),
        created_at: now,
        updated_at: now,
    }
}

async fn lead(store: &dyn Store, holder: &str, instance: Uuid, at: i64) -> Option<i64> {
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let mut tx = store.begin().await.unwrap();
    let term = tx
        .lead(
            "loops",
            holder,
            instance,
            chrono::Duration::seconds(10),
            t0 + chrono::Duration::seconds(at),
        )
        .await
        .unwrap();
    tx.commit().await.unwrap();
    term
}

#[tokio::test]
async fn a_leader_that_lost_the_lease_commits_nothing() {
    let store: Arc<dyn Store> = Arc::new(PgStore::new(
        pam_testkit::testdb::fresh_pool().await.unwrap(),
    ));
    let clock = Arc::new(ManualClock::new(Utc::now()));
    let ctx = Ctx::new(store.clone(), clock, Thresholds::default());
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let fence_a = Arc::new(Fence::new("loops"));
    let fence_b = Arc::new(Fence::new("loops"));
    let (ctx_a, ctx_b) = (ctx.fenced(fence_a.clone()), ctx.fenced(fence_b.clone()));

    // Not leading: a fenced context writes nothing.
    let mut tx = store.begin().await.unwrap();
    tx.insert(&project("none")).await.unwrap();
    assert!(matches!(ctx_a.commit(tx).await, Err(StoreError::Fenced(_))));

    fence_a.set(lead(store.as_ref(), "a", a, 0).await.unwrap());
    let mut tx = store.begin().await.unwrap();
    tx.insert(&project("by-a")).await.unwrap();
    ctx_a.commit(tx).await.unwrap();

    // a pauses past its lease; b takes over (term 2). a, resumed, still
    // believes it leads: its commit is refused and writes nothing.
    fence_b.set(lead(store.as_ref(), "b", b, 11).await.unwrap());
    assert_eq!(fence_b.term(), 2);
    let mut tx = store.begin().await.unwrap();
    tx.insert(&project("late-a")).await.unwrap();
    let err = ctx_a.commit(tx).await.unwrap_err();
    assert!(matches!(err, StoreError::Fenced(_)), "{err}");
    let mut tx = store.begin().await.unwrap();
    tx.insert(&project("by-b")).await.unwrap();
    ctx_b.commit(tx).await.unwrap();
    let mut tx = store.begin().await.unwrap();
    let slugs: Vec<String> = tx
        .list::<Project>(())
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.slug)
        .collect();
    assert!(slugs.contains(&"by-a".to_string()));
    assert!(slugs.contains(&"by-b".to_string()));
    assert!(!slugs.contains(&"late-a".to_string()), "{slugs:?}");
    assert!(!slugs.contains(&"none".to_string()), "{slugs:?}");
}

#[tokio::test]
async fn a_takeover_waits_for_a_fenced_transaction_in_flight() {
    let store: Arc<dyn Store> = Arc::new(PgStore::new(
        pam_testkit::testdb::fresh_pool().await.unwrap(),
    ));
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    assert_eq!(lead(store.as_ref(), "a", a, 0).await, Some(1));
    // a's transaction passed the fence; b's takeover (the lease expired)
    // waits for it, so what a commits, it committed as the leader.
    let mut tx = store.begin().await.unwrap();
    tx.fence("loops", 1).await.unwrap();
    tx.insert(&project("in-flight")).await.unwrap();
    let other = store.clone();
    let takeover = tokio::spawn(async move { lead(other.as_ref(), "b", b, 11).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!takeover.is_finished(), "the takeover waits");
    tx.commit().await.unwrap();
    assert_eq!(takeover.await.unwrap(), Some(2));
}
