//! Unit tests of the controller loops on MemStore with a moved clock: no
//! sleeps, every threshold crossed by advancing time. Each test is one of
//! the seed's rules.

mod common;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use pam_controller::clock::{Clock, ManualClock};
use pam_controller::ctx::{Ctx, Thresholds};
use pam_controller::fleet::claims;
use pam_controller::reconcile::{self, ingest};
use pam_controller::rules::hosts as identity;
use pam_manifests::protocol::{Signal, SignalKind, SignalOutcome, TokenUsage};
use pam_manifests::state::{
    FailureReason, HostStatus, Platform, ProjectStatus, RunStatus, WorkItemKind, WorkItemStatus,
};
use pam_store::memory::MemStore;
use pam_store::prelude::*;
use pam_store::{Event, Host, Meta, Project, Run, Target, WorkItem};
use uuid::Uuid;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap()
}

struct World {
    ctx: Ctx,
    clock: Arc<ManualClock>,
    project: Uuid,
    task: Uuid,
}

impl World {
    async fn new() -> World {
        World::with_store(Arc::new(MemStore::new())).await
    }

    async fn with_store(store: Arc<dyn Store>) -> World {
        let clock = Arc::new(ManualClock::new(t0()));
        let ctx = Ctx::new(store, clock.clone(), Thresholds::default());
        let (project, task) = seed_project(&ctx, WorkItemKind::Task).await;
        World {
            ctx,
            clock,
            project,
            task,
        }
    }

    /// pamd starts again (after a crash) on the same database: a new
    /// context, as `pamd` builds at start, at the clock's current time.
    fn restart_pamd(&mut self) {
        self.ctx = Ctx::new(
            self.ctx.store.clone(),
            self.clock.clone(),
            Thresholds::default(),
        );
    }

    fn advance(&self, secs: u64) {
        self.clock.advance(chrono::Duration::seconds(secs as i64));
    }

    async fn host(&self, name: &str, labels: &[(&str, &str)]) -> Host {
        let now = self.clock.now();
        let dispatch_labels = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let h = Host {
            capacity: 2,
            dispatch_labels,
            ..Host::new(name.into(), Platform::Linux, now)
        };
        let mut tx = self.ctx.store.begin().await.unwrap();
        tx.insert(&h).await.unwrap();
        self.ctx.commit(tx).await.unwrap();
        // Bring it online the way a worker does: a registration.
        self.present(h.id, Some(Uuid::new_v4())).await.0
    }

    async fn present(&self, host: Uuid, instance: Option<Uuid>) -> (Host, identity::Presence) {
        let mut tx = self.ctx.store.begin().await.unwrap();
        let h = tx.get::<Host>(host).await.unwrap().unwrap();
        let out = identity::present(
            tx.as_mut(),
            h,
            instance,
            self.ctx.thresholds.offline_after,
            self.clock.now(),
        )
        .await
        .unwrap();
        self.ctx.commit(tx).await.unwrap();
        out
    }

    async fn run(&self, name: &str, target: Target, max_attempts: i32) -> Run {
        new_run(
            &self.ctx,
            self.project,
            self.task,
            name,
            target,
            max_attempts,
        )
        .await
    }

    async fn get_run(&self, id: Uuid) -> Run {
        let mut tx = self.ctx.store.begin().await.unwrap();
        tx.get_run(id).await.unwrap().unwrap()
    }

    async fn get_host(&self, id: Uuid) -> Host {
        let mut tx = self.ctx.store.begin().await.unwrap();
        tx.get::<Host>(id).await.unwrap().unwrap()
    }

    async fn events(&self) -> Vec<Event> {
        let mut tx = self.ctx.store.begin().await.unwrap();
        tx.events_after(0, 10_000).await.unwrap()
    }

    async fn topics_for(&self, run: Uuid) -> Vec<(String, i64)> {
        self.events()
            .await
            .into_iter()
            .filter(|e| e.payload["run_id"] == serde_json::json!(run))
            .map(|e| (e.topic, e.payload["attempt"].as_i64().unwrap()))
            .collect()
    }

    async fn signal(&self, host: &Host, sig: Signal) -> SignalOutcome {
        match ingest::ingest(&self.ctx, host, &[sig]).await.unwrap() {
            ingest::BatchOutcome::Applied { results: r, .. } => r[0].outcome,
            ingest::BatchOutcome::Rejected { results: r, .. } => r[0].outcome,
        }
    }
}

async fn seed_project(ctx: &Ctx, kind: WorkItemKind) -> (Uuid, Uuid) {
    let now = ctx.now();
    let p = Project {
        id: Uuid::new_v4(),
        name: "Web".into(),
        slug: format!("web-{}", &Uuid::new_v4().simple().to_string()[..6]),
        description: String::new(),
        status: ProjectStatus::Active,
        meta: Meta::default(),
        created_at: now,
        updated_at: now,
    };
    let w = WorkItem {
        id: Uuid::new_v4(),
        project_id: p.id,
        parent_id: None,
        name: "build".into(),
        kind,
        title: "Build".into(),
        description: String::new(),
        status: WorkItemStatus::Todo,
        assignee: None,
        path: String::new(),
        sort_order: 0,
        meta: Meta::default(),
        created_at: now,
        updated_at: now,
    };
    let mut tx = ctx.store.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    tx.insert_work_item(&w).await.unwrap();
    ctx.commit(tx).await.unwrap();
    (p.id, w.id)
}

async fn new_run(
    ctx: &Ctx,
    project: Uuid,
    task: Uuid,
    name: &str,
    target: Target,
    max_attempts: i32,
) -> Run {
    let now = ctx.now();
    let id = Uuid::new_v4();
    let r = Run {
        provider: "claude".into(),
        prompt: "do it".into(),
        cwd: "/tmp".into(),
        target,
        max_attempts,
        backoff_seconds: 10,
        backoff_max_seconds: 300,
        ..Run::first_attempt(id, (project, task), name, now)
    };
    let mut tx = ctx.store.begin().await.unwrap();
    tx.insert_run(&r).await.unwrap();
    ctx.commit(tx).await.unwrap();
    r
}

fn sig(run: &Run, attempt: i32, kind: SignalKind) -> Signal {
    let mut s = Signal::new(run.id, attempt, kind, "2026-01-01T12:00:00Z".into());
    match kind {
        SignalKind::Finished => s.exit_code = Some(0),
        SignalKind::Progress => s.seq = Some(1),
        SignalKind::Failed => s.reason = Some("spawn_failed".into()),
        _ => {}
    }
    s
}

fn finished(run: &Run, attempt: i32, code: i32) -> Signal {
    let mut s = sig(run, attempt, SignalKind::Finished);
    s.exit_code = Some(code);
    s
}

/// Claims for a host and checks the run landed there.
async fn claim_one(w: &World, host: &Host) -> Run {
    let claimed = claims::claim(&w.ctx, host.id, 10).await.unwrap();
    assert_eq!(claimed.len(), 1, "expected one claim for {}", host.name);
    claimed.into_iter().next().unwrap()
}

