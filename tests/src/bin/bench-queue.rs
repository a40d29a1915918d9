//! bench-queue: pam's dispatch side by side with graphile-worker on the
//! same PostgreSQL, in the same run (issue 20).
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
//!
//! Prints every rate and pam's ratio to each. Needs Node.js and npm.
//! `cargo build --release --workspace --bins &&
//!  ./target/release/bench-queue [--json PATH]`

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
    Signal {
        run_id: run.run_id,
        attempt: run.attempt,
        kind,
        seq: None,
        exit_code: (kind == SignalKind::Finished).then_some(0),
        reason: None,
        message: None,
        usage: None,
        session_name: Some(run.session_name.clone()),
        result: None,
        at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
    }
}

/// pam: (claimed runs/s, completed runs/s).
async fn pam() -> anyhow::Result<(f64, f64)> {
    let pamd = Pamd::start(PamdOptions {
        // Measures the queue, not pamd's rate limits (issue 19).
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
            }))?,
        )?;
    }
    Ok(())
}
