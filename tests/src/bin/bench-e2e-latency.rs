//! bench-e2e-latency: apply → session running, end to end, with one real
//! pam-worker (target p50 ≤ 50 ms, p99 ≤ 150 ms, down from a first
//! 150 ms and 500 ms; printed, not asserted).
//!
//! For each of N runs (default 50, `--runs N`): POST /api/v1/apply with a
//! Run of the fake provider, then poll (every 2 ms) until the worker's tmux
//! server has the run's session (`session`) and until pamd reports the run
//! running (`running`: the wrapper's `started` signal shipped and applied).
//! The baseline, measured in the same process on the same machine, is the
//! floor of the worker's own work: `tmux new-session -d` of the same wrapper
//! command line, polled the same way until the session is listed.
//!
//! The bench drives one host far harder than agent runs do: a run every
//! ~50 ms, each over in ~0.3 s. So that it measures dispatch, not
//! queueing, the worker has room for 16 runs at once (runs never wait for
//! a free slot) and its token's rate budget is raised to 1,000 requests a
//! second: at ~7 requests per run (long-poll claim, desired sets, signal
//! batches, snapshots) the bench's ~140 a second would exceed the default
//! budget of 50 a second (sized for runs of minutes, docs/operations.md,
//! "Rate limits"), and each 429 costs a 1 s wait. Everything else is the
//! defaults, the 5 s reconcile tick included, so a lost wake-up shows as
//! a 5 s outlier.
//!
//! Needs the workspace binaries of the same profile:
//! `cargo build --release --workspace --bins &&
//!  cargo run --release -p pam-tests --bin bench-e2e-latency`.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pam_tests::bench::{record, Figure};
use pam_tests::worker::{
    apply, create_worker_token, fake, project_yaml, wait_online, Worker, FAST_PAMD_TOML,
};
use pam_tests::{bin, Pamd, PamdOptions};
use serde_json::{json, Value};

/// Room for every run the bench has going at once (see the module doc).
const BENCH_WORKER_TOML: &str = "heartbeat_seconds = 1\ncapacity = 16\n";

/// The bench's one worker sends ~140 requests a second (module doc).
const BENCH_RATE_LIMITS: &str = "[rate_limits]\nworker_per_second = 1000\nworker_burst = 1000\n";

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn summary(name: &str, mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let (p50, p99) = (pct(&v, 0.5), pct(&v, 0.99));
    println!(
        "{name:<28} n={:<4} p50 {:>8.1} ms  p99 {:>8.1} ms  min {:>7.1} ms  max {:>8.1} ms",
        v.len(),
        ms(p50),
        ms(p99),
        ms(v[0]),
        ms(v[v.len() - 1])
    );
    (p50, p99)
}

