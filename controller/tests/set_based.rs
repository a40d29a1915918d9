//! Set-based claims and reports, on real PostgreSQL:
//! - a claim, a signal batch and a desired-set read cost the same number
//!   of statements for one run as for sixteen (counted from sqlx's own
//!   statement log: every statement sqlx runs is a `sqlx::query` tracing
//!   event, and only those inside the measured request are counted);
//! - a batch of signals leaves runs, journal and exactly-once markers
//!   exactly as the same signals applied one by one (random batches with
//!   duplicates and a dead attempt's reports);
//! - concurrent heartbeats of many hosts are written in a few
//!   transactions, not one each, and leave hosts, answers and journal as
//!   the same heartbeats sent one by one (OQ-14 flags, reinstalls,
//!   offline → online edges, an unregistered host among them);
//! - the tokens that fifty open streams hold are re-checked with one
//!   statement a second, not fifty;
//! - a watching worker's other requests are authenticated from its
//!   watch's hold of its token, without reading the token each time.

mod common;

use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use chrono::{TimeZone, Utc};
use common::request;
use pam_controller::api::AppState;
use pam_controller::clock::ManualClock;
use pam_controller::reconcile::ingest;
use pam_controller::rules::runs;
use pam_manifests::protocol::{Signal, SignalKind, SignalOutcome};
use pam_manifests::state::FailureReason;
use pam_store::{Host, Run, RunFilter, TokenKind};
use serde_json::{json, Value};
use tracing::Instrument;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::Layer;
use uuid::Uuid;

/// The statements sqlx ran inside a span named `measured` (their
/// summaries, in order), or anywhere when `everywhere` (what background
/// tasks run).
#[derive(Clone)]
struct Statements(Arc<Mutex<Vec<String>>>, bool);

/// A statement's summary, and its whole text when sqlx shortened it.
struct Summary(String, String);

impl tracing::field::Visit for Summary {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "summary" => self.0 = value.to_string(),
            "db.statement" => self.1 = value.trim().to_string(),
            _ => {}
        }
    }
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "summary" {
            self.0 = format!("{value:?}");
        }
    }
}

impl<S: tracing::Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Statements {
    fn on_event(&self, event: &tracing::Event<'_>, ctx: Context<'_, S>) {
        if event.metadata().target() != "sqlx::query" {
            return;
        }
        let measured = self.1
            || ctx
                .event_scope(event)
                .is_some_and(|mut scope| scope.any(|span| span.name() == "measured"));
        if measured {
            let mut s = Summary(String::new(), String::new());
            event.record(&mut s);
            let line = match s.1.is_empty() {
                true => s.0,
                false => format!("{} ({})", s.0, s.1),
            };
            self.0.lock().unwrap().push(line);
        }
    }
}

impl Statements {
    /// Counts sqlx's statements on this thread until the guard drops
    /// (`everywhere`: see [`Statements`]).
    fn install(everywhere: bool) -> (Statements, tracing::subscriber::DefaultGuard) {
        let statements = Statements(Default::default(), everywhere);
        let registry = tracing_subscriber::registry().with(statements.clone());
        (statements, tracing::subscriber::set_default(registry))
    }

    /// Runs `f` in a `measured` span: the statements it ran.
    async fn of<T>(&self, f: impl std::future::Future<Output = T>) -> (T, Vec<String>) {
        self.0.lock().unwrap().clear();
        let out = f.instrument(tracing::info_span!("measured")).await;
        (out, std::mem::take(&mut *self.0.lock().unwrap()))
    }
}

fn t0() -> chrono::DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 0, 0).unwrap()
}

struct World {
    state: AppState,
    ops: String,
    clock: Arc<ManualClock>,
}

impl World {
    async fn new() -> World {
        let clock = Arc::new(ManualClock::new(t0()));
        let state = AppState::new(
            Arc::new(pam_store::postgres::PgStore::new(
                pam_testkit::testdb::fresh_pool().await.unwrap(),
            )),
            clock.clone(),
            Default::default(),
        );
        let ops = common::token(&state, TokenKind::Operator, "ops", None).await;
        World { state, ops, clock }
    }