#[tokio::test]
async fn liveness_89s_online_91s_offline_host_lost_and_requeue_with_attempt_2() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    w.run("r1", Target::Any, 3).await;
    let run = claim_one(&w, &a).await;
    assert_eq!(run.status, RunStatus::Spawning);
    assert_eq!(
        w.signal(&a, sig(&run, 1, SignalKind::Started)).await,
        SignalOutcome::Applied
    );

    w.advance(89);
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(p.hosts_offline, 0);
    assert_eq!(w.get_host(a.id).await.status, HostStatus::Online);

    w.advance(2); // 91 s of silence
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_host_lost), (1, 1));
    assert_eq!(w.get_host(a.id).await.status, HostStatus::Offline);
    let failed = w.get_run(run.id).await;
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.failure_reason, Some(FailureReason::HostLost));
    // Which host, and when it was last heard from, in words.
    let seen = w.get_host(a.id).await.last_seen_at.unwrap();
    assert_eq!(
        failed.failure_message.as_deref(),
        Some(
            format!(
                "host a stopped heartbeating at {}",
                seen.format("%H:%M:%SZ")
            )
            .as_str()
        )
    );
    let offline_events: Vec<_> = w
        .events()
        .await
        .into_iter()
        .filter(|e| e.topic == "worker.offline")
        .collect();
    assert_eq!(offline_events.len(), 1);

    // The backoff (10 s for the first restart) elapses: requeued, attempt 2,
    // fresh pending_since, per-attempt columns reset, no host.
    w.advance(10);
    let requeue_time = w.clock.now();
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(p.runs_requeued, 1);
    let r = w.get_run(run.id).await;
    assert_eq!(r.status, RunStatus::Pending);
    assert_eq!(r.attempt, 2);
    assert_eq!(r.pending_since, requeue_time);
    assert_eq!(r.host_id, None);
    assert_eq!(r.started_at, None);
    assert_eq!(r.exit_code, None);
    assert_eq!(r.last_progress_seq, None);
    assert_eq!(r.failure_reason, None);

    // It lands on another host; a late signal from the dead attempt is
    // dropped with no write and no event.
    let b = w.host("b", &[]).await;
    let again = claim_one(&w, &b).await;
    assert_eq!((again.id, again.attempt), (run.id, 2));
    let before = w.events().await.len();
    assert_eq!(
        w.signal(&b, finished(&run, 1, 0)).await,
        SignalOutcome::Stale
    );
    assert_eq!(w.events().await.len(), before);
    assert_eq!(w.get_run(run.id).await.status, RunStatus::Spawning);
}

#[tokio::test]
async fn a_host_coming_back_is_online_and_its_old_runs_stay_failed() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    w.run("r1", Target::Any, 1).await;
    let run = claim_one(&w, &a).await;
    w.advance(91);
    reconcile::pass(&w.ctx).await.unwrap();
    let (h, presence) = w.present(a.id, a.instance_id).await;
    assert_eq!(presence, identity::Presence::Pinned);
    assert_eq!(h.status, HostStatus::Online);
    let r = w.get_run(run.id).await;
    assert_eq!(r.status, RunStatus::Failed);
    // maxAttempts 1: no restart policy in play, the reason stays host_lost.
    assert_eq!(r.failure_reason, Some(FailureReason::HostLost));
    assert_eq!(r.requeue_at, None);
    // The old attempt's finished, arriving now, is stale.
    assert_eq!(
        w.signal(&h, finished(&run, 1, 0)).await,
        SignalOutcome::Stale
    );
}

#[tokio::test]
async fn dispatch_timeout_counts_from_pending_since_after_a_late_requeue() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    w.run("r1", Target::Host("a".into()), 2).await;
    let run = claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;
    // 55 minutes of work, heartbeats keeping the host alive.
    for _ in 0..(55 * 2) {
        w.advance(30);
        w.present(a.id, a.instance_id).await;
    }
    assert_eq!(
        w.signal(&a, finished(&run, 1, 1)).await,
        SignalOutcome::Applied
    );
    w.advance(10);
    w.present(a.id, a.instance_id).await;
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_requeued, 1);
    // Disable the only matching host: the run stays pending...
    common::disable_host(&w.ctx, a.id).await;
    // ...well within 5 minutes of the requeue, although created 55 min ago.
    for _ in 0..9 {
        w.advance(30);
        w.present(a.id, a.instance_id).await;
        reconcile::pass(&w.ctx).await.unwrap();
    }
    assert_eq!(w.get_run(run.id).await.status, RunStatus::Pending);
    w.advance(31); // 5 min 1 s after the requeue
    w.present(a.id, a.instance_id).await;
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(p.runs_timed_out, 1);
    let r = w.get_run(run.id).await;
    assert_eq!(r.status, RunStatus::Failed);
    // An eligible host matched during the first attempt's wait, but the
    // requeue reset that: since then only a disabled host matched.
    assert_eq!(r.failure_reason, Some(FailureReason::NoEligibleHost));
    assert_eq!(r.attempt, 2);
    // dispatch timeouts never restart.
    w.advance(600);
    w.present(a.id, a.instance_id).await;
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_requeued, 0);
    assert_eq!(w.get_run(run.id).await.status, RunStatus::Failed);
}

#[tokio::test]
async fn no_eligible_host_versus_dispatch_timeout() {
    let w = World::new().await;
    let a = w.host("a", &[("gpu", "yes")]).await;
    let ghost = w.run("ghost", Target::Host("ghost".into()), 3).await;
    let busy = w
        .run(
            "busy",
            Target::Selector([("gpu".to_string(), "yes".to_string())].into()),
            3,
        )
        .await;
    // Fill host a to capacity with other runs so `busy` is never claimed.
    let mut tx = w.ctx.store.begin().await.unwrap();
    let mut h = tx.get::<Host>(a.id).await.unwrap().unwrap();
    let rv = h.meta.resource_version;
    h.capacity = 0;
    tx.update(&h, rv).await.unwrap();
    w.ctx.commit(tx).await.unwrap();
    reconcile::pass(&w.ctx).await.unwrap();
    w.advance(299);
    w.present(a.id, a.instance_id).await;
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_timed_out, 0);
    w.advance(1);
    w.present(a.id, a.instance_id).await;
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_timed_out, 2);
    let g = w.get_run(ghost.id).await;
    assert_eq!(g.failure_reason, Some(FailureReason::NoEligibleHost));
    let b = w.get_run(busy.id).await;
    assert_eq!(b.failure_reason, Some(FailureReason::DispatchTimeout));
    // run.failed journaled for both, with run_id and attempt.
    for id in [ghost.id, busy.id] {
        assert_eq!(
            w.topics_for(id).await,
            vec![("run.failed".to_string(), 1)],
            "events of {id}"
        );
    }
}

