//! An attach lease and its event are one transaction. Before,
//! the lease committed on its own and `run.lease_acquired` was journaled
//! in a second transaction, so a pamd killed in between kept a lease that
//! no event announced. Now the lease rules write both in the caller's
//! transaction: rolled back, neither exists; committed, both do.

mod common;

use pam_store::Project;
use std::time::Duration;

use axum::http::StatusCode;
use pam_controller::api::AppState;
use pam_controller::clock::Clock;
use pam_controller::rules::leases::{self, Acquirer};

const TREE: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {displayName: Web}\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: cart, project: web}\nspec: {title: Cart}\n---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: web}\nspec: {task: cart, provider: claude, prompt: hi, cwd: /tmp}\n";

async fn lease_events(state: &AppState) -> usize {
    let mut tx = state.ctx.store.begin().await.unwrap();
    let n = tx
        .events_after(0, 1000)
        .await
        .unwrap()
        .iter()
        .filter(|e| e.topic.starts_with("run.lease_"))
        .count();
    n
}

#[tokio::test]
async fn a_lease_and_its_event_commit_together_or_not_at_all() {
    let (state, clock) = common::pg_state().await;
    let token = common::operator_token(&state).await;
    let (s, v) = common::apply(&state, &token, "tree.yaml", TREE).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let run = {
        let mut tx = state.ctx.store.begin().await.unwrap();
        let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
        tx.get_run_by_name(p.id, "r1").await.unwrap().unwrap()
    };
    let who = || Acquirer {
        run_id: run.id,
        attempt: run.attempt,
        holder: "alice",
        token_id: None,
        ttl: Duration::from_secs(30),
    };

    // The process dies before the commit: the transaction is dropped.
    let mut tx = state.ctx.store.begin().await.unwrap();
    leases::acquire(tx.as_mut(), who(), clock.now())
        .await
        .unwrap()
        .unwrap();
    assert!(tx.has_events(), "the event is in the lease's transaction");
    drop(tx);
    assert_eq!(lease_events(&state).await, 0);

    // Neither the lease nor its event exists: another acquirer gets it at
    // once, and its commit carries exactly its event.
    let mut tx = state.ctx.store.begin().await.unwrap();
    let lease = leases::acquire(tx.as_mut(), who(), clock.now())
        .await
        .unwrap()
        .expect("no lease was left behind by the dropped transaction");
    state.ctx.commit(tx).await.unwrap();
    assert_eq!(lease_events(&state).await, 1);

    // Released and journaled in one transaction too.
    let mut tx = state.ctx.store.begin().await.unwrap();
    leases::release(tx.as_mut(), run.id, lease.id, clock.now())
        .await
        .unwrap()
        .unwrap();
    drop(tx);
    assert_eq!(lease_events(&state).await, 1);
    let mut tx = state.ctx.store.begin().await.unwrap();
    leases::release(tx.as_mut(), run.id, lease.id, clock.now())
        .await
        .unwrap()
        .expect("the dropped release left the lease held");
    state.ctx.commit(tx).await.unwrap();
    assert_eq!(lease_events(&state).await, 2);
}