    async fn call(&self, token: &str, method: &str, uri: &str, body: Option<Value>) -> Value {
        let (s, v) = request(self.state.clone(), Some(token), method, uri, body).await;
        assert!(
            s == StatusCode::OK || s == StatusCode::CREATED,
            "{uri}: {s} {v}"
        );
        v
    }

    /// Project `q`, task `t` and runs `r0`..`r{n-1}` (3 attempts each).
    async fn runs(&self, n: usize) {
        let mut objects = vec![
            json!({"apiVersion": "pam.dev/v1", "kind": "Project", "metadata": {"name": "q"}, "spec": {"displayName": "Q"}}),
            json!({"apiVersion": "pam.dev/v1", "kind": "Task", "metadata": {"name": "t", "project": "q"}, "spec": {"title": "T"}}),
        ];
        objects.extend((0..n).map(|i| {
            json!({"apiVersion": "pam.dev/v1", "kind": "Run",
                "metadata": {"name": format!("r{i}"), "project": "q"},
                "spec": {"task": "t", "provider": "claude", "prompt": "go", "cwd": "/tmp",
                         "restartPolicy": {"maxAttempts": 3}}})
        }));
        let ops = self.ops.clone();
        self.call(
            &ops,
            "POST",
            "/api/v1/apply",
            Some(json!({ "objects": objects })),
        )
        .await;
    }

    /// Registers host `name` with `capacity`: its worker token.
    async fn host(&self, name: &str, capacity: usize) -> String {
        let wt = common::token(&self.state, TokenKind::Worker, name, Some(name)).await;
        let body = json!({"name": name, "platform": "linux", "instance_id": Uuid::new_v4(),
                          "capacity": capacity, "labels": {}, "version": "t"});
        self.call(&wt, "POST", "/api/v1/workers/register", Some(body))
            .await;
        wt
    }

    async fn get_host(&self, name: &str) -> Host {
        let mut tx = self.state.ctx.store.begin().await.unwrap();
        tx.by_name::<Host>((), name).await.unwrap().unwrap()
    }

    /// Every run, by name.
    async fn all_runs(&self) -> Vec<Run> {
        let mut tx = self.state.ctx.store.begin().await.unwrap();
        let mut all = tx.list_runs(&RunFilter::default()).await.unwrap();
        all.sort_by_key(|r| r.name.clone());
        all
    }
}

fn signal(run: &Value, kind: SignalKind) -> Value {
    let mut s = json!({"run_id": run["run_id"], "attempt": run["attempt"], "kind": kind,
                       "at": "2026-03-01T12:00:00Z"});
    if kind == SignalKind::Finished {
        s["exit_code"] = json!(0);
    }
    s
}

/// A claim, a signal batch and a desired-set read each cost the same
/// statements for one run as for sixteen: nothing is done per run.
#[tokio::test]
async fn claims_batches_and_desired_reads_cost_the_same_statements_for_1_or_16_runs() {
    let (statements, _guard) = Statements::install(false);
    let w = World::new().await;
    w.runs(17).await;
    let small = w.host("small", 1).await;
    let big = w.host("big", 16).await;
    let claim = "/api/v1/workers/claim?wait=0&max=16";

    let (one, one_sql) = statements.of(w.call(&small, "POST", claim, None)).await;
    let (many, many_sql) = statements.of(w.call(&big, "POST", claim, None)).await;
    let (one, many) = (
        one["runs"].as_array().unwrap(),
        many["runs"].as_array().unwrap(),
    );
    assert_eq!((one.len(), many.len()), (1, 16));
    assert!(!one_sql.is_empty(), "statements are counted");
    assert_eq!(one_sql, many_sql, "a claim of 1 run and of 16");
    eprintln!("a claim: {} statements: {many_sql:#?}", many_sql.len());

    let desired = "/api/v1/workers/desired";
    let (d1, one_sql) = statements.of(w.call(&small, "GET", desired, None)).await;
    let (d16, many_sql) = statements.of(w.call(&big, "GET", desired, None)).await;
    assert_eq!(
        (
            d1["runs"].as_array().unwrap().len(),
            d16["runs"].as_array().unwrap().len()
        ),
        (1, 16)
    );
    assert_eq!(one_sql, many_sql, "the desired set of 1 run and of 16");
    eprintln!(
        "a desired set: {} statements: {many_sql:#?}",
        many_sql.len()
    );

    let batch = |runs: &[Value]| {
        let signals: Vec<Value> = runs
            .iter()
            .flat_map(|r| {
                [
                    signal(r, SignalKind::Started),
                    signal(r, SignalKind::Finished),
                ]
            })
            .collect();
        Some(json!({ "signals": signals }))
    };
    let signals = "/api/v1/workers/signals";
    let (a1, one_sql) = statements
        .of(w.call(&small, "POST", signals, batch(one)))
        .await;
    let (a16, many_sql) = statements
        .of(w.call(&big, "POST", signals, batch(many)))
        .await;
    let applied = |v: &Value| {
        let outcomes = common::results(v, "outcome");
        outcomes.iter().filter(|o| **o == "applied").count()
    };
    assert_eq!((applied(&a1), applied(&a16)), (2, 32));
    assert_eq!(one_sql, many_sql, "a batch of 2 signals and of 32");
    eprintln!("a batch: {} statements: {many_sql:#?}", many_sql.len());
    assert!(w
        .all_runs()
        .await
        .iter()
        .all(|r| r.status.as_str() == "exited"));
}

