//! Task dependencies on MemStore with a moved clock: the
//! dispatch gate, the dispatch timeout (OQ-15) counted from when a run
//! became dispatchable, `dependency_cancelled`, and nothing lost across a
//! pamd restart. Tasks, links and runs are created through apply, as an
//! operator does.

mod common;

use std::sync::Arc;

use chrono::{DateTime, TimeZone, Utc};
use pam_controller::apply::{self, ApplyError, ApplyRequest, FileIn};
use pam_controller::clock::ManualClock;
use pam_controller::ctx::{Ctx, Thresholds};
use pam_controller::fleet::claims;
use pam_controller::reconcile;
use pam_controller::rules::work_items;
use pam_manifests::state::{FailureReason, Platform, RunStatus, WorkItemStatus};
use pam_store::memory::MemStore;
use pam_store::{Host, Project, Run};
use uuid::Uuid;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap()
}

struct World {
    ctx: Ctx,
    clock: Arc<ManualClock>,
}

const PROJECT: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: web\nspec: {}\n";

/// A Task of project web with these dependencies, and one run of it
/// (`run-<name>`).
fn task_and_run(name: &str, deps: &[&str]) -> String {
    let deps = if deps.is_empty() {
        String::new()
    } else {
        format!("  dependsOn: [{}]\n", deps.join(", "))
    };
    format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: {name}\n  project: web\nspec:\n  title: {name}\n{deps}---\n\
         apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: run-{name}\n  project: web\nspec:\n  task: {name}\n  provider: claude\n  cwd: /tmp\n"
    )
}

impl World {
    async fn new() -> World {
        let clock = Arc::new(ManualClock::new(t0()));
        let ctx = Ctx::new(
            Arc::new(MemStore::new()),
            clock.clone(),
            Thresholds::default(),
        );
        World { ctx, clock }
    }

    fn advance(&self, secs: i64) {
        self.clock.advance(chrono::Duration::seconds(secs));
    }

    async fn apply(&self, text: &str) -> Result<(), ApplyError> {
        let req = ApplyRequest {
            files: vec![FileIn {
                name: "deps.yaml".into(),
                content: text.into(),
            }],
            ..serde_json::from_value(serde_json::json!({})).unwrap()
        };
        apply::apply(&self.ctx, &req).await.map(drop)
    }

    /// Tasks with one run each: `(name, deps)`.
    async fn graph(&self, tasks: &[(&str, &[&str])]) {
        let mut docs = vec![PROJECT.to_string()];
        docs.extend(tasks.iter().map(|(n, d)| task_and_run(n, d)));
        self.apply(&docs.join("---\n")).await.unwrap();
    }

    async fn host(&self, name: &str, capacity: i32) -> Host {
        let now = self.ctx.now();
        let h = Host {
            capacity,
            ..Host::new(name.into(), Platform::Linux, now)
        };
        let mut tx = self.ctx.store.begin().await.unwrap();
        tx.insert(&h).await.unwrap();
        self.ctx.commit(tx).await.unwrap();
        self.heartbeat(&h).await
    }

    async fn heartbeat(&self, h: &Host) -> Host {
        let mut tx = self.ctx.store.begin().await.unwrap();
        let row = tx.get::<Host>(h.id).await.unwrap().unwrap();
        let (h, _) = pam_controller::rules::hosts::present(
            tx.as_mut(),
            row,
            Some(h.instance_id.unwrap_or_else(Uuid::new_v4)),
            self.ctx.thresholds.offline_after,
            self.ctx.now(),
        )
        .await
        .unwrap();
        self.ctx.commit(tx).await.unwrap();
        h
    }

    async fn claim(&self, h: &Host) -> Vec<String> {
        let mut names: Vec<String> = claims::claim(&self.ctx, h.id, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.name)
            .collect();
        names.sort();
        names
    }

    async fn run(&self, name: &str) -> Run {
        let mut tx = self.ctx.store.begin().await.unwrap();
        let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
        tx.get_run_by_name(p.id, name).await.unwrap().unwrap()
    }

    /// The task's status verb (`pamctl task done|cancel|reopen`).
    async fn task_to(&self, name: &str, to: WorkItemStatus) {
        let mut tx = self.ctx.store.begin().await.unwrap();
        let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
        let w = tx.get_work_item_by_name(p.id, name).await.unwrap().unwrap();
        work_items::set_status(tx.as_mut(), &w, to, "web", self.ctx.now())
            .await
            .unwrap();
        self.ctx.commit(tx).await.unwrap();
    }

    /// [`World::finish`], a pass, and what `h` can claim then.
    async fn finish_then_claim(&self, h: &Host, run: &str, task: &str) -> Vec<String> {
        self.finish(h, run, task).await;
        reconcile::pass(&self.ctx).await.unwrap();
        self.claim(h).await
    }

