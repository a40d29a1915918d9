//! bench-queue: pam's dispatch side by side with graphile-worker on the
//! same PostgreSQL, in the same run.
//!
//! - pam: 10,000 pending runs; 16 simulated workers (the real worker
//!   protocol over HTTP to a real pamd) claim up to 16 at a time
//!   (`POST /api/v1/workers/claim?wait=0&max=16`) and report each run
//!   `started` and `finished` (exit 0) in one signal batch: a no-op run.
//!   Measured from the first claim until every run is `exited` (each one
//!   claimed exactly once and journaled). Also: claims alone (runs/s
//!   until all are claimed).
//! - graphile-worker 0.18.0 (tests/graphile, `npm ci` on first use): 10,000
//!   no-op jobs at concurrency 16, with its defaults and with its local
//!   queue (batched fetch and completion), until its jobs table is empty.
//! - the floor: PostgreSQL alone writing the rows the seed makes each
//!   no-op run cost, on pam's schema, no pamd (see [`floor`]): the
//!   ceiling of pam's ratio to graphile-worker on this machine.
//!
//! Prints every rate and pam's ratio to each. Needs Node.js and npm.
//! `cargo build --release --workspace --bins &&
//!  ./target/release/bench-queue [--json PATH]`; `--floor` runs only
//! graphile-worker's local queue and the floor, in more shapes, also with
//! only the seed's indexes.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pam_manifests::protocol::{DesiredSet, Signal, SignalKind};
use pam_tests::bench::{record, Figure};
use pam_tests::{Pamd, PamdOptions};
use serde_json::{json, Value};

const RUNS: usize = 10_000;
const WORKERS: usize = 16;

async fn post(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    let r = http.post(url).bearer_auth(token).json(body).send().await?;
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    anyhow::ensure!(status.is_success(), "{url}: {status} {v}");
    Ok(v)
}

fn signal(run: &pam_manifests::protocol::DesiredRun, kind: SignalKind) -> Signal {
    let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let mut s = Signal::new(run.run_id, run.attempt, kind, at);
    s.exit_code = (kind == SignalKind::Finished).then_some(0);
    s.session_name = Some(run.session_name.clone());
    s
}

/// A pamd with RUNS pending no-op runs and WORKERS registered workers:
/// (pamd, client, the workers' tokens).
async fn setup() -> anyhow::Result<(Pamd, reqwest::Client, Vec<String>)> {
    let pamd = Pamd::start(PamdOptions {
        // Measures the queue, not pamd's rate limits.
        config_toml: "[rate_limits]\nenabled = false\n".into(),
        log_filter: Some("warn".into()),
        ..PamdOptions::default()
    })
    .await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(64)
        .build()?;
    let apply = format!("{}/api/v1/apply", pamd.url);
    post(&http, &apply, &pamd.token, &json!({"objects": [
        {"apiVersion": "pam.dev/v1", "kind": "Project", "metadata": {"name": "q"}, "spec": {"displayName": "Q"}},
        {"apiVersion": "pam.dev/v1", "kind": "Task", "metadata": {"name": "t1", "project": "q"}, "spec": {"title": "T1"}},
    ]})).await?;
    for i in (0..RUNS).step_by(1000) {
        let objects: Vec<Value> = (i..(i + 1000).min(RUNS))
            .map(|k| {
                json!({"apiVersion": "pam.dev/v1", "kind": "Run",
                "metadata": {"name": format!("r{k}"), "project": "q"},
                "spec": {"task": "t1", "provider": "claude", "prompt": "go", "cwd": "/tmp"}})
            })
            .collect();
        post(&http, &apply, &pamd.token, &json!({ "objects": objects })).await?;
    }
    let mut tokens = Vec::new();
    for w in 0..WORKERS {
        let name = format!("q{w}");
        let v = post(
            &http,
            &format!("{}/api/v1/tokens", pamd.url),
            &pamd.token,
            &json!({"worker": name}),
        )
        .await?;
        let token = v["token"].as_str().unwrap_or_default().to_string();
        post(
            &http,
            &format!("{}/api/v1/workers/register", pamd.url),
            &token,
            &json!({
            "name": name, "platform": "linux", "instance_id": uuid::Uuid::new_v4(),
            "capacity": 16, "labels": {}, "version": "bench"}),
        )
        .await?;
        tokens.push(token);
    }
    eprintln!("bench-queue: {RUNS} runs pending, {WORKERS} workers registered");
    Ok((pamd, http, tokens))
}