/// One signal, by run name: (run, attempt, kind, exit code or seq).
type Sig = (usize, i32, SignalKind, i64);

/// A random batch over `n` runs: each run's started and finished (exit 0
/// or 1), some progress, some duplicates, a `lost` now and then, and
/// reports of run 0's dead first attempt (it is at attempt 2), shuffled.
fn random_batch(rng: &mut common::Rng, n: usize) -> Vec<Sig> {
    let mut out = Vec::new();
    for i in 0..n {
        let attempt = if i == 0 { 2 } else { 1 };
        out.push((i, attempt, SignalKind::Started, 0));
        let code = [0, 0, 0, 1][rng.index(4)];
        out.push((i, attempt, SignalKind::Finished, code));
        for _ in 0..rng.index(3) {
            out.push((i, attempt, SignalKind::Progress, 1 + rng.index(3) as i64));
        }
        if rng.index(5) == 0 {
            out.push((i, attempt, SignalKind::Lost, 0));
        }
    }
    out.push((0, 1, SignalKind::Started, 0));
    out.push((0, 1, SignalKind::Finished, 0));
    for _ in 0..n / 2 {
        let d = out[rng.index(out.len())];
        out.push(d);
    }
    for i in (1..out.len()).rev() {
        out.swap(i, rng.index(i + 1));
    }
    out
}

/// A world with `n` runs claimed by host `h` (run 0 at its second
/// attempt: its first was lost and requeued): the host and run ids by
/// name.
async fn claimed_world(n: usize) -> (World, Host, Vec<Uuid>) {
    let w = World::new().await;
    w.runs(n).await;
    let wt = w.host("h", n).await;
    let claim = format!("/api/v1/workers/claim?wait=0&max={n}");
    w.call(&wt, "POST", &claim, None).await;
    let r0 = w.all_runs().await.remove(0);
    let (ctx, now) = (&w.state.ctx, t0());
    let mut tx = ctx.store.begin().await.unwrap();
    let lost = Some(FailureReason::SessionLost);
    let failed = runs::fail(tx.as_mut(), &r0, lost, None, None, true, now)
        .await
        .unwrap();
    runs::lifecycle::requeue(tx.as_mut(), &failed, now)
        .await
        .unwrap();
    ctx.commit(tx).await.unwrap();
    w.call(&wt, "POST", "/api/v1/workers/claim?wait=0&max=1", None)
        .await;
    let host = w.get_host("h").await;
    let runs = w.all_runs().await;
    let mut ids: Vec<(usize, Uuid)> = runs
        .iter()
        .map(|r| (r.name[1..].parse().unwrap(), r.id))
        .collect();
    ids.sort();
    assert_eq!((runs[0].attempt, runs[0].status.as_str()), (2, "spawning"));
    (w, host, ids.into_iter().map(|(_, id)| id).collect())
}

