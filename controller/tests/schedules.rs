//! Schedules with a moved clock: one run per tick over 100
//! ticks, Forbid and Replace, a missed tick caught up once within
//! startingDeadlineSeconds and skipped beyond it, a manual trigger; and on
//! PostgreSQL, two loop passes racing for the same ticks (a restarted
//! pamd next to a paused one, or two replicas) leaving one run per tick.

use std::sync::Arc;

use chrono::{DateTime, Duration, TimeZone, Utc};
use pam_controller::apply::{self, ApplyRequest, FileIn};
use pam_controller::clock::ManualClock;
use pam_controller::ctx::{Ctx, Thresholds};
use pam_controller::reconcile::{self, schedule};
use pam_controller::rules::schedules::{self, Tick};
use pam_manifests::state::RunStatus;
use pam_store::memory::MemStore;
use pam_store::postgres::PgStore;
use pam_store::{Project, Run, RunFilter, Schedule, Store, Tx};

/// 12:00:30, mid-minute.
fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 30).unwrap()
}

const BASE: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: web\nspec: {}\n---\n\
apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t\n  project: web\nspec:\n  title: t\n";

fn schedule_yaml(name: &str, cron: &str, extra: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Schedule\nmetadata:\n  name: {name}\n  project: web\nspec:\n  schedule: {cron:?}\n  runTemplate:\n    task: t\n    provider: claude\n    cwd: /tmp\n{extra}"
    )
}

/// One file `s.yaml` holding `text`.
fn request(text: &str) -> ApplyRequest {
    ApplyRequest {
        files: vec![FileIn {
            name: "s.yaml".into(),
            content: text.into(),
        }],
        ..Default::default()
    }
}

/// Schedule `name` of project web.
async fn schedule_named(tx: &mut dyn Tx, name: &str) -> Schedule {
    let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
    tx.by_name::<Schedule>(p.id, name).await.unwrap().unwrap()
}

struct World {
    ctx: Ctx,
    clock: Arc<ManualClock>,
}

impl World {
    async fn new(store: Arc<dyn Store>) -> World {
        let clock = Arc::new(ManualClock::new(t0()));
        let ctx = Ctx::new(store, clock.clone(), Thresholds::default());
        let w = World { ctx, clock };
        w.apply(BASE).await;
        w
    }

    async fn apply(&self, text: &str) {
        apply::apply(&self.ctx, &request(text)).await.unwrap();
    }

    /// A world on the memory store with these Schedules of project web
    /// applied: `(name, cron, extra spec lines)` ([`schedule_yaml`]).
    async fn with_schedules(schedules: &[(&str, &str, &str)]) -> World {
        let w = World::new(Arc::new(MemStore::new())).await;
        let yaml: Vec<String> = schedules
            .iter()
            .map(|(name, cron, extra)| schedule_yaml(name, cron, extra))
            .collect();
        w.apply(&yaml.join("---\n")).await;
        w
    }

    /// Moves the clock by `secs` and runs one reconcile pass.
    async fn pass_after(&self, secs: i64) {
        self.advance(secs);
        reconcile::pass(&self.ctx).await.unwrap();
    }

    fn advance(&self, secs: i64) {
        self.clock.advance(Duration::seconds(secs));
    }

    async fn runs(&self) -> Vec<Run> {
        let mut tx = self.ctx.store.begin().await.unwrap();
        let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
        let mut v = tx
            .list_runs(&RunFilter {
                project_id: Some(p.id),
                ..RunFilter::default()
            })
            .await
            .unwrap();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    async fn topic_count(&self, topic: &str) -> usize {
        let mut tx = self.ctx.store.begin().await.unwrap();
        tx.events_after(0, 100_000)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.topic == topic)
            .count()
    }
}