    /// The worker reports the run exited 0 (spawning → running → exited),
    /// and the operator marks its task done.
    async fn finish(&self, h: &Host, run: &str, task: &str) {
        use pam_manifests::protocol::{Signal, SignalKind};
        let r = self.run(run).await;
        for kind in [SignalKind::Started, SignalKind::Finished] {
            let mut s = Signal::new(r.id, r.attempt, kind, "2026-01-01T12:00:00Z".into());
            if kind == SignalKind::Finished {
                s.exit_code = Some(0);
            }
            reconcile::ingest::ingest(&self.ctx, h, &[s]).await.unwrap();
        }
        assert_eq!(self.run(run).await.status, RunStatus::Exited);
        self.task_to(task, WorkItemStatus::Done).await;
    }
}

#[tokio::test]
async fn a_chain_runs_strictly_in_order() {
    let w = World::new().await;
    w.graph(&[("a", &[]), ("b", &["a"]), ("c", &["b"])]).await;
    let h = w.host("h", 4).await;
    assert_eq!(w.claim(&h).await, ["run-a"]);
    reconcile::pass(&w.ctx).await.unwrap();
    assert!(w.claim(&h).await.is_empty(), "b waits for a");
    w.finish(&h, "run-a", "a").await;
    // Level-triggered: the next pass makes b dispatchable, not the done.
    assert!(w.claim(&h).await.is_empty());
    w.advance(1);
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_unblocked, 1);
    assert_eq!(w.claim(&h).await, ["run-b"]);
    reconcile::pass(&w.ctx).await.unwrap();
    assert!(w.claim(&h).await.is_empty(), "c waits for b");
    assert_eq!(w.finish_then_claim(&h, "run-b", "b").await, ["run-c"]);
}

#[tokio::test]
async fn a_diamond_runs_the_middle_in_parallel() {
    let w = World::new().await;
    w.graph(&[("a", &[]), ("b", &["a"]), ("c", &["a"]), ("d", &["b", "c"])])
        .await;
    let h = w.host("h", 4).await;
    assert_eq!(w.claim(&h).await, ["run-a"]);
    assert_eq!(
        w.finish_then_claim(&h, "run-a", "a").await,
        ["run-b", "run-c"],
        "both middle runs at once"
    );
    assert!(
        w.finish_then_claim(&h, "run-b", "b").await.is_empty(),
        "d still waits for c"
    );
    assert_eq!(w.finish_then_claim(&h, "run-c", "c").await, ["run-d"]);
}

#[tokio::test]
async fn blocked_longer_than_the_dispatch_timeout_is_not_failed_by_it() {
    let w = World::new().await;
    w.graph(&[("a", &[]), ("b", &["a"])]).await;
    let mut h = w.host("h", 4).await;
    assert_eq!(w.claim(&h).await, ["run-a"]);
    // Two hours of work on a (the timeout is 5 minutes), the host alive.
    for _ in 0..240 {
        w.advance(30);
        h = w.heartbeat(&h).await;
        let p = reconcile::pass(&w.ctx).await.unwrap();
        assert_eq!(p.runs_timed_out, 0);
    }
    assert_eq!(w.run("run-b").await.status, RunStatus::Pending);
    w.finish(&h, "run-a", "a").await;
    // Disable the host: b is dispatchable now and its window (OQ-15)
    // starts now, not at its creation two hours ago.
    common::disable_host(&w.ctx, h.id).await;
    reconcile::pass(&w.ctx).await.unwrap();
    let b = w.run("run-b").await;
    assert_eq!(b.dispatchable_since, Some(w.ctx.now()));
    assert_eq!(b.pending_since, t0(), "the seed's anchor is unchanged");
    for _ in 0..9 {
        w.advance(30);
        h = w.heartbeat(&h).await;
        assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_timed_out, 0);
    }
    w.advance(31);
    w.heartbeat(&h).await;
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_timed_out, 1);
    let b = w.run("run-b").await;
    assert_eq!(b.failure_reason, Some(FailureReason::NoEligibleHost));
}

#[tokio::test]
async fn cancelling_a_dependency_fails_the_dependent_run() {
    let w = World::new().await;
    w.graph(&[("a", &[]), ("b", &["a"]), ("c", &["a"])]).await;
    // c's dependency is cancelled and reopened before a pass: it waits on.
    w.task_to("a", WorkItemStatus::Cancelled).await;
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(p.runs_dependency_cancelled, 2);
    for name in ["run-b", "run-c"] {
        let r = w.run(name).await;
        assert_eq!(r.status, RunStatus::Failed);
        assert_eq!(r.failure_reason, Some(FailureReason::DependencyCancelled));
        assert_eq!(
            r.failure_message.as_deref(),
            Some("task \"a\" it depends on was cancelled")
        );
    }
    // Journaled with the cancelled task; never restarted.
    let mut tx = w.ctx.store.begin().await.unwrap();
    let failed: Vec<_> = tx
        .events_after(0, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.topic == "run.failed")
        .collect();
    drop(tx);
    assert_eq!(failed.len(), 2);
    assert_eq!(failed[0].payload["failure_reason"], "dependency_cancelled");
    assert!(failed[0].payload["message"]
        .as_str()
        .unwrap()
        .contains("\"a\""));
    w.advance(600);
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_requeued, 0);
}