fn to_signal(ids: &[Uuid], (i, attempt, kind, n): Sig) -> Signal {
    let mut s = Signal::new(ids[i], attempt, kind, "2026-03-01T12:00:00Z".into());
    s.seq = (kind == SignalKind::Progress).then_some(n);
    s.exit_code = (kind == SignalKind::Finished).then_some(n as i32);
    s
}

/// What a world's signals left: each run's state, the journal since the
/// claims and the markers, with the world's ids replaced by names.
async fn outcome(w: &World, host: &Host, ids: &[Uuid], since: i64) -> (Vec<String>, Vec<String>) {
    let names = |s: String| {
        let mut s = s.replace(&host.id.to_string(), "HOST");
        for (i, id) in ids.iter().enumerate() {
            s = s.replace(&id.to_string(), &format!("RUN{i}"));
        }
        s
    };
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    let mut state: Vec<String> = w
        .all_runs()
        .await
        .iter()
        .map(|r| names(format!("{} {:?}", r.name, common::signal_state(r))))
        .collect();
    let (_, markers) = tx.lock_runs_with_signals(ids).await.unwrap();
    let mut markers: Vec<String> = markers
        .iter()
        .map(|m| names(format!("marker {} {} {}", m.run_id, m.attempt, m.kind)))
        .collect();
    markers.sort();
    state.extend(markers);
    let journal = tx
        .events_after(since, 100_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| {
            // The project and task ids differ between the worlds too.
            let mut p = e.payload.clone();
            for k in ["project_id", "task_id"] {
                p.as_object_mut().unwrap().remove(k);
            }
            names(format!("{} {p}", e.topic))
        })
        .collect();
    (state, journal)
}

/// A signal batch — duplicates, progress out of order, a dead attempt's
/// reports, several signals per run — leaves runs, markers and journal
/// (topics, order, payloads) exactly as the same signals sent one by one.
#[tokio::test]
async fn a_batch_leaves_the_store_as_the_same_signals_one_by_one() {
    const N: usize = 12;
    for seed in [1u64, 7, 33, 2026] {
        let batch = random_batch(&mut common::Rng(seed), N);
        let (one, h1, ids1) = claimed_world(N).await;
        let (all, h2, ids2) = claimed_world(N).await;
        let since1 = last_seq(&one).await;
        let since2 = last_seq(&all).await;
        let mut outcomes1 = Vec::new();
        for s in &batch {
            outcomes1.extend(applied(&one, &h1, vec![to_signal(&ids1, *s)]).await);
        }
        let signals = batch.iter().map(|s| to_signal(&ids2, *s)).collect();
        let outcomes2 = applied(&all, &h2, signals).await;
        assert_eq!(outcomes1, outcomes2, "seed {seed}: outcomes of {batch:?}");
        assert!(outcomes1.contains(&SignalOutcome::Stale), "seed {seed}");
        assert!(outcomes1.contains(&SignalOutcome::Duplicate), "seed {seed}");
        let (state1, journal1) = outcome(&one, &h1, &ids1, since1).await;
        let (state2, journal2) = outcome(&all, &h2, &ids2, since2).await;
        assert_eq!(state1, state2, "seed {seed}: runs and markers");
        assert_eq!(journal1, journal2, "seed {seed}: journal");
        assert!(journal1.len() >= N, "seed {seed}: {journal1:?}");
    }
}

async fn last_seq(w: &World) -> i64 {
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    let events = tx.events_after(0, 100_000).await.unwrap();
    events.last().map_or(0, |e| e.seq)
}

async fn applied(w: &World, host: &Host, signals: Vec<Signal>) -> Vec<SignalOutcome> {
    match ingest::ingest(&w.state.ctx, host, &signals).await.unwrap() {
        ingest::BatchOutcome::Applied { results, .. } => {
            results.into_iter().map(|r| r.outcome).collect()
        }
        other => panic!("expected an applied batch, got {other:?}"),
    }
}

/// The instance id the worker of host `name` presents (the same in both
/// worlds); `clone` gives the other machine a token copy runs on.
fn instance(name: &str, clone: bool) -> Uuid {
    let mut n: u128 = if clone { 1 << 100 } else { 0 };
    for b in name.bytes() {
        n = n.wrapping_mul(257).wrapping_add(u128::from(b));
    }
    Uuid::from_u128(n + 1)
}