#[tokio::test]
async fn every_minute_for_100_ticks_is_100_runs() {
    let w = World::with_schedules(&[("minutely", "* * * * *", "")]).await;
    for _ in 0..100 {
        w.advance(60);
        // Two passes per tick: the second finds nothing due.
        assert_eq!(schedule::sweep(&w.ctx).await.unwrap(), 1);
        assert_eq!(schedule::sweep(&w.ctx).await.unwrap(), 0);
    }
    let runs = w.runs().await;
    assert_eq!(runs.len(), 100);
    assert_eq!(w.topic_count("schedule.run_created").await, 100);
    // Named by their tick (minutes since the epoch), labelled with the
    // Schedule.
    let first = (t0() + Duration::seconds(30)).timestamp() / 60;
    assert_eq!(runs[0].name, format!("minutely-{first}"));
    assert_eq!(runs[0].meta.labels["schedule.pam.dev/name"], "minutely");
    // Its status: the last tick, the next, the active runs.
    let mut tx = w.ctx.store.begin().await.unwrap();
    let s = schedule_named(tx.as_mut(), "minutely").await;
    let all = tx.schedule_runs(s.id).await.unwrap();
    let st = schedules::status(&s, &all, w.ctx.now());
    assert_eq!(st.active.len(), 100);
    assert_eq!(
        st.last_schedule_time.as_deref(),
        Some("2026-01-01T13:40:00Z")
    );
    assert_eq!(
        st.next_schedule_time.as_deref(),
        Some("2026-01-01T13:41:00Z")
    );
}

#[tokio::test]
async fn forbid_skips_while_active_and_replace_stops_the_active_run() {
    let w = World::with_schedules(&[
        ("forbid", "* * * * *", "  concurrencyPolicy: Forbid\n"),
        ("replace", "* * * * *", "  concurrencyPolicy: Replace\n"),
    ])
    .await;
    w.pass_after(60).await;
    w.pass_after(60).await;
    let runs = w.runs().await;
    let of = |prefix: &str| -> Vec<&Run> {
        runs.iter().filter(|r| r.name.starts_with(prefix)).collect()
    };
    // Forbid: the first run is still pending (no host), so tick 2 is skipped.
    assert_eq!(of("forbid-").len(), 1);
    assert_eq!(w.topic_count("schedule.tick_skipped").await, 1);
    // Replace: the first run was stopped through the stop rule, a second
    // one started.
    let replaced = of("replace-");
    assert_eq!(replaced.len(), 2);
    assert!(replaced[0].stop_requested);
    assert!(!replaced[1].stop_requested);
    w.pass_after(1).await;
    let runs = w.runs().await;
    let first = runs.iter().find(|r| r.id == replaced[0].id).unwrap();
    assert_eq!(first.status, RunStatus::Stopped);
}

#[tokio::test]
async fn a_missed_tick_is_caught_up_once_within_the_deadline_and_skipped_beyond() {
    let w = World::with_schedules(&[
        ("within", "0 * * * *", "  startingDeadlineSeconds: 3600\n"),
        ("beyond", "0 * * * *", "  startingDeadlineSeconds: 60\n"),
    ])
    .await;
    // pamd "down" from 12:00:30 to 15:30:30: ticks 13:00, 14:00, 15:00
    // missed; only the latest counts.
    w.advance(3 * 3600 + 1800);
    for _ in 0..3 {
        reconcile::pass(&w.ctx).await.unwrap();
    }
    let runs = w.runs().await;
    let names: Vec<&str> = runs.iter().map(|r| r.name.as_str()).collect();
    let tick_15 = Utc.with_ymd_and_hms(2026, 1, 1, 15, 0, 0).unwrap();
    assert_eq!(names, [format!("within-{}", tick_15.timestamp() / 60)]);
    assert_eq!(w.topic_count("schedule.tick_missed").await, 1);
    // The next tick on time runs for both.
    w.pass_after(1800).await;
    assert_eq!(w.runs().await.len(), 3);
}

#[tokio::test]
async fn suspend_and_trigger() {
    let w = World::with_schedules(&[("nightly", "@daily", "  suspend: true\n")]).await;
    w.pass_after(2 * 86_400).await;
    assert!(w.runs().await.is_empty(), "suspended");
    let mut tx = w.ctx.store.begin().await.unwrap();
    let s = schedule_named(tx.as_mut(), "nightly").await;
    let t = schedules::trigger(tx.as_mut(), &s, "web", w.ctx.now())
        .await
        .unwrap();
    w.ctx.commit(tx).await.unwrap();
    assert!(
        matches!(t, Tick::Created(ref n) if n.starts_with("nightly-")),
        "{t:?}"
    );
    assert_eq!(w.runs().await.len(), 1);
}