#[tokio::test]
async fn claims_respect_eligibility_capacity_and_targets() {
    let w = World::new().await;
    let a = w.host("a", &[("os", "linux")]).await;
    let b = w.host("b", &[("os", "mac")]).await;
    // Created a second apart: claims take the oldest pending_since first.
    let r1 = w
        .run(
            "r1",
            Target::Selector([("os".into(), "mac".into())].into()),
            1,
        )
        .await;
    w.advance(1);
    let r2 = w.run("r2", Target::Host("a".into()), 1).await;
    w.advance(1);
    let r3 = w.run("r3", Target::Any, 1).await;
    w.advance(1);
    let r4 = w.run("r4", Target::Any, 1).await;
    let on_a = claims::claim(&w.ctx, a.id, 10).await.unwrap();
    // capacity 2: r2 (named) and r3 (oldest Any), never r1 (selector).
    let ids: Vec<_> = on_a.iter().map(|r| r.id).collect();
    assert_eq!(ids, vec![r2.id, r3.id]);
    assert!(on_a.iter().all(|r| r.host_id == Some(a.id)));
    assert_eq!(
        on_a[0].session_name,
        format!("pam-{}", &r2.id.simple().to_string()[..8])
    );
    assert!(claims::claim(&w.ctx, a.id, 10).await.unwrap().is_empty());
    let on_b: Vec<_> = claims::claim(&w.ctx, b.id, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(on_b, vec![r1.id, r4.id]);
    assert_eq!(
        w.topics_for(r1.id).await,
        vec![("run.spawning".to_string(), 1)]
    );
}

#[tokio::test]
async fn disabled_offline_and_suspect_hosts_get_no_runs() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    w.run("r1", Target::Any, 1).await;
    // suspect: a clone presents while the pinned instance is fresh.
    let clone = Uuid::new_v4();
    w.advance(5);
    let (h, p) = w.present(a.id, Some(clone)).await;
    assert_eq!(p, identity::Presence::Flagged);
    assert!(h.instance_suspect);
    assert!(claims::claim(&w.ctx, a.id, 10).await.unwrap().is_empty());
    // offline
    let b = w.host("b", &[]).await;
    w.advance(91);
    reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(w.get_host(b.id).await.status, HostStatus::Offline);
    assert!(claims::claim(&w.ctx, b.id, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn nonzero_exit_restarts_until_exhausted_without_run_failed() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let run = w.run("r1", Target::Any, 2).await;
    claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;
    assert_eq!(
        w.signal(&a, finished(&run, 1, 3)).await,
        SignalOutcome::Applied
    );
    let r = w.get_run(run.id).await;
    assert_eq!(
        (r.status, r.exit_code, r.failure_reason),
        (RunStatus::Failed, Some(3), None)
    );
    w.advance(10);
    w.present(a.id, a.instance_id).await;
    reconcile::pass(&w.ctx).await.unwrap();
    let r2 = claim_one(&w, &a).await;
    assert_eq!(r2.attempt, 2);
    w.signal(&a, sig(&run, 2, SignalKind::Started)).await;
    w.signal(&a, finished(&run, 2, 3)).await;
    let r = w.get_run(run.id).await;
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.failure_reason, Some(FailureReason::RestartExhausted));
    assert_eq!(r.requeue_at, None);
    w.advance(3600);
    w.present(a.id, a.instance_id).await;
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_requeued, 0);
    let topics = w.topics_for(run.id).await;
    assert_eq!(
        topics,
        vec![
            ("run.spawning".to_string(), 1),
            ("run.started".to_string(), 1),
            ("run.finished".to_string(), 1),
            ("run.requeued".to_string(), 2),
            ("run.spawning".to_string(), 2),
            ("run.started".to_string(), 2),
            ("run.finished".to_string(), 2),
        ]
    );
}

#[tokio::test]
async fn a_requeue_journals_run_requeued_and_progress_journals_nothing() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let run = w.run("r1", Target::Any, 3).await;
    claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;
    let before = w.topics_for(run.id).await;
    // progress only moves last_progress_seq: applied, no event.
    let mut p = sig(&run, 1, SignalKind::Progress);
    p.seq = Some(7);
    assert_eq!(w.signal(&a, p).await, SignalOutcome::Applied);
    assert_eq!(w.get_run(run.id).await.last_progress_seq, Some(7));
    assert_eq!(w.topics_for(run.id).await, before);

    // host_lost, then the requeue after the backoff.
    w.advance(91);
    reconcile::pass(&w.ctx).await.unwrap();
    w.advance(10);
    let requeued_at = w.clock.now();
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_requeued, 1);
    let evs: Vec<Event> = w
        .events()
        .await
        .into_iter()
        .filter(|e| e.topic == "run.requeued")
        .collect();
    assert_eq!(evs.len(), 1);
    let p = &evs[0].payload;
    assert_eq!(p["run_id"], serde_json::json!(run.id));
    assert_eq!(p["attempt"], 2);
    assert_eq!(p["status"], "pending");
    assert_eq!(p["previous_attempt"], 1);
    assert_eq!(p["previous_failure_reason"], "host_lost");
    assert_eq!(p["previous_exit_code"], serde_json::Value::Null);
    assert_eq!(
        p["pending_since"],
        pam_controller::clock::ts(requeued_at).as_str()
    );
}

#[tokio::test]
async fn signals_are_exactly_once_and_attempt_guarded() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let b = w.host("b", &[]).await;
    let run = w.run("r1", Target::Host("a".into()), 1).await;
    claim_one(&w, &a).await;
    assert_eq!(
        w.signal(&a, sig(&run, 1, SignalKind::Started)).await,
        SignalOutcome::Applied
    );
    assert_eq!(
        w.signal(&a, sig(&run, 1, SignalKind::Started)).await,
        SignalOutcome::Duplicate
    );
    // progress: only increasing seqs apply.
    let mut p = sig(&run, 1, SignalKind::Progress);
    p.seq = Some(2);
    assert_eq!(w.signal(&a, p.clone()).await, SignalOutcome::Applied);
    p.seq = Some(1);
    assert_eq!(w.signal(&a, p.clone()).await, SignalOutcome::Duplicate);
    assert_eq!(w.get_run(run.id).await.last_progress_seq, Some(2));
    // attempt from the future: rejected, nothing applied.
    let before = w.events().await.len();
    assert_eq!(
        w.signal(&a, finished(&run, 2, 0)).await,
        SignalOutcome::Rejected
    );
    // another host's worker may not report on this run.
    assert_eq!(
        w.signal(&b, finished(&run, 1, 0)).await,
        SignalOutcome::Rejected
    );
    assert_eq!(w.events().await.len(), before);
    // a rejected signal in a batch rolls back the whole batch.
    let batch = [finished(&run, 1, 0), finished(&run, 2, 0)];
    match ingest::ingest(&w.ctx, &a, &batch).await.unwrap() {
        ingest::BatchOutcome::Rejected { results: r, .. } => {
            assert_eq!(r.len(), 1);
            assert_eq!(r[0].index, 1);
        }
        other => panic!("expected a rejected batch, got {other:?}"),
    }
    assert_eq!(w.get_run(run.id).await.status, RunStatus::Running);
    // finished ten times: one effect, one event.
    for _ in 0..10 {
        w.signal(&a, finished(&run, 1, 0)).await;
    }
    let r = w.get_run(run.id).await;
    assert_eq!((r.status, r.exit_code), (RunStatus::Exited, Some(0)));
    let finished_events = w
        .topics_for(run.id)
        .await
        .into_iter()
        .filter(|(t, _)| t == "run.finished")
        .count();
    assert_eq!(finished_events, 1);
}