/// Registers host `name` with its instance; its worker token.
async fn registered(w: &World, name: &str) -> String {
    let wt = common::token(&w.state, TokenKind::Worker, name, Some(name)).await;
    let body = json!({"name": name, "platform": "linux", "instance_id": instance(name, false),
                      "capacity": 1, "labels": {}, "version": "t"});
    w.call(&wt, "POST", "/api/v1/workers/register", Some(body))
        .await;
    wt
}

/// The heartbeat of host `name` (by its clone when `clone`).
async fn heartbeat(w: &World, token: &str, name: &str, clone: bool) -> (StatusCode, Value) {
    let body = json!({ "instance_id": instance(name, clone), "running": [] });
    request(
        w.state.clone(),
        Some(token),
        "POST",
        "/api/v1/workers/heartbeat",
        Some(body),
    )
    .await
}

/// Hosts in every state a heartbeat meets: `plain*` online (`plain0`
/// with a run), `flag` online and about to be presented by a clone,
/// `back*` offline, `moved` offline and about to present a new instance,
/// `ghost` with a token but never registered. Each host's token, by name.
async fn fleet_world() -> (World, Vec<(String, String, bool)>) {
    let w = World::new().await;
    w.runs(1).await;
    let mut tokens = Vec::new();
    for name in ["back0", "back1", "moved"] {
        tokens.push((name.to_string(), registered(&w, name).await));
    }
    w.clock.advance(chrono::Duration::seconds(120));
    let now = w.state.ctx.now();
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    for name in ["back0", "back1", "moved"] {
        let h = tx.by_name::<Host>((), name).await.unwrap().unwrap();
        let off = pam_manifests::state::HostStatus::Offline;
        tx.set_host_status(h.id, h.status, off, now).await.unwrap();
    }
    w.state.ctx.commit(tx).await.unwrap();
    for i in 0..6 {
        let name = format!("plain{i}");
        let wt = registered(&w, &name).await;
        tokens.push((name, wt));
    }
    tokens.push(("flag".into(), registered(&w, "flag").await));
    let ghost = common::token(&w.state, TokenKind::Worker, "ghost", Some("ghost")).await;
    tokens.push(("ghost".into(), ghost));
    let claim = "/api/v1/workers/claim?wait=0&max=1";
    w.call(&tokens[3].1, "POST", claim, None).await;
    w.clock.advance(chrono::Duration::seconds(10));
    let beats = tokens
        .into_iter()
        .map(|(name, wt)| {
            let clone = name == "flag" || name == "moved";
            (name, wt, clone)
        })
        .collect();
    (w, beats)
}

/// Every host's state and the journal since `since`, with host ids
/// replaced by names; the journal sorted (a batch journals in arrival
/// order).
async fn hosts_outcome(w: &World, since: i64) -> (Vec<String>, Vec<String>) {
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    let hosts = tx.list::<Host>(()).await.unwrap();
    let names = |mut s: String| {
        for h in &hosts {
            s = s.replace(&h.id.to_string(), &h.name);
        }
        s
    };
    let state = hosts
        .iter()
        .map(|h| {
            format!(
                "{} {:?} {:?} suspect={} {:?} {:?} {:?} rv={}",
                h.name,
                h.status,
                h.instance_id,
                h.instance_suspect,
                h.presented_instance_id,
                h.instance_flagged_at,
                h.last_seen_at,
                h.meta.resource_version
            )
        })
        .collect();
    let mut journal: Vec<String> = tx
        .events_after(since, 100_000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| names(format!("{} {}", e.topic, e.payload)))
        .collect();
    journal.sort();
    (state, journal)
}

/// An answer without the world's ids: its status and its runs' names.
fn answer((s, v): (StatusCode, Value)) -> String {
    let runs = v["runs"].as_array().map_or(0, Vec::len);
    format!("{s} runs={runs} {}", v["error"]["code"])
}