/// pam: (claimed runs/s, completed runs/s).
async fn pam() -> anyhow::Result<(f64, f64)> {
    let (pamd, http, tokens) = setup().await?;
    let claimed = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    let all_claimed = Arc::new(std::sync::Mutex::new(None::<Duration>));
    let mut tasks = Vec::new();
    for token in tokens {
        let (http, base) = (http.clone(), pamd.url.clone());
        let (claimed, finished, all_claimed) =
            (claimed.clone(), finished.clone(), all_claimed.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let v = post(
                    &http,
                    &format!("{base}/api/v1/workers/claim?wait=0&max=16"),
                    &token,
                    &json!({}),
                )
                .await?;
                let set: DesiredSet = serde_json::from_value(v)?;
                if set.runs.is_empty() {
                    if finished.load(Ordering::SeqCst) >= RUNS {
                        return anyhow::Ok(());
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                if claimed.fetch_add(set.runs.len(), Ordering::SeqCst) + set.runs.len() == RUNS {
                    *all_claimed.lock().unwrap() = Some(t0.elapsed());
                }
                let signals: Vec<Signal> = set
                    .runs
                    .iter()
                    .flat_map(|r| {
                        [
                            signal(r, SignalKind::Started),
                            signal(r, SignalKind::Finished),
                        ]
                    })
                    .collect();
                post(
                    &http,
                    &format!("{base}/api/v1/workers/signals"),
                    &token,
                    &json!({ "signals": signals }),
                )
                .await?;
                finished.fetch_add(set.runs.len(), Ordering::SeqCst);
            }
        }));
    }
    for t in tasks {
        if let Err(e) = t.await? {
            let log = pamd.log();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("pamd log (last lines, newest first):\n{}", tail.join("\n"));
            return Err(e);
        }
    }
    let done = t0.elapsed();
    // Each run exactly once: RUNS exited, one run.finished each.
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&pamd.database_url)
        .await?;
    let (exited,): (i64,) = sqlx::query_as("SELECT count(*) FROM runs WHERE status = 'exited'")
        .fetch_one(&pool)
        .await?;
    let (events, distinct): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(DISTINCT payload->>'run_id') FROM events WHERE topic = 'run.finished'",
    )
    .fetch_one(&pool)
    .await?;
    anyhow::ensure!(
        exited as usize == RUNS && events as usize == RUNS && distinct as usize == RUNS,
        "exactly once broken: {exited} exited, {events} run.finished for {distinct} runs"
    );
    anyhow::ensure!(
        claimed.load(Ordering::SeqCst) == RUNS,
        "claimed {} of {RUNS}",
        claimed.load(Ordering::SeqCst)
    );
    let claim_secs = all_claimed.lock().unwrap().unwrap_or(done).as_secs_f64();
    Ok((RUNS as f64 / claim_secs, RUNS as f64 / done.as_secs_f64()))
}

/// The claim of a cycle in [`floor`]: `$2` pending runs, oldest first,
/// to host `$1`, and their `run.spawning` (one statement, so one
/// transaction).
const FLOOR_CLAIM: &str = "WITH c AS (SELECT id FROM runs WHERE status = 'pending' \
      AND dispatchable_since IS NOT NULL ORDER BY dispatchable_since, id LIMIT $2 \
      FOR UPDATE SKIP LOCKED), \
    u AS (UPDATE runs r SET status = 'spawning', host_id = $1, updated_at = now(), \
      resource_version = r.resource_version + 1 FROM c WHERE r.id = c.id \
      RETURNING r.id, r.project_id, r.attempt) \
    INSERT INTO events (topic, payload, created_at) SELECT 'run.spawning', \
      jsonb_build_object('run_id', id, 'project_id', project_id, 'attempt', attempt, 'host_id', $1), \
      now() FROM u RETURNING (payload->>'run_id')::uuid";

/// The report of a cycle in [`floor`]: the `started` and `finished`
/// markers of runs `$1`, the runs exited, their `run.started` and
/// `run.finished` (one statement).
const FLOOR_REPORT: &str = "WITH m AS (INSERT INTO processed_signals (run_id, attempt, kind, received_at) \
      SELECT r, 1, k, now() FROM unnest($1::uuid[]) r \
      CROSS JOIN (VALUES ('started'), ('finished')) v(k) ON CONFLICT DO NOTHING RETURNING run_id), \
    u AS (UPDATE runs SET status = 'exited', exit_code = 0, started_at = now(), \
      finished_at = now(), updated_at = now(), resource_version = resource_version + 1 \
      WHERE id = ANY($1) AND status = 'spawning' RETURNING id, project_id, attempt) \
    INSERT INTO events (topic, payload, created_at) SELECT t, \
      jsonb_build_object('run_id', id, 'project_id', project_id, 'attempt', attempt, 'exit_code', 0), \
      now() FROM u CROSS JOIN (VALUES ('run.started'), ('run.finished')) v(t)";