/// The signal sequence of four runs' whole lives, interleaved, with
/// redeliveries, out-of-order progress and stale signals mixed in.
fn life_signals(r: &[Run]) -> Vec<Signal> {
    let progress = |run: &Run, seq: i64| {
        let mut s = sig(run, 1, SignalKind::Progress);
        s.seq = Some(seq);
        s
    };
    let mut hook = sig(&r[2], 1, SignalKind::Failed);
    hook.reason = Some("provider_failed".into());
    vec![
        sig(&r[0], 1, SignalKind::Started),
        progress(&r[0], 1),
        sig(&r[1], 1, SignalKind::Started),
        progress(&r[0], 3),
        sig(&r[0], 1, SignalKind::Started),
        progress(&r[0], 2),
        // r1 fails with a non-zero exit (restartable: requeue_at set).
        finished(&r[1], 1, 7),
        sig(&r[2], 1, SignalKind::Started),
        finished(&r[1], 1, 7),
        progress(&r[1], 9),
        hook,
        finished(&r[0], 1, 0),
        // r2: a provider hook failure, then its finished.
        finished(&r[2], 1, 1),
        // r3 never got `started`: finished implies it.
        finished(&r[3], 1, 0),
        // A late `started` of a run that ended: no marker was written for
        // it (finished implied it), so it is stale, not a duplicate.
        sig(&r[3], 1, SignalKind::Started),
        sig(&r[3], 1, SignalKind::Lost),
        finished(&r[0], 1, 0),
    ]
}

/// The `run.*` events after the claim as (topic, index of the run in
/// `runs`, status).
async fn run_journal(w: &World, runs: &[Run]) -> Vec<(String, Option<usize>, serde_json::Value)> {
    w.events()
        .await
        .into_iter()
        // The claim's run.spawning events are in claim order, which ties
        // on pending_since break by (random) id: leave them out.
        .filter(|e| e.topic.starts_with("run.") && e.topic != "run.spawning")
        .map(|e| {
            let i = runs
                .iter()
                .position(|r| e.payload["run_id"] == serde_json::json!(r.id));
            (e.topic, i, e.payload["status"].clone())
        })
        .collect()
}

/// A batch is decided in memory and written set-based; it must leave the
/// store exactly as the same signals sent one by one do: the same
/// outcomes, the same run rows and the same journal, in order.
#[tokio::test]
async fn a_batch_decides_exactly_as_the_same_signals_one_by_one() {
    async fn world() -> (World, Host, Vec<Run>) {
        let w = World::new().await;
        let mut a = w.host("a", &[]).await;
        let mut tx = w.ctx.store.begin().await.unwrap();
        a.capacity = 4;
        let a = tx.update(&a, a.meta.resource_version).await.unwrap();
        w.ctx.commit(tx).await.unwrap();
        let mut runs = Vec::new();
        for i in 0..4 {
            runs.push(w.run(&format!("r{i}"), Target::Any, 3).await);
        }
        claims::claim(&w.ctx, a.id, 10).await.unwrap();
        (w, a, runs)
    }
    let (one, a1, runs1) = world().await;
    let (batch, a2, runs2) = world().await;
    let mut outcomes1 = Vec::new();
    for s in life_signals(&runs1) {
        outcomes1.push(one.signal(&a1, s).await);
    }
    let outcomes2: Vec<SignalOutcome> = match ingest::ingest(&batch.ctx, &a2, &life_signals(&runs2))
        .await
        .unwrap()
    {
        ingest::BatchOutcome::Applied { results: r, .. } => {
            r.into_iter().map(|r| r.outcome).collect()
        }
        other => panic!("expected an applied batch, got {other:?}"),
    };
    assert_eq!(outcomes1, outcomes2);
    use SignalOutcome::{Applied as A, Duplicate as D, Stale as S};
    assert_eq!(
        outcomes1,
        vec![A, A, A, A, D, D, A, A, D, S, A, A, A, A, S, S, D]
    );
    // Same rows (ids and names differ between the worlds: compare the
    // state each run reached).
    for (r1, r2) in runs1.iter().zip(&runs2) {
        assert_eq!(
            common::signal_state(&one.get_run(r1.id).await),
            common::signal_state(&batch.get_run(r2.id).await),
            "run {}",
            r1.name
        );
    }
    let r1 = one.get_run(runs1[1].id).await;
    assert_eq!(
        (r1.status, r1.exit_code, r1.requeue_at.is_some()),
        (RunStatus::Failed, Some(7), true)
    );
    // Same journal, in the same order (run ids mapped across the worlds).
    let j1 = run_journal(&one, &runs1).await;
    assert_eq!(j1, run_journal(&batch, &runs2).await);
    let topics: Vec<&str> = j1.iter().map(|(t, _, _)| t.as_str()).collect();
    assert_eq!(
        topics,
        [
            "run.started",
            "run.started",
            "run.finished",
            "run.started",
            "run.failed",
            "run.finished",
            "run.finished",
            "run.started",
            "run.finished"
        ]
    );
}

#[tokio::test]
async fn spawn_failure_journals_run_failed_and_lost_sessions_fail() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let r1 = w.run("r1", Target::Any, 1).await;
    let r2 = w.run("r2", Target::Any, 1).await;
    claims::claim(&w.ctx, a.id, 10).await.unwrap();
    assert_eq!(
        w.signal(&a, sig(&r1, 1, SignalKind::Failed)).await,
        SignalOutcome::Applied
    );
    let r = w.get_run(r1.id).await;
    assert_eq!(r.failure_reason, Some(FailureReason::SpawnFailed));
    assert!(w
        .topics_for(r1.id)
        .await
        .contains(&("run.failed".to_string(), 1)));
    w.signal(&a, sig(&r2, 1, SignalKind::Started)).await;
    let mut lost = sig(&r2, 1, SignalKind::Lost);
    lost.reason = Some("session vanished".into());
    assert_eq!(w.signal(&a, lost).await, SignalOutcome::Applied);
    assert_eq!(
        w.get_run(r2.id).await.failure_reason,
        Some(FailureReason::SessionLost)
    );
}

#[tokio::test]
async fn stop_pending_without_dispatch_and_running_when_the_worker_confirms() {
    let w = World::new().await;
    let pending = w.run("p", Target::Host("nowhere".into()), 3).await;
    set_stop(&w, pending.id).await;
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(p.runs_stopped, 1);
    assert_eq!(w.get_run(pending.id).await.status, RunStatus::Stopped);
    assert_eq!(
        w.topics_for(pending.id).await,
        vec![("run.stopped".to_string(), 1)]
    );

    let a = w.host("a", &[]).await;
    let run = w.run("r", Target::Any, 3).await;
    claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;
    set_stop(&w, run.id).await;
    // The worker stops the session; the wrapper reports the exit (143).
    assert_eq!(
        w.signal(&a, finished(&run, 1, 143)).await,
        SignalOutcome::Applied
    );
    let r = w.get_run(run.id).await;
    assert_eq!(r.status, RunStatus::Stopped);
    let topics: Vec<_> = w
        .topics_for(run.id)
        .await
        .into_iter()
        .map(|t| t.0)
        .collect();
    assert_eq!(
        topics,
        ["run.spawning", "run.started", "run.finished", "run.stopped"]
    );
    // A stopped run never restarts.
    w.advance(3600);
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_requeued, 0);
}