/// Heartbeats of many hosts at once — the pinned instance of online
/// hosts, a clone (OQ-14 flag), offline hosts coming back, a reinstall,
/// an unregistered host — leave hosts, answers and journal as the same
/// heartbeats one by one.
#[tokio::test]
async fn concurrent_heartbeats_leave_the_hosts_as_one_by_one() {
    let (one, beats1) = fleet_world().await;
    let (all, beats2) = fleet_world().await;
    let (since1, since2) = (last_seq(&one).await, last_seq(&all).await);
    let mut answers1 = Vec::new();
    for (name, wt, clone) in &beats1 {
        answers1.push(answer(heartbeat(&one, wt, name, *clone).await));
    }
    let answers2: Vec<String> = futures_util::future::join_all(
        beats2
            .iter()
            .map(|(name, wt, clone)| heartbeat(&all, wt, name, *clone)),
    )
    .await
    .into_iter()
    .map(answer)
    .collect();
    assert_eq!(answers1, answers2, "answers");
    assert!(answers1[3].contains("runs=1"), "{answers1:?}");
    assert!(answers1.last().unwrap().contains("not_registered"));
    let (state1, journal1) = hosts_outcome(&one, since1).await;
    let (state2, journal2) = hosts_outcome(&all, since2).await;
    assert_eq!(state1, state2, "hosts");
    assert_eq!(journal1, journal2, "journal");
    for topic in [
        "worker.instance_suspect",
        "worker.instance_reinstalled",
        "worker.registered",
    ] {
        assert!(
            journal1.iter().any(|e| e.starts_with(topic)),
            "{topic} in {journal1:#?}"
        );
    }
}

/// Thirty-two hosts heartbeating at once cost a few transactions between
/// them, not thirty-two (the database pool answered 503 at
/// 10,000 hosts, one transaction a heartbeat).
#[tokio::test]
async fn concurrent_heartbeats_share_their_transactions() {
    const N: usize = 32;
    let (statements, _guard) = Statements::install(false);
    let w = World::new().await;
    let mut tokens = Vec::new();
    for i in 0..N {
        let name = format!("h{i}");
        tokens.push((registered(&w, &name).await, name));
    }
    w.clock.advance(chrono::Duration::seconds(10));
    let beats = futures_util::future::join_all(
        tokens
            .iter()
            .map(|(wt, name)| heartbeat(&w, wt, name, false)),
    );
    let (answers, sql) = statements.of(beats).await;
    assert!(
        answers.iter().all(|(s, _)| *s == StatusCode::OK),
        "{answers:?}"
    );
    // sqlx logs no BEGIN; every transaction that wrote ends in a COMMIT.
    let begins = sql.iter().filter(|s| s.trim() == "COMMIT").count();
    eprintln!(
        "{N} heartbeats: {} statements, {begins} transactions: {sql:#?}",
        sql.len()
    );
    assert!(begins >= 1, "transactions are counted: {sql:#?}");
    assert!(begins <= N / 4, "{N} heartbeats took {begins} transactions");
    let now = w.state.ctx.now();
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    for h in tx.list::<Host>(()).await.unwrap() {
        assert_eq!(h.last_seen_at, Some(now), "{}", h.name);
    }
}

/// On an idle fleet heartbeats come a few milliseconds apart, not
/// together: two 2 ms apart share one transaction (at 10,000
/// idle hosts nearly every heartbeat was a transaction of its own, most
/// of an idle pamd's CPU). Both workers watch, so nothing but the
/// heartbeat itself touches the database; tried three times, since a
/// loaded machine may hold the second back past the gathering.
#[tokio::test]
async fn heartbeats_a_few_milliseconds_apart_share_a_transaction() {
    let (statements, _guard) = Statements::install(false);
    let w = World::new().await;
    let a = registered(&w, "a").await;
    let b = registered(&w, "b").await;
    let _watches = (open_watch(&w, &a).await, open_watch(&w, &b).await);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let (answers, sql) = statements
            .of(async {
                let first = heartbeat(&w, &a, "a", false);
                let second = async {
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    heartbeat(&w, &b, "b", false).await
                };
                futures_util::future::join(first, second).await
            })
            .await;
        assert_eq!(answers.0 .0, StatusCode::OK, "{answers:?}");
        assert_eq!(answers.1 .0, StatusCode::OK, "{answers:?}");
        let commits = sql.iter().filter(|s| s.trim() == "COMMIT").count();
        if commits == 1 {
            return;
        }
        seen.push(commits);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("two heartbeats 2 ms apart took {seen:?} transactions in three tries");
}