/// One shape of [`floor`].
#[derive(Clone, Copy)]
struct Floor {
    /// Connections, each a loop of claim (and report).
    clients: usize,
    /// Runs per claim.
    batch: i64,
    /// Report the claimed runs (`false`: claims alone).
    report: bool,
    /// Drop the indexes pam adds to the seed's (the claim's, the journal
    /// reader's, the loops'), keeping the seed's own: the highest ceiling.
    seed_indexes_only: bool,
}

impl std::fmt::Display for Floor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.report { "completed" } else { "claimed" };
        let ix = if self.seed_indexes_only {
            ", seed's indexes only"
        } else {
            ""
        };
        write!(f, "{what}, {} x {}{ix}", self.clients, self.batch)
    }
}

/// The indexes pam adds to the seed's on `runs` and `events`, and its
/// unique `(project_id, name)` (declarative names), for
/// [`Floor::seed_indexes_only`].
const NOT_SEED: &[&str] = &[
    "DROP INDEX runs_pending, runs_requeue, runs_live, runs_project_id, runs_blocked, \
     events_created_at, events_xid_seq",
    "ALTER TABLE runs DROP CONSTRAINT runs_project_name",
];

/// PostgreSQL alone writing the rows the seed makes every no-op run cost
/// (runs/s): `shape.clients` connections, each a loop of one claim of
/// `shape.batch` runs and one report of them, two single-statement
/// transactions, on pam's own schema and RUNS pending runs — no pamd, no
/// HTTP, no guard beyond the statements'. Per run: the run row written
/// twice (its status is in partial indexes' predicates, so never a HOT
/// update), three journal rows (`run.spawning`, `run.started`,
/// `run.finished`: the seed's run topics) and two `processed_signals`
/// markers (the seed's exactly-once ledger of one-shot kinds). What pam
/// could reach if everything else it does cost nothing.
async fn floor(shape: Floor) -> anyhow::Result<f64> {
    let (mut pamd, _, _) = setup().await?;
    pamd.kill9();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(shape.clients as u32)
        .connect(&pamd.database_url)
        .await?;
    let hosts: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM hosts ORDER BY name")
        .fetch_all(&pool)
        .await?;
    anyhow::ensure!(!hosts.is_empty(), "no hosts registered");
    if shape.seed_indexes_only {
        for sql in NOT_SEED {
            sqlx::query(sql).execute(&pool).await?;
        }
    }
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..shape.clients {
        let (pool, host) = (pool.clone(), hosts[c % hosts.len()]);
        tasks.push(tokio::spawn(async move {
            loop {
                let ids: Vec<uuid::Uuid> = sqlx::query_scalar(FLOOR_CLAIM)
                    .bind(host)
                    .bind(shape.batch)
                    .fetch_all(&pool)
                    .await?;
                if ids.is_empty() {
                    return anyhow::Ok(());
                }
                if shape.report {
                    sqlx::query(FLOOR_REPORT).bind(&ids).execute(&pool).await?;
                }
            }
        }));
    }
    for t in tasks {
        t.await??;
    }
    let secs = t0.elapsed().as_secs_f64();
    // Each run claimed once (and reported once): the rows are all there.
    let (claimed, finished): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM events WHERE topic = 'run.spawning'), \
                (SELECT count(*) FROM runs WHERE status = 'exited')",
    )
    .fetch_one(&pool)
    .await?;
    let want_finished = if shape.report { RUNS } else { 0 };
    anyhow::ensure!(
        claimed as usize == RUNS && finished as usize == want_finished,
        "floor {shape}: {claimed} run.spawning, {finished} exited of {RUNS}"
    );
    Ok(RUNS as f64 / secs)
}

fn graphile_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("graphile")
}