async fn set_stop(w: &World, id: Uuid) {
    let mut tx = w.ctx.store.begin().await.unwrap();
    let mut r = tx.get_run(id).await.unwrap().unwrap();
    let rv = r.meta.resource_version;
    r.stop_requested = true;
    tx.update_run_spec(&r, rv).await.unwrap();
    w.ctx.commit(tx).await.unwrap();
}

#[tokio::test]
async fn instance_identity_oq14_suspect_once_reinstall_and_clear() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let pinned = a.instance_id.unwrap();
    let run = w.run("r1", Target::Any, 1).await;
    claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;

    // A clone presents 30 s after the pinned instance was seen: suspect.
    w.advance(30);
    let clone = Uuid::new_v4();
    let (h, p) = w.present(a.id, Some(clone)).await;
    assert_eq!(p, identity::Presence::Flagged);
    assert!(h.instance_suspect);
    assert_eq!(h.instance_flagged_at, Some(w.clock.now()));
    assert_eq!(h.instance_id, Some(pinned), "pinned, not overwritten");
    // More heartbeats from both: journaled once only.
    for _ in 0..3 {
        w.advance(10);
        assert_eq!(
            w.present(a.id, Some(clone)).await.1,
            identity::Presence::StillSuspect
        );
        assert_eq!(
            w.present(a.id, Some(pinned)).await.1,
            identity::Presence::Pinned
        );
    }
    let suspect_events = w
        .events()
        .await
        .into_iter()
        .filter(|e| e.topic == "worker.instance_suspect")
        .count();
    assert_eq!(suspect_events, 1);
    // Running runs are untouched.
    assert_eq!(w.get_run(run.id).await.status, RunStatus::Running);

    // clear-suspect pins the newest presenter.
    let mut tx = w.ctx.store.begin().await.unwrap();
    let h = tx.get::<Host>(a.id).await.unwrap().unwrap();
    let h = identity::clear_suspect(tx.as_mut(), h, w.clock.now())
        .await
        .unwrap();
    w.ctx.commit(tx).await.unwrap();
    assert!(!h.instance_suspect);
    assert_eq!(h.instance_flagged_at, None);
    assert_eq!(h.instance_id, Some(clone));

    // Reinstall: a new instance after the pinned one went quiet > 90 s.
    w.advance(120);
    let fresh = Uuid::new_v4();
    let (h, p) = w.present(a.id, Some(fresh)).await;
    assert_eq!(p, identity::Presence::Reinstalled);
    assert!(!h.instance_suspect);
    assert_eq!(h.instance_id, Some(fresh));
    let topics: Vec<_> = w.events().await.into_iter().map(|e| e.topic).collect();
    assert!(topics.contains(&"worker.instance_reinstalled".to_string()));
}

#[tokio::test]
async fn integrity_anomaly_is_journaled_once_not_repaired() {
    let w = World::new().await;
    let (project, epic) = seed_project(&w.ctx, WorkItemKind::Epic).await;
    let run = new_run(&w.ctx, project, epic, "bad", Target::Any, 1).await;
    assert_eq!(reconcile::integrity::sweep(&w.ctx).await.unwrap(), 1);
    assert_eq!(reconcile::integrity::sweep(&w.ctx).await.unwrap(), 0);
    let r = w.get_run(run.id).await;
    assert_eq!(r.status, RunStatus::Pending, "not repaired");
    assert_eq!(
        w.topics_for(run.id).await,
        vec![("run.integrity_anomaly".to_string(), 1)]
    );
}

#[tokio::test]
async fn retention_purges_events_older_than_the_window() {
    let w = World::new().await;
    w.host("a", &[]).await; // journals worker.registered at t0
    w.advance(31 * 24 * 3600);
    w.host("b", &[]).await;
    let purged = reconcile::retention::purge(&w.ctx, 30).await.unwrap();
    assert_eq!(purged, 1);
    let left: Vec<_> = w
        .events()
        .await
        .into_iter()
        .map(|e| e.payload["host"].clone())
        .collect();
    assert_eq!(left, vec![serde_json::json!("b")]);
}

#[tokio::test]
async fn long_poll_claim_returns_as_soon_as_a_run_is_created() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let ctx = w.ctx.clone();
    let waiter =
        tokio::spawn(
            async move { claims::claim_wait(&ctx, a.id, 1, Duration::from_secs(30)).await },
        );
    tokio::task::yield_now().await;
    let run = w.run("r1", Target::Any, 1).await;
    w.ctx.wakeups.claimable.notify_waiters();
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("claim returned promptly")
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, run.id);
}

// ---- what this pamd observed: outages of pamd and of its database --------

/// A worker heartbeat that pamd receives.
async fn heartbeat(w: &World, h: &Host) {
    w.present(h.id, h.instance_id).await;
}

/// The `worker.offline` events so far.
async fn offline_events(w: &World) -> usize {
    w.events()
        .await
        .iter()
        .filter(|e| e.topic == "worker.offline")
        .count()
}

#[tokio::test]
async fn a_pamd_outage_longer_than_the_offline_window_fails_no_run() {
    let mut w = World::new().await;
    let a = w.host("a", &[]).await;
    let b = w.host("b", &[]).await;
    w.run("r1", Target::Host("a".into()), 1).await;
    let run = claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;
    heartbeat(&w, &b).await;

    // pamd is down for five minutes; the workers heartbeat into the void.
    w.advance(300);
    w.restart_pamd();
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_host_lost), (0, 0));
    assert_eq!(w.get_host(a.id).await.status, HostStatus::Online);
    assert_eq!(w.get_run(run.id).await.status, RunStatus::Running);

    // Worker a is back at its next heartbeat and keeps beating; worker b
    // never comes back.
    for _ in 0..3 {
        w.advance(30);
        heartbeat(&w, &a).await;
        reconcile::pass(&w.ctx).await.unwrap();
    }
    // 90 s after the restart: b had a full window, not yet more.
    assert_eq!(w.get_host(b.id).await.status, HostStatus::Online);
    w.advance(1);
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_host_lost), (1, 0));
    assert_eq!(w.get_host(b.id).await.status, HostStatus::Offline);
    assert_eq!(w.get_host(a.id).await.status, HostStatus::Online);
    assert_eq!(w.get_run(run.id).await.status, RunStatus::Running);
    assert_eq!(offline_events(&w).await, 1);

    // Liveness is back to normal: a silent a goes offline 91 s after its
    // last heartbeat, and only then is its run lost.
    w.advance(89);
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().hosts_offline, 0);
    w.advance(1);
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_host_lost), (1, 1));
    let lost = w.get_run(run.id).await;
    assert_eq!(lost.failure_reason, Some(FailureReason::HostLost));
}