/// Fifty held worker tokens (fifty watching workers) cost the re-check one
/// statement a second between them, not one transaction each (10,000 a second
/// for a fleet of 10,000); a revoked one is still found.
#[tokio::test]
async fn held_tokens_are_rechecked_together() {
    const N: usize = 50;
    let (statements, _guard) = Statements::install(true);
    let w = World::new().await;
    worker_tokens(&w, "h", N).await;
    let tokens = {
        let mut tx = w.state.ctx.store.begin().await.unwrap();
        tx.list_tokens().await.unwrap()
    };
    let (holds, sql) = statements
        .of(async {
            let holds: Vec<_> = tokens
                .iter()
                .filter(|t| t.host_name.is_some())
                .map(|t| {
                    let h = w
                        .state
                        .revocations
                        .hold(&w.state.ctx.store, t.id, &t.fingerprint);
                    (t.id, h)
                })
                .collect();
            tokio::time::sleep(std::time::Duration::from_millis(2_500)).await;
            holds
        })
        .await;
    assert_eq!(holds.len(), N);
    let selects = sql.iter().filter(|s| s.starts_with("SELECT")).count();
    eprintln!("{N} held tokens, 2.5 s: {selects} lookups: {sql:#?}");
    assert!(selects >= 1, "the re-check is counted: {sql:#?}");
    assert!(
        selects <= 3,
        "{N} held tokens took {selects} lookups in 2.5 s"
    );
    let (victim, hold) = &holds[7];
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    tx.revoke_token(*victim, Utc::now()).await.unwrap();
    w.state.ctx.commit(tx).await.unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(3), hold.revoked())
        .await
        .expect("the revoked token is found within a re-check");
    assert!(holds.iter().filter(|(_, h)| h.is_revoked()).count() == 1);
}