#[tokio::test]
async fn racing_passes_on_postgresql_take_each_tick_once() {
    let pool = pam_testkit::testdb::fresh_pool().await.unwrap();
    let store: Arc<dyn Store> = Arc::new(PgStore::new(pool));
    let w = World::new(store.clone()).await;
    w.apply(&schedule_yaml("minutely", "* * * * *", "")).await;
    // A second context on the same database and clock: another pamd.
    let other = Ctx::new(store, w.clock.clone(), Thresholds::default());
    let mut created = 0;
    for _ in 0..20 {
        w.advance(60);
        let (a, b) = tokio::join!(schedule::sweep(&w.ctx), schedule::sweep(&other));
        created += a.unwrap() + b.unwrap();
    }
    assert_eq!(created, 20);
    assert_eq!(w.runs().await.len(), 20);
    assert_eq!(w.topic_count("schedule.run_created").await, 20);
}

#[tokio::test]
async fn a_bad_timetable_is_refused_with_file_and_line_and_nothing_is_written() {
    let w = World::new(Arc::new(MemStore::new())).await;
    let text = format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: new-task\n  project: web\nspec:\n  title: n\n---\n{}---\n{}",
        schedule_yaml("bad-cron", "61 * * * *", ""),
        schedule_yaml("bad-zone", "@daily", "  timeZone: Mars/Olympus\n")
    );
    let Err(apply::ApplyError::Invalid(errs)) = apply::apply(&w.ctx, &request(&text)).await else {
        panic!("a bad timetable applied")
    };
    let got: Vec<(String, usize, String)> = errs
        .iter()
        .map(|e| (e.file.clone(), e.line, e.path.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("s.yaml".to_string(), 15, "spec.schedule".to_string()),
            ("s.yaml".to_string(), 32, "spec.timeZone".to_string())
        ],
        "{errs:?}"
    );
    assert!(
        errs[0].message.contains("invalid cron expression"),
        "{errs:?}"
    );
    assert!(errs[1].message.contains("IANA"), "{errs:?}");
    let mut tx = w.ctx.store.begin().await.unwrap();
    let p = tx.by_name::<Project>((), "web").await.unwrap().unwrap();
    assert!(tx.list::<Schedule>(p.id).await.unwrap().is_empty());
    assert!(tx
        .get_work_item_by_name(p.id, "new-task")
        .await
        .unwrap()
        .is_none());
}

#[tokio::test]
async fn a_pamd_killed_mid_tick_or_between_ticks_doubles_nothing_on_postgresql() {
    let pool = pam_testkit::testdb::fresh_pool().await.unwrap();
    let store: Arc<dyn Store> = Arc::new(PgStore::new(pool));
    let w = World::new(store.clone()).await;
    w.apply(&schedule_yaml(
        "minutely",
        "* * * * *",
        "  startingDeadlineSeconds: 120\n",
    ))
    .await;
    // Tick 1 taken and committed.
    w.advance(60);
    assert_eq!(schedule::sweep(&w.ctx).await.unwrap(), 1);
    // Tick 2: the old pamd is killed inside its tick transaction (taken,
    // run created, not committed) — nothing of it survives.
    w.advance(60);
    let mut tx = store.begin().await.unwrap();
    let s = schedule_named(tx.as_mut(), "minutely").await;
    let t = schedules::tick(tx.as_mut(), &s, "web", w.ctx.now())
        .await
        .unwrap();
    assert!(matches!(t, Some(Tick::Created(_))));
    drop(tx);
    // A new pamd (new context, same database) takes tick 2 once, however
    // often its loop runs.
    let restarted = Ctx::new(store.clone(), w.clock.clone(), Thresholds::default());
    assert_eq!(schedule::sweep(&restarted).await.unwrap(), 1);
    assert_eq!(schedule::sweep(&restarted).await.unwrap(), 0);
    assert_eq!(w.runs().await.len(), 2);
    // Down for 5 ticks: the latest is caught up once (within 120 s).
    w.advance(300);
    assert_eq!(schedule::sweep(&restarted).await.unwrap(), 1);
    assert_eq!(schedule::sweep(&w.ctx).await.unwrap(), 0);
    assert_eq!(w.runs().await.len(), 3);
}