#[tokio::test]
async fn dispatch_timeouts_that_passed_while_pamd_was_down_wait_for_the_workers() {
    let mut w = World::new().await;
    let a = w.host("a", &[]).await;
    let b = w.host("b", &[]).await;
    // a is full (capacity 1, one run live); b is idle.
    let mut tx = w.ctx.store.begin().await.unwrap();
    let mut h = tx.get::<Host>(a.id).await.unwrap().unwrap();
    let rv = h.meta.resource_version;
    h.capacity = 1;
    tx.update(&h, rv).await.unwrap();
    w.ctx.commit(tx).await.unwrap();
    w.run("live", Target::Host("a".into()), 1).await;
    let live = claim_one(&w, &a).await;
    w.signal(&a, sig(&live, 1, SignalKind::Started)).await;
    // Created just before the crash: no pass saw them with their host.
    let busy = w.run("busy", Target::Host("a".into()), 1).await;
    let on_b = w.run("on-b", Target::Host("b".into()), 1).await;
    let ghost = w.run("ghost", Target::Host("c".into()), 1).await;

    // Down for ten minutes: twice the dispatch timeout.
    w.advance(600);
    w.restart_pamd();
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_timed_out), (0, 0));
    for r in [&busy, &on_b, &ghost] {
        assert_eq!(
            w.get_run(r.id).await.status,
            RunStatus::Pending,
            "{}",
            r.name
        );
    }

    // Both workers come back; b claims its run.
    w.advance(2);
    heartbeat(&w, &a).await;
    heartbeat(&w, &b).await;
    assert_eq!(claim_one(&w, &b).await.id, on_b.id);
    for secs in [30, 30, 28] {
        w.advance(secs);
        heartbeat(&w, &a).await;
        heartbeat(&w, &b).await;
        assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_timed_out, 0);
    }
    // The window has passed (91 s): the timeouts fire, decided against
    // the hosts as they are now — a is back (only full), c never existed.
    w.advance(1);
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_timed_out), (0, 2));
    let busy = w.get_run(busy.id).await;
    assert_eq!(busy.failure_reason, Some(FailureReason::DispatchTimeout));
    let ghost = w.get_run(ghost.id).await;
    assert_eq!(ghost.failure_reason, Some(FailureReason::NoEligibleHost));
    assert_eq!(w.get_run(live.id).await.status, RunStatus::Running);
    assert_eq!(w.get_run(on_b.id).await.status, RunStatus::Spawning);
}

#[tokio::test]
async fn a_timeout_after_pamd_restarts_is_no_eligible_host_when_the_host_never_returns() {
    let mut w = World::new().await;
    let a = w.host("a", &[]).await;
    let r = w.run("r", Target::Host("a".into()), 1).await;
    w.advance(600);
    w.restart_pamd();
    // a stays silent: it goes offline at the end of the window, and the
    // timeout, firing in the same pass, finds no eligible host.
    w.advance(90);
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_timed_out, 0);
    w.advance(1);
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_timed_out), (1, 1));
    assert_eq!(w.get_host(a.id).await.status, HostStatus::Offline);
    let r = w.get_run(r.id).await;
    assert_eq!(r.failure_reason, Some(FailureReason::NoEligibleHost));
}

/// A store whose database can be made unreachable: `begin` and `ready`
/// fail while it is down.
struct Unreachable {
    inner: MemStore,
    down: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl Store for Unreachable {
    async fn begin(&self) -> pam_store::StoreResult<Box<dyn Tx>> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(pam_store::StoreError::Database("connection refused".into()));
        }
        self.inner.begin().await
    }

    async fn ready(&self) -> Result<(), String> {
        if self.down.load(std::sync::atomic::Ordering::SeqCst) {
            return Err("database: connection refused".into());
        }
        Ok(())
    }
}

#[tokio::test]
async fn the_database_coming_back_gives_every_host_a_full_window() {
    let store = Arc::new(Unreachable {
        inner: MemStore::new(),
        down: false.into(),
    });
    let w = World::with_store(store.clone()).await;
    let a = w.host("a", &[]).await;
    w.run("r1", Target::Any, 1).await;
    let run = claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;

    // PostgreSQL is unreachable for three minutes: the loops fail, and
    // the worker's heartbeats fail with them.
    store.down.store(true, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..6 {
        w.advance(30);
        assert!(reconcile::pass(&w.ctx).await.is_err());
    }
    store.down.store(false, std::sync::atomic::Ordering::SeqCst);
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_host_lost), (0, 0));
    assert_eq!(w.get_run(run.id).await.status, RunStatus::Running);

    // A host still silent a full window after the database came back is
    // offline.
    w.advance(91);
    let p = reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!((p.hosts_offline, p.runs_host_lost), (1, 1));
}

fn progress_with(run: &Run, attempt: i32, seq: i64, input: u64, output: u64) -> Signal {
    let mut s = sig(run, attempt, SignalKind::Progress);
    s.seq = Some(seq);
    s.usage = Some(TokenUsage {
        input_tokens: input,
        output_tokens: output,
        ..TokenUsage::default()
    });
    s
}