/// Thirty workers' tokens used within a second cost one statement that
/// writes their `lastUsedAt`, not a transaction each (167 a
/// second for a fleet of 10,000); every one is written.
#[tokio::test]
async fn token_uses_are_written_together() {
    const N: usize = 30;
    let (statements, _guard) = Statements::install(true);
    let w = World::new().await;
    let tokens = worker_tokens(&w, "u", N).await;
    let ((), sql) = statements
        .of(async {
            for t in &tokens {
                // Not registered: a 409, but the token was used.
                let (s, v) = request(
                    w.state.clone(),
                    Some(t),
                    "GET",
                    "/api/v1/workers/desired",
                    None,
                )
                .await;
                assert_eq!(s, StatusCode::CONFLICT, "{v}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(1_500)).await;
        })
        .await;
    let writes = sql
        .iter()
        .filter(|s| s.starts_with("UPDATE api_tokens"))
        .count();
    assert!(writes >= 1, "the writes are counted: {sql:#?}");
    assert!(writes <= 2, "{N} tokens' uses took {writes} writes");
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    let used = tx
        .list_tokens()
        .await
        .unwrap()
        .iter()
        .filter(|t| t.host_name.is_some() && t.last_used_at == Some(t0()))
        .count();
    assert_eq!(used, N, "every token's use is written");
}

/// A watching worker's heartbeats are authenticated from its watch's hold
/// of its token (at 10,000 watching hosts the token reads were
/// ~500 a second, each waiting for the pool under load); revoked through
/// this pamd, its next request is refused, and revoked behind this pamd's
/// back (through another replica), within a re-check.
#[tokio::test]
async fn a_watching_workers_requests_are_authenticated_from_its_watch() {
    let (statements, _guard) = Statements::install(false);
    let w = World::new().await;
    let watched = registered(&w, "watched").await;
    let other = registered(&w, "other").await;
    let token_reads = |sql: &[String]| {
        sql.iter()
            .filter(|s| s.contains("FROM api_tokens WHERE fingerprint"))
            .count()
    };
    // Not watching: each request reads its token.
    let (s, sql) = statements.of(heartbeat(&w, &other, "other", false)).await;
    assert_eq!(s.0, StatusCode::OK, "{s:?}");
    assert_eq!(token_reads(&sql), 1, "a token read is counted: {sql:#?}");
    let watch = open_watch(&w, &watched).await;
    let (answers, sql) = statements
        .of(async {
            let mut answers = Vec::new();
            for _ in 0..10 {
                answers.push(heartbeat(&w, &watched, "watched", false).await.0);
            }
            answers
        })
        .await;
    assert!(answers.iter().all(|s| *s == StatusCode::OK), "{answers:?}");
    assert_eq!(
        token_reads(&sql),
        0,
        "10 heartbeats read the token: {sql:#?}"
    );
    // Revoked behind this pamd's back: refused within a re-check.
    let id = token_id_of(&w, "watched").await;
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    tx.revoke_token(id, Utc::now()).await.unwrap();
    w.state.ctx.commit(tx).await.unwrap();
    let revoked = std::time::Instant::now();
    loop {
        let (s, _) = heartbeat(&w, &watched, "watched", false).await;
        if s == StatusCode::UNAUTHORIZED {
            break;
        }
        assert!(
            revoked.elapsed() < pam_controller::api::access::revocation::RECHECK * 3,
            "a token revoked elsewhere still authenticates after {:?}",
            revoked.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    drop(watch);
    // Revoked through this pamd: the next request is refused.
    let other_id = token_id_of(&w, "other").await;
    let _watch = open_watch(&w, &other).await;
    let ops = w.ops.clone();
    let (s, v) = request(
        w.state.clone(),
        Some(&ops),
        "DELETE",
        &format!("/api/v1/tokens/{other_id}"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT, "{v}");
    let (s, v) = heartbeat(&w, &other, "other", false).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED, "{v}");
}

/// A watching worker's heartbeat is answered while every connection of
/// the pool is taken (under load heartbeats waited for the pool,
/// were answered 503 after a second, and p99 was over 2 s): its token is
/// checked from the watch's hold, its write takes a connection kept for
/// liveness.
#[tokio::test]
async fn a_watching_workers_heartbeat_is_answered_with_the_pool_taken() {
    let w = World::new().await;
    let wt = registered(&w, "busy").await;
    let watch = open_watch(&w, &wt).await;
    // Every connection of the test pool (10), held in open transactions.
    let mut taken = Vec::new();
    while let Ok(Ok(tx)) = tokio::time::timeout(
        std::time::Duration::from_millis(500),
        w.state.ctx.store.begin(),
    )
    .await
    {
        taken.push(tx);
    }
    assert!(!taken.is_empty(), "the pool is taken");
    let answer = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        heartbeat(&w, &wt, "busy", false),
    )
    .await
    .expect("the heartbeat waited for the pool");
    assert_eq!(answer.0, StatusCode::OK, "{answer:?}");
    drop(taken);
    drop(watch);
}

/// The watch stream of the worker with token `token`, open (its body
/// unread: the stream lives as long as the response).
async fn open_watch(w: &World, token: &str) -> axum::response::Response {
    use tower::ServiceExt as _;
    let req = common::json_request(
        axum::http::Request::builder()
            .uri("/api/v1/workers/watch")
            .header("authorization", format!("Bearer {token}")),
        None,
    );
    let watch = pam_controller::api::router(w.state.clone())
        .oneshot(req)
        .await
        .unwrap();
    assert_eq!(watch.status(), StatusCode::OK);
    watch
}

/// The id of host `host`'s worker token.
async fn token_id_of(w: &World, host: &str) -> Uuid {
    let mut tx = w.state.ctx.store.begin().await.unwrap();
    let tokens = tx.list_tokens().await.unwrap();
    tokens
        .into_iter()
        .find(|t| t.host_name.as_deref() == Some(host))
        .unwrap()
        .id
}

/// `n` worker tokens, of hosts `PREFIX0`…: the tokens.
async fn worker_tokens(w: &World, prefix: &str, n: usize) -> Vec<String> {
    let mut tokens = Vec::new();
    for i in 0..n {
        let name = format!("{prefix}{i}");
        tokens.push(common::token(&w.state, TokenKind::Worker, &name, Some(&name)).await);
    }
    tokens
}