#[tokio::test]
async fn a_dependency_reopened_before_the_pass_keeps_the_run_waiting() {
    let w = World::new().await;
    w.graph(&[("a", &[]), ("b", &["a"])]).await;
    w.task_to("a", WorkItemStatus::Cancelled).await;
    w.task_to("a", WorkItemStatus::Todo).await;
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(p.runs_dependency_cancelled, 0);
    assert_eq!(w.run("run-b").await.status, RunStatus::Pending);
}

#[tokio::test]
async fn a_reopened_dependency_blocks_again() {
    let w = World::new().await;
    w.graph(&[("a", &[]), ("b", &["a"])]).await;
    w.task_to("a", WorkItemStatus::Done).await;
    reconcile::pass(&w.ctx).await.unwrap();
    assert!(w.run("run-b").await.dispatchable_since.is_some());
    w.task_to("a", WorkItemStatus::Doing).await;
    let h = w.host("h", 4).await;
    // The claim sees the reopened dependency before any pass does.
    assert_eq!(w.claim(&h).await, ["run-a"]);
    reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(w.run("run-b").await.dispatchable_since, None);
    let topics: Vec<String> = {
        let mut tx = w.ctx.store.begin().await.unwrap();
        tx.events_after(0, 1000)
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.topic)
            .filter(|t| t == "run.blocked" || t == "run.unblocked")
            .collect()
    };
    assert_eq!(topics, ["run.unblocked", "run.blocked"]);
}

#[tokio::test]
async fn a_pamd_restart_while_runs_are_blocked_loses_nothing() {
    let mut w = World::new().await;
    w.graph(&[("a", &[]), ("b", &["a"]), ("c", &["b"])]).await;
    let h = w.host("h", 4).await;
    assert_eq!(w.claim(&h).await, ["run-a"]);
    // pamd restarts (a new context on the same store) with b and c blocked.
    w.ctx = Ctx::new(w.ctx.store.clone(), w.clock.clone(), Thresholds::default());
    w.advance(10);
    let h = w.heartbeat(&h).await;
    reconcile::pass(&w.ctx).await.unwrap();
    assert!(w.claim(&h).await.is_empty());
    assert_eq!(w.finish_then_claim(&h, "run-a", "a").await, ["run-b"]);
    assert_eq!(w.finish_then_claim(&h, "run-b", "b").await, ["run-c"]);
}

#[tokio::test]
async fn a_cycle_is_refused_and_nothing_is_written() {
    let w = World::new().await;
    let text = [
        PROJECT.to_string(),
        task_and_run("a", &["b"]),
        task_and_run("b", &["a"]),
    ]
    .join("---\n");
    match w.apply(&text).await {
        Err(ApplyError::Invalid(errors)) => {
            assert_eq!(errors.len(), 1, "{errors:#?}");
            assert!(errors[0].to_string().contains("a → b → a"), "{}", errors[0]);
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
    let mut tx = w.ctx.store.begin().await.unwrap();
    assert!(tx.by_name::<Project>((), "web").await.unwrap().is_none());
}

#[tokio::test]
async fn a_cycle_through_stored_links_is_refused() {
    let w = World::new().await;
    w.graph(&[("a", &[]), ("b", &["a"]), ("c", &["b"])]).await;
    let text = "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: a\n  project: web\nspec:\n  title: a\n  dependsOn: [c]\n";
    match w.apply(text).await {
        Err(ApplyError::Invalid(errors)) => {
            assert!(
                errors[0].to_string().contains("a → c → b → a")
                    && errors[0].to_string().contains("c → b (stored)"),
                "{}",
                errors[0]
            );
        }
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[tokio::test]
async fn links_follow_the_manifests_in_any_order_and_reapply_is_idempotent() {
    let w = World::new().await;
    // b names a, declared later in the same batch.
    w.graph(&[("b", &["a"]), ("a", &[])]).await;
    let h = w.host("h", 4).await;
    assert_eq!(w.claim(&h).await, ["run-a"]);
    let events = |w: &World| {
        let store = w.ctx.store.clone();
        async move {
            let mut tx = store.begin().await.unwrap();
            tx.events_after(0, 10_000).await.unwrap().len()
        }
    };
    // The same input again changes nothing: no generation, no event.
    let before = events(&w).await;
    let gen = |w: &World| {
        let store = w.ctx.store.clone();
        async move {
            let mut tx = store.begin().await.unwrap();
            let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
            let b = tx.get_work_item_by_name(p.id, "b").await.unwrap().unwrap();
            (
                b.meta.generation,
                tx.dependencies_of(&[b.id]).await.unwrap().len(),
            )
        }
    };
    assert_eq!(gen(&w).await, (1, 1));
    w.graph(&[("b", &["a"]), ("a", &[])]).await;
    assert_eq!(events(&w).await, before);
    assert_eq!(gen(&w).await, (1, 1));
    // Dropping the link from the manifest unblocks b on the next pass.
    w.graph(&[("b", &[]), ("a", &[])]).await;
    assert_eq!(gen(&w).await, (2, 0));
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_unblocked, 1);
    assert_eq!(w.claim(&h).await, ["run-b"]);
}