/// graphile-worker in `mode` on a fresh database of the same server.
async fn graphile(mode: &str) -> anyhow::Result<f64> {
    let dir = graphile_dir();
    if !dir.join("node_modules/graphile-worker").exists() {
        let ok = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()?
            .success();
        anyhow::ensure!(ok, "npm ci in {} failed", dir.display());
    }
    let url = pam_testkit::testdb::fresh_database_url().await?;
    let out = Command::new("node")
        .args([
            "bench.mjs",
            &url,
            mode,
            &RUNS.to_string(),
            &WORKERS.to_string(),
        ])
        .current_dir(&dir)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "graphile-worker {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(line.lines().last().unwrap_or_default())?;
    Ok(v["rate"].as_f64().unwrap_or(0.0))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    if std::env::args().any(|a| a == "--floor") {
        eprintln!("bench-queue: graphile-worker, local queue");
        let g_local = graphile("localqueue").await?;
        println!("bench-queue --floor: {RUNS} no-op runs, one PostgreSQL");
        println!("  graphile-worker 0.18.0, local queue     {g_local:>8.0} jobs/s");
        for seed_indexes_only in [false, true] {
            for report in [true, false] {
                for (clients, batch) in [(WORKERS, 16), (1, 500), (2, 500), (4, 500)] {
                    let shape = Floor {
                        clients,
                        batch,
                        report,
                        seed_indexes_only,
                    };
                    eprintln!("bench-queue: floor, {shape}");
                    let f = floor(shape).await?;
                    println!(
                        "  floor, {:<40} {f:>8.0} runs/s  {:.2}x",
                        shape.to_string(),
                        f / g_local
                    );
                }
            }
        }
        return Ok(());
    }
    // ABA: graphile default, pam, graphile local queue — then pam again,
    // so neither side always runs on a warmer server.
    eprintln!("bench-queue: graphile-worker, defaults");
    let g_default = graphile("default").await?;
    eprintln!("bench-queue: pam");
    let (claim1, done1) = pam().await?;
    eprintln!("bench-queue: graphile-worker, local queue");
    let g_local = graphile("localqueue").await?;
    eprintln!("bench-queue: pam");
    let (claim2, done2) = pam().await?;
    let (claim, done) = ((claim1 + claim2) / 2.0, (done1 + done2) / 2.0);
    // The floor in pam's shape (16 hosts claiming 16) and in
    // graphile-worker's local queue's (few fetchers of 500).
    let mut floors = Vec::new();
    for (clients, batch, report) in [(WORKERS, 16, true), (2, 500, true), (2, 500, false)] {
        let shape = Floor {
            clients,
            batch,
            report,
            seed_indexes_only: false,
        };
        eprintln!("bench-queue: floor, {shape}");
        floors.push((shape, floor(shape).await?));
    }
    println!("bench-queue: {RUNS} no-op runs/jobs, {WORKERS} workers / concurrency {WORKERS}, one PostgreSQL");
    println!("  graphile-worker 0.18.0, defaults        {g_default:>8.0} jobs/s");
    println!("  graphile-worker 0.18.0, local queue     {g_local:>8.0} jobs/s");
    println!("  pam, claimed (claim only)               {claim:>8.0} runs/s   ({claim1:.0}, {claim2:.0})");
    println!(
        "  pam, completed (claim+started+finished) {done:>8.0} runs/s   ({done1:.0}, {done2:.0})"
    );
    println!(
        "  pam completed / graphile defaults       {:>8.2}×",
        done / g_default
    );
    println!(
        "  pam completed / graphile local queue    {:>8.2}×   target >= 1.0x: {}",
        done / g_local,
        record(Figure {
            name: "bench-queue pam completed / graphile-worker local queue",
            value: done,
            unit: "runs/s",
            baseline: Some(g_local),
            target: ">= 1.0x graphile-worker (local queue)",
            pass: done >= g_local,
        })
    );
    for (shape, f) in &floors {
        println!(
            "  floor: PostgreSQL alone, {:<26} {f:>8.0} runs/s   {:.2}× graphile local queue, pam {:.2}× of it",
            shape.to_string(),
            f / g_local,
            if shape.report { done } else { claim } / f,
        );
        record(Figure {
            name: &format!("bench-queue floor ({shape}) / graphile-worker local queue"),
            value: *f,
            unit: "runs/s",
            baseline: Some(g_local),
            target: "(reported: the ceiling of pam's ratio)",
            pass: true,
        });
    }
    record(Figure {
        name: "bench-queue pam completed / graphile-worker defaults",
        value: done,
        unit: "runs/s",
        baseline: Some(g_default),
        target: "(reported)",
        pass: true,
    });
    if let Some(path) = std::env::args().skip_while(|a| a != "--json").nth(1) {
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&json!({
                "graphile_default": g_default, "graphile_local_queue": g_local,
                "pam_claimed": claim, "pam_completed": done,
                "ratio_vs_default": done / g_default, "ratio_vs_local_queue": done / g_local,
                "floors": floors.iter().map(|(shape, f)| json!({
                    "shape": shape.to_string(), "runs_per_s": f, "ratio_vs_local_queue": f / g_local,
                })).collect::<Vec<_>>(),
            }))?,
        )?;
    }
    Ok(())
}