/// A progress step's usage counts once (a replayed seq is a
/// duplicate and adds nothing), the finished signal's totals settle the
/// attempt, and a requeued attempt starts from zero while the run's total
/// keeps what the first attempt used.
#[tokio::test]
async fn usage_counts_once_under_replay_settles_on_finish_and_survives_requeue() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let run = w.run("r1", Target::Any, 3).await;
    claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;
    let p1 = progress_with(&run, 1, 1, 1_000_000, 0);
    assert_eq!(w.signal(&a, p1.clone()).await, SignalOutcome::Applied);
    // Replays: alone, and twice within one batch.
    assert_eq!(w.signal(&a, p1.clone()).await, SignalOutcome::Duplicate);
    let p2 = progress_with(&run, 1, 2, 0, 1_000_000);
    match ingest::ingest(&w.ctx, &a, &[p1, p2.clone(), p2])
        .await
        .unwrap()
    {
        ingest::BatchOutcome::Applied { results: r, .. } => assert_eq!(
            r.iter().map(|r| r.outcome).collect::<Vec<_>>(),
            [
                SignalOutcome::Duplicate,
                SignalOutcome::Applied,
                SignalOutcome::Duplicate
            ]
        ),
        other => panic!("{other:?}"),
    }
    let u = w.get_run(run.id).await.usage;
    assert_eq!(
        (u.attempt.input_tokens, u.attempt.output_tokens),
        (1_000_000, 1_000_000)
    );
    // claude's default price: $3 in, $15 out per million tokens.
    assert_eq!(u.attempt.cost_micro_usd, 18_000_000);
    assert_eq!(u.total, u.attempt);

    // The provider's final totals (with its own cost) replace the steps.
    let mut fin = finished(&run, 1, 1);
    fin.usage = Some(TokenUsage {
        input_tokens: 1_500_000,
        cached_input_tokens: 500_000,
        output_tokens: 1_000_000,
        cost_usd: Some(0.25),
        ..TokenUsage::default()
    });
    assert_eq!(w.signal(&a, fin.clone()).await, SignalOutcome::Applied);
    assert_eq!(w.signal(&a, fin).await, SignalOutcome::Duplicate);
    let u = w.get_run(run.id).await.usage;
    assert_eq!(u.attempt.input_tokens, 1_500_000);
    assert_eq!(u.attempt.cached_input_tokens, 500_000);
    assert_eq!(u.attempt.cost_micro_usd, 250_000);
    assert_eq!(u.total, u.attempt);

    // The event that ended attempt 1 keeps its usage.
    let failed: Vec<Event> = w
        .events()
        .await
        .into_iter()
        .filter(|e| e.topic == "run.finished" && e.payload["attempt"] == 1)
        .collect();
    assert_eq!(failed.len(), 1);
    assert_eq!(
        failed[0].payload["usage"]["input_tokens"], 1_500_000,
        "{}",
        failed[0].payload
    );
    assert_eq!(failed[0].payload["usage"]["cost_usd"], 0.25);

    // Exit 1 → failed → requeued as attempt 2: its usage starts at zero.
    w.advance(10);
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_requeued, 1);
    let r = w.get_run(run.id).await;
    assert_eq!(r.attempt, 2);
    assert!(r.usage.attempt.is_zero());
    claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 2, SignalKind::Started)).await;
    // seq restarts at 1 in the new attempt, and counts.
    assert_eq!(
        w.signal(&a, progress_with(&run, 2, 1, 10, 20)).await,
        SignalOutcome::Applied
    );
    // A late replay of attempt 1 is stale and adds nothing.
    assert_eq!(
        w.signal(&a, progress_with(&run, 1, 9, 10, 20)).await,
        SignalOutcome::Stale
    );
    let u = w.get_run(run.id).await.usage;
    assert_eq!((u.attempt.input_tokens, u.attempt.output_tokens), (10, 20));
    assert_eq!(u.total.input_tokens, 1_500_010);
    assert_eq!(u.total.output_tokens, 1_000_020);

    // /metrics counts what was added (never less: the settle lowered
    // output by nothing here, input by nothing), once per applied report.
    let text = w.ctx.metrics.render(w.ctx.store.as_ref()).await;
    let project = w.project.to_string();
    let line = |kind: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("pam_tokens_total{")
                    && l.contains("provider=\"claude\"")
                    && l.contains(&format!("project=\"{project}\""))
                    && l.contains(&format!("type=\"{kind}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    };
    assert_eq!(line("input").as_deref(), Some("1500010"), "{text}");
    assert_eq!(line("cached_input").as_deref(), Some("500000"), "{text}");
    assert_eq!(line("output").as_deref(), Some("1000020"), "{text}");
    assert!(text.contains("pam_cost_usd_total{"), "{text}");
}

/// A run whose reports reach its `spec.budget` is stopped
/// through the normal stop path (a desired stop, condition BudgetExceeded,
/// `run.budget_exceeded` with the figures); its `finished` fails it
/// `budget_exceeded`, and it is not restarted.
#[tokio::test]
async fn a_run_over_its_budget_is_stopped_and_fails_budget_exceeded() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let run = w.run("r1", Target::Any, 3).await;
    {
        let mut tx = w.ctx.store.begin().await.unwrap();
        let mut r = tx.get_run(run.id).await.unwrap().unwrap();
        let rv = r.meta.resource_version;
        r.meta.spec = serde_json::json!({"budget": {"maxTokens": 100}});
        tx.update_run_spec(&r, rv).await.unwrap();
        w.ctx.commit(tx).await.unwrap();
    }
    claim_one(&w, &a).await;
    w.signal(&a, sig(&run, 1, SignalKind::Started)).await;
    // Below the budget: nothing stops.
    let ingested = |s: Signal| {
        let (ctx, a) = (w.ctx.clone(), a.clone());
        async move {
            match ingest::ingest(&ctx, &a, &[s]).await.unwrap() {
                ingest::BatchOutcome::Applied {
                    results,
                    budget_stops,
                } => (results[0].outcome, budget_stops),
                other => panic!("{other:?}"),
            }
        }
    };
    let below = progress_with(&run, 1, 1, 50, 10);
    assert_eq!(ingested(below).await, (SignalOutcome::Applied, 0));
    assert!(!w.get_run(run.id).await.stop_requested);

    // The report that crosses it stops the run in the same transaction.
    let over = progress_with(&run, 1, 2, 30, 20);
    assert_eq!(ingested(over.clone()).await, (SignalOutcome::Applied, 1));
    // Once: a replay is a duplicate and finds it stopping already.
    assert_eq!(ingested(over).await, (SignalOutcome::Duplicate, 0));
    let r = w.get_run(run.id).await;
    assert!(r.stop_requested);
    assert_eq!(r.status, RunStatus::Running);
    let conds = r.meta.conditions.to_string();
    assert!(conds.contains("BudgetExceeded"), "{conds}");
    let ev: Vec<Event> = w
        .events()
        .await
        .into_iter()
        .filter(|e| e.topic == "run.budget_exceeded")
        .collect();
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].payload["input_tokens"], 80);
    assert_eq!(ev[0].payload["output_tokens"], 30);
    assert_eq!(ev[0].payload["budget"]["maxTokens"], 100);

    // The worker stops the session: SIGTERM → 143.
    assert_eq!(
        w.signal(&a, finished(&run, 1, 143)).await,
        SignalOutcome::Applied
    );
    let r = w.get_run(run.id).await;
    assert_eq!(r.status, RunStatus::Failed);
    assert_eq!(r.failure_reason, Some(FailureReason::BudgetExceeded));
    assert_eq!(
        r.failure_message.as_deref(),
        Some("used 110 tokens of a budget of 100")
    );
    assert_eq!(r.requeue_at, None, "budget_exceeded never restarts");
    w.advance(3600);
    assert_eq!(reconcile::pass(&w.ctx).await.unwrap().runs_requeued, 0);
}