fn has_session(w: &Worker, name: &str) -> bool {
    w.tmux(&["has-session", "-t", &format!("={name}")])
        .status
        .success()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let runs: usize = std::env::args()
        .skip_while(|a| a != "--runs")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    let pamd = Pamd::start(PamdOptions {
        config_toml: format!("{FAST_PAMD_TOML}{BENCH_RATE_LIMITS}"),
        ..PamdOptions::default()
    })
    .await?;
    let token = create_worker_token(&pamd, "bench").await?;
    let w = Worker::start_with_token(&pamd.url, &token, "bench", BENCH_WORKER_TOML)?;
    wait_online(&pamd, "bench").await;
    apply(&pamd, &project_yaml());
    let http = reqwest::Client::new();
    let cwd = w.tmp().display().to_string();
    // The provider keeps the session up for a while so the session poll
    // cannot miss it; runs end on their own, capacity frees up.
    let command = fake(&["--lines", "1", "--sleep-ms", "300"]);

    // Keep the tmux server up between sessions (it exits with its last
    // session); not a pam-* session, so the worker ignores it.
    let keep = w.tmux(&[
        "new-session",
        "-d",
        "-s",
        "bench-keepalive",
        "sleep",
        "86400",
    ]);
    anyhow::ensure!(keep.status.success(), "tmux keepalive session: {keep:?}");
    // Baseline: the floor — tmux new-session of the wrapper's command line.
    let mut base = Vec::new();
    for i in 0..runs {
        let name = format!("pam-b{i:07}");
        let t0 = Instant::now();
        let st = Command::new("tmux")
            .arg("-S")
            .arg(&w.socket)
            .args(["new-session", "-d", "-s", &name, "-c", &cwd, "--"])
            .arg(bin("pam-worker"))
            .args([
                "wrap",
                "--run",
                "00000000-0000-4000-8000-000000000000",
                "--attempt",
                "1",
                "--data-dir",
            ])
            .arg(w.tmp().join("baseline"))
            .arg("--")
            .args(&command)
            .stdin(Stdio::null())
            .status()?;
        anyhow::ensure!(st.success(), "tmux new-session failed");
        while !has_session(&w, &name) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        base.push(t0.elapsed());
        let _ = w.tmux(&["kill-session", "-t", &format!("={name}")]);
    }

    let mut to_session = Vec::new();
    let mut to_running = Vec::new();
    for i in 0..runs {
        let name = format!("lat-{i}");
        let run = json!({
            "apiVersion": "pam.dev/v1", "kind": "Run",
            "metadata": { "name": name, "project": "e2e" },
            "spec": { "task": "t1", "provider": "exec", "cwd": cwd, "command": command },
        });
        let t0 = Instant::now();
        let r = http
            .post(format!("{}/api/v1/apply", pamd.url))
            .bearer_auth(&pamd.token)
            .json(&json!({ "objects": [run], "dryRun": false, "prune": false }))
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "apply: {}", r.status());
        let mut session: Option<String> = None;
        let mut seen_session = None;
        let deadline = t0 + Duration::from_secs(30);
        loop {
            anyhow::ensure!(
                Instant::now() < deadline,
                "run {name} not running after 30 s"
            );
            let v: Value = http
                .get(format!("{}/api/v1/projects/e2e/runs/{name}", pamd.url))
                .bearer_auth(&pamd.token)
                .send()
                .await?
                .json()
                .await?;
            if session.is_none() {
                session = v["status"]["sessionName"].as_str().map(str::to_string);
            }
            if seen_session.is_none() {
                if let Some(s) = &session {
                    if has_session(&w, s) {
                        seen_session = Some(t0.elapsed());
                    }
                }
            }
            let phase = v["status"]["phase"].as_str().unwrap_or("");
            if matches!(phase, "running" | "exited") {
                to_running.push(t0.elapsed());
                to_session.push(seen_session.unwrap_or_else(|| t0.elapsed()));
                break;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    println!("bench-e2e-latency: {runs} runs, one worker, fake provider (exec)");
    let (b50, b99) = summary("baseline tmux new-session", base);
    let (s50, s99) = summary("apply → session exists", to_session);
    let (r50, r99) = summary("apply → run running", to_running);
    println!(
        "ratios vs baseline: session p50 {:.1}x p99 {:.1}x; running p50 {:.1}x p99 {:.1}x",
        ms(s50) / ms(b50),
        ms(s99) / ms(b99),
        ms(r50) / ms(b50),
        ms(r99) / ms(b99)
    );
    println!(
        "target: running p50 <= 50 ms ({}), p99 <= 150 ms ({})",
        record(Figure {
            name: "bench-e2e-latency apply to running p50",
            value: ms(r50),
            unit: "ms",
            baseline: Some(ms(b50)),
            target: "<= 50 ms",
            pass: r50 <= Duration::from_millis(50),
        }),
        record(Figure {
            name: "bench-e2e-latency apply to running p99",
            value: ms(r99),
            unit: "ms",
            baseline: Some(ms(b99)),
            target: "<= 150 ms",
            pass: r99 <= Duration::from_millis(150),
        })
    );
    Ok(())
}