/// Once a project's runs together reach its `spec.budget`, the
/// pass sets its condition BudgetExceeded, no new run of it is dispatched
/// (nor timed out: it waits on purpose), and raising the budget lets them
/// go.
#[tokio::test]
async fn a_project_over_its_budget_dispatches_nothing_until_the_budget_is_raised() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let set_budget = |max: u64| {
        let ctx = w.ctx.clone();
        let id = w.project;
        async move {
            let mut tx = ctx.store.begin().await.unwrap();
            let mut p = tx.get::<Project>(id).await.unwrap().unwrap();
            let rv = p.meta.resource_version;
            p.meta.spec = serde_json::json!({"budget": {"maxTokens": max}});
            tx.update(&p, rv).await.unwrap();
            ctx.commit(tx).await.unwrap();
        }
    };
    set_budget(50).await;
    let r1 = w.run("r1", Target::Any, 1).await;
    claim_one(&w, &a).await;
    w.signal(&a, sig(&r1, 1, SignalKind::Started)).await;
    let mut fin = finished(&r1, 1, 0);
    fin.usage = Some(TokenUsage {
        input_tokens: 40,
        output_tokens: 20,
        ..TokenUsage::default()
    });
    w.signal(&a, fin).await;
    reconcile::pass(&w.ctx).await.unwrap();
    let over = |w: &World| {
        let ctx = w.ctx.clone();
        let id = w.project;
        async move {
            let mut tx = ctx.store.begin().await.unwrap();
            let p = tx.get::<Project>(id).await.unwrap().unwrap();
            pam_store::projects::over_budget(&p.meta)
        }
    };
    assert!(over(&w).await);

    let r2 = w.run("r2", Target::Any, 1).await;
    assert!(claims::claim(&w.ctx, a.id, 10).await.unwrap().is_empty());
    // Held on purpose: no dispatch timeout while the project is over.
    w.advance(3600);
    w.present(a.id, a.instance_id).await;
    reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(w.get_run(r2.id).await.status, RunStatus::Pending);

    set_budget(1000).await;
    reconcile::pass(&w.ctx).await.unwrap();
    assert!(!over(&w).await);
    let claimed = claim_one(&w, &a).await;
    assert_eq!(claimed.id, r2.id);
}

/// Sweeps are isolated. With the `schedules` table unreadable
/// the schedule sweep fails on real PostgreSQL; liveness (before it) and
/// the dispatch timeout (after it) still run in the same pass, the error
/// is counted by loop, and once the table is back the next pass is clean.
#[tokio::test]
async fn a_failing_sweep_does_not_stop_the_others() {
    let pool = pam_testkit::testdb::fresh_pool().await.unwrap();
    let w = World::with_store(Arc::new(pam_store::postgres::PgStore::new(pool.clone()))).await;
    let a = w.host("a", &[]).await;
    w.run("r1", Target::Any, 1).await;
    let live = claim_one(&w, &a).await;
    w.signal(&a, sig(&live, 1, SignalKind::Started)).await;
    let waiting = w.run("r2", Target::Host("nobody".into()), 1).await;

    sqlx::query("ALTER TABLE schedules RENAME TO schedules_away")
        .execute(&pool)
        .await
        .unwrap();
    w.advance(301);
    let e = reconcile::pass(&w.ctx).await.unwrap_err();
    assert!(e.to_string().contains("schedule:"), "{e:#}");
    assert_eq!(w.get_host(a.id).await.status, HostStatus::Offline);
    assert_eq!(
        w.get_run(live.id).await.failure_reason,
        Some(FailureReason::HostLost)
    );
    let waiting = w.get_run(waiting.id).await;
    assert_eq!(waiting.status, RunStatus::Failed, "the timeout sweep ran");

    sqlx::query("ALTER TABLE schedules_away RENAME TO schedules")
        .execute(&pool)
        .await
        .unwrap();
    let text = w.ctx.metrics.render(w.ctx.store.as_ref()).await;
    assert!(
        text.contains("pam_loop_errors_total{loop=\"schedule\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("pam_loop_errors_total{loop=\"liveness\"} 0"),
        "{text}"
    );
    w.advance(1);
    reconcile::pass(&w.ctx).await.unwrap();
}

fn with_result(mut s: Signal, branch: &str) -> Signal {
    s.result = Some(Box::new(pam_manifests::protocol::WorkspaceResult {
        branch: branch.into(),
        base_commit: "a".repeat(40),
        head_commit: "b".repeat(40),
        commits: 1,
        files_changed: 1,
        insertions: 2,
        deletions: 0,
        patch: "+x\n+y\n".into(),
        patch_truncated: false,
        pushed: None,
        push_message: None,
    }));
    s
}

/// A workspace result is applied with its `finished`, under the
/// same one-shot marker: a redelivered `finished` (the outbox is
/// at-least-once) stores nothing more and journals no second
/// `run.result_recorded`; a result from a dead attempt is dropped with it.
#[tokio::test]
async fn a_workspace_result_is_recorded_once_with_its_finished() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    w.run("r1", Target::Any, 2).await;
    let run = claim_one(&w, &a).await;
    let fin = with_result(finished(&run, 1, 1), "pam/build/r1-a1");
    assert_eq!(w.signal(&a, fin.clone()).await, SignalOutcome::Applied);
    let again = with_result(finished(&run, 1, 1), "other");
    assert_eq!(w.signal(&a, again).await, SignalOutcome::Duplicate);
    let recorded = |topics: Vec<(String, i64)>| {
        topics
            .into_iter()
            .filter(|(t, _)| t == "run.result_recorded")
            .collect::<Vec<_>>()
    };
    assert_eq!(
        recorded(w.topics_for(run.id).await),
        [("run.result_recorded".to_string(), 1)]
    );
    let mut tx = w.ctx.store.begin().await.unwrap();
    let rows = tx.run_results(run.id, None).await.unwrap();
    drop(tx);
    assert_eq!(rows.len(), 1);
    assert_eq!(
        (rows[0].branch.as_str(), rows[0].attempt),
        ("pam/build/r1-a1", 1)
    );
    assert_eq!(rows[0].patch, "+x\n+y\n");

    // Requeued as attempt 2: attempt 1's late redelivery is stale.
    w.advance(11);
    reconcile::pass(&w.ctx).await.unwrap();
    assert_eq!(w.get_run(run.id).await.attempt, 2);
    assert_eq!(w.signal(&a, fin).await, SignalOutcome::Stale);
    let mut tx = w.ctx.store.begin().await.unwrap();
    assert_eq!(tx.run_results(run.id, None).await.unwrap().len(), 1);
}

/// Since workers watch they claim only when woken. A run some
/// host could take that nothing announced (here the host is relabelled
/// without a wake-up) is left to the timeout sweep: once it has been
/// dispatchable for 2 s, the sweep wakes the claims.
#[tokio::test]
async fn a_run_left_unclaimed_wakes_the_claims_at_the_sweep() {
    let w = World::new().await;
    let a = w.host("a", &[]).await;
    let gpu = Target::Selector([("gpu".to_string(), "yes".to_string())].into());
    let run = w.run("r1", gpu, 1).await;
    let ctx = w.ctx.clone();
    let waiter =
        tokio::spawn(
            async move { claims::claim_wait(&ctx, a.id, 1, Duration::from_secs(30)).await },
        );
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "a claimed a run it does not match");
    let mut tx = w.ctx.store.begin().await.unwrap();
    let mut h = tx.get::<Host>(a.id).await.unwrap().unwrap();
    let rv = h.meta.resource_version;
    h.dispatch_labels.insert("gpu".into(), "yes".into());
    tx.update(&h, rv).await.unwrap();
    w.ctx.commit(tx).await.unwrap();
    // Within the grace the sweep wakes no one: a claim may be on its way.
    w.advance(1);
    reconcile::timeout::sweep(&w.ctx).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiter.is_finished(), "woken within the grace");
    w.advance(2);
    reconcile::timeout::sweep(&w.ctx).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("the sweep woke the claim")
        .unwrap()
        .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].id, run.id);
}
