//! The fleet simulator: N simulated worker hosts in one process
//! speaking the real worker protocol over HTTP to a real pamd (the release
//! build when run as `cargo run --release … --bin bench-fleet`), with runs
//! created at a steady rate through `POST /api/v1/apply`.
//!
//! It reports pamd's CPU seconds and RSS (from /proc), API latency p50/p99
//! per endpoint (as the hosts saw it), dispatch latency p50/p99 (pending →
//! spawning, from the journal's timestamps), the loops' pass durations
//! (from /metrics), and lost or duplicated signals (the journal checked
//! against every acknowledgement the hosts got).

pub mod host;
pub mod measure;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::{Pamd, PamdOptions};
use host::{Host, Shared};

/// The simulation's knobs.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub hosts: usize,
    /// Runs a host runs at once.
    pub capacity: u32,
    pub heartbeat_secs: u64,
    /// The safety-net read of the desired set (pam-worker's
    /// `resync_seconds`).
    pub resync_secs: u64,
    /// Seconds of idle fleet (no runs) measured before the window.
    pub idle_secs: u64,
    /// Mean run duration; each run draws uniformly from 0.5× to 1.5×.
    pub run_secs: f64,
    /// Seconds between two progress steps of a run.
    pub progress_secs: f64,
    /// Share of the fleet's capacity the creation rate aims at.
    pub utilization: f64,
    /// Share of runs that exit 1 (and are restarted once).
    pub fail_rate: f64,
    /// Crashes per host per minute; a crash pauses the agent `crash_secs`.
    pub crash_rate_per_min: f64,
    pub crash_secs: f64,
    /// How long runs are created.
    pub window_secs: u64,
    pub seed: u64,
    /// Each host's first resync falls anywhere in its first `resync_secs`
    /// (not in its second): a fleet as it is after running for a while,
    /// whose resyncs are spread evenly, so the idle figure counts them.
    /// Off by default, so figures stay comparable with earlier ones.
    pub steady: bool,
}

impl FleetConfig {
    /// Real time: 30 s heartbeats, 300 s resyncs (pam-worker's defaults;
    /// the resync was 60 s before 2026-12-05), runs of 60 s on average.
    pub fn real(hosts: usize) -> FleetConfig {
        FleetConfig {
            hosts,
            capacity: 2,
            heartbeat_secs: 30,
            resync_secs: 300,
            idle_secs: 0,
            run_secs: 60.0,
            progress_secs: 10.0,
            utilization: 0.5,
            fail_rate: 0.05,
            crash_rate_per_min: 0.01,
            crash_secs: 5.0,
            window_secs: 60,
            seed: 42,
            steady: false,
        }
    }

    /// Time compressed `k` times: heartbeats, ticks, runs and progress
    /// steps come `k` times as often (at least 1 s apart where pamd's
    /// config counts whole seconds), so each host is `k` times as busy.
    pub fn compressed(hosts: usize, k: f64) -> FleetConfig {
        let r = FleetConfig::real(hosts);
        FleetConfig {
            heartbeat_secs: ((r.heartbeat_secs as f64 / k).round() as u64).max(1),
            resync_secs: ((r.resync_secs as f64 / k).round() as u64).max(1),
            run_secs: r.run_secs / k,
            progress_secs: r.progress_secs / k,
            crash_rate_per_min: r.crash_rate_per_min * k,
            ..r
        }
    }

    /// Runs created per second: the share `utilization` of the fleet's
    /// capacity, given the mean run duration.
    pub fn creation_rate(&self) -> f64 {
        self.hosts as f64 * self.capacity as f64 * self.utilization / self.run_secs
    }
}

/// A small deterministic generator (xorshift64*), enough for durations
/// and coin flips.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0.max(1);
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// An operator request; a 429 (or 503) is waited out (`Retry-After`) like pamctl
/// does (setting up 5,000 hosts' tokens goes past the operator budget).
async fn post(
    pamd: &Pamd,
    http: &reqwest::Client,
    path: &str,
    body: &Value,
) -> anyhow::Result<Value> {
    let r = loop {
        let r = http
            .post(format!("{}{path}", pamd.url))
            .bearer_auth(&pamd.token)
            .json(body)
            .send()
            .await?;
        // A 503 (the database pool busy: at 10,000 hosts) is
        // retried like a 429.
        if r.status() != reqwest::StatusCode::TOO_MANY_REQUESTS
            && r.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE
        {
            break r;
        }
        let wait = r
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1);
        tokio::time::sleep(Duration::from_secs(wait.clamp(1, 60))).await;
    };
    let status = r.status();
    let v: Value = r.json().await.unwrap_or(Value::Null);
    anyhow::ensure!(status.is_success(), "{path}: {status} {v}");
    Ok(v)
}

fn run_object(i: usize) -> Value {
    json!({
        "apiVersion": "pam.dev/v1", "kind": "Run",
        "metadata": {"name": format!("fleet-{i}"), "project": "fleet"},
        "spec": {"task": "t1", "provider": "claude", "prompt": "go", "cwd": "/tmp",
                 "restartPolicy": {"maxAttempts": 2, "backoffSeconds": 1}},
    })
}

/// Starts pamd and the fleet, creates runs for the window, drains, and
/// reports.
pub async fn simulate(cfg: FleetConfig) -> anyhow::Result<Value> {
    let pamd = Pamd::start(PamdOptions {
        config_toml: format!(
            "[hosts]\nheartbeat_seconds = {}\noffline_after_seconds = {}\n{}",
            cfg.heartbeat_secs,
            cfg.heartbeat_secs * 3,
            // What a bigger pool changes (`PAM_BENCH_POOL=32`).
            std::env::var("PAM_BENCH_POOL")
                .ok()
                .and_then(|n| n.parse::<u32>().ok())
                .map(|n| format!("[database]\nmax_connections = {n}\n"))
                .unwrap_or_default()
        ),
        log_filter: Some("warn".into()),
        ..PamdOptions::default()
    })
    .await?;
    let pid = pamd
        .pid()
        .ok_or_else(|| anyhow::anyhow!("pamd has no pid"))?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(cfg.hosts * 3 + 16)
        .timeout(Duration::from_secs(90))
        .build()?;
    post(
        &pamd,
        &http,
        "/api/v1/apply",
        &json!({"objects": [
            {"apiVersion": "pam.dev/v1", "kind": "Project", "metadata": {"name": "fleet"}, "spec": {"displayName": "Fleet"}},
            {"apiVersion": "pam.dev/v1", "kind": "Task", "metadata": {"name": "t1", "project": "fleet"}, "spec": {"title": "T1"}},
        ]}),
    )
    .await?;

    // Tokens and registration, 32 at a time.
    let t = Instant::now();
    let names: Vec<String> = (0..cfg.hosts).map(|i| format!("sim-{i:05}")).collect();
    let mut hosts = Vec::with_capacity(cfg.hosts);
    for chunk in names.chunks(32) {
        let tokens = futures_util::future::join_all(chunk.iter().map(|n| {
            let (pamd, http) = (&pamd, &http);
            async move {
                post(pamd, http, "/api/v1/tokens", &json!({"worker": n}))
                    .await
                    .map(|v| v["token"].as_str().unwrap_or_default().to_string())
            }
        }))
        .await;
        for (n, tok) in chunk.iter().zip(tokens) {
            hosts.push(Host::new(n.clone(), tok?));
        }
    }
    let shared = Arc::new(Shared {
        http: http.clone(),
        base: pamd.url.clone(),
        cfg: cfg.clone(),
        lat: Default::default(),
        acks: Default::default(),
        stop: Default::default(),
        settled: Default::default(),
    });
    for chunk in hosts.chunks(32) {
        let ok = futures_util::future::join_all(chunk.iter().map(|h| h.register(&shared))).await;
        anyhow::ensure!(ok.iter().all(|ok| *ok), "a host failed to register");
    }
    let setup = t.elapsed();
    let mut rng = Rng(cfg.seed);
    let mut tasks = Vec::new();
    for h in &hosts {
        let hb = Duration::from_secs_f64(rng.unit() * cfg.heartbeat_secs as f64);
        let resync = Duration::from_secs_f64(rng.unit() * cfg.resync_secs as f64);
        tokio::spawn(h.clone().heartbeat_loop(shared.clone(), hb));
        tokio::spawn(h.clone().watch_loop(shared.clone(), resync, rng.next_u64()));
        tasks.push(tokio::spawn(h.clone().ship_loop(shared.clone())));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The idle fleet (every host registered, watching,
    // heartbeating; no run) for `idle_secs`.
    let idle = if cfg.idle_secs > 0 {
        // Settled: every stream open and its first desired set read (at
        // 10,000 hosts that takes far longer than a fixed 7 s, and an idle
        // measure of the start-up was part start-up), then its first
        // claim made.
        let t = Instant::now();
        while shared.settled.load(Ordering::Relaxed) < cfg.hosts
            && t.elapsed() < Duration::from_secs(300)
        {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        eprintln!(
            "bench-fleet: {} of {} hosts watching after {:.1} s more",
            shared.settled.load(Ordering::Relaxed),
            cfg.hosts,
            t.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_secs(5)).await;
        shared.lat.recording.store(true, Ordering::Relaxed);
        let (c0, i0) = (measure::proc_stat(pid), Instant::now());
        tokio::time::sleep(Duration::from_secs(cfg.idle_secs)).await;
        let c1 = measure::proc_stat(pid);
        shared.lat.recording.store(false, Ordering::Relaxed);
        let api = shared.lat.summary();
        shared.lat.clear();
        let idle = json!({
            "secs": i0.elapsed().as_secs_f64(),
            "cpu_cores": (c1.cpu_seconds - c0.cpu_seconds) / i0.elapsed().as_secs_f64(),
            "rss_mb": c1.rss_mb,
            "api": api,
        });
        eprintln!("bench-fleet: idle {idle}");
        idle
    } else {
        Value::Null
    };

    // The window: runs created at a steady rate, hosts crashing now and then.
    shared.lat.recording.store(true, Ordering::Relaxed);
    let metrics0 = measure::loop_durations(&pamd_metrics(&pamd, &http).await?);
    let (cpu0, self0, t0) = (
        measure::proc_stat(pid),
        measure::self_cpu_seconds(),
        Instant::now(),
    );
    let rate = cfg.creation_rate();
    let tick = Duration::from_millis(200);
    let (mut owed, mut created) = (0.0, 0usize);
    let mut next_crash_check = Instant::now();
    while t0.elapsed() < Duration::from_secs(cfg.window_secs) {
        let round = Instant::now();
        owed += rate * tick.as_secs_f64();
        let n = owed.floor() as usize;
        owed -= n as f64;
        if n > 0 {
            let objects: Vec<Value> = (created..created + n).map(run_object).collect();
            let started = Instant::now();
            post(
                &pamd,
                &http,
                "/api/v1/apply",
                &json!({ "objects": objects }),
            )
            .await?;
            shared.lat.record("apply (operator)", started.elapsed());
            created += n;
        }
        if next_crash_check <= Instant::now() {
            next_crash_check += Duration::from_secs(1);
            let p = cfg.crash_rate_per_min / 60.0;
            for h in &hosts {
                if rng.unit() < p {
                    h.crash(Duration::from_secs_f64(cfg.crash_secs));
                }
            }
        }
        tokio::time::sleep(tick.saturating_sub(round.elapsed())).await;
    }
    let window = t0.elapsed();
    let cpu1 = measure::proc_stat(pid);
    let self1 = measure::self_cpu_seconds();

    // Drain: every run ends (restarts included), then the outboxes empty.
    let drain_limit = Duration::from_secs_f64(cfg.run_secs * 3.0 + 60.0);
    let d0 = Instant::now();
    let live = loop {
        let live = live_runs(&pamd).await?;
        if live == 0 || d0.elapsed() > drain_limit {
            break live;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    shared.stop.store(true, Ordering::Relaxed);
    for t in tasks {
        let _ = tokio::time::timeout(Duration::from_secs(30), t).await;
    }
    let metrics1 = measure::loop_durations(&pamd_metrics(&pamd, &http).await?);
    let journal = measure::check_journal(&pamd.database_url, &shared.acks).await?;
    let end = measure::proc_stat(pid);
    Ok(json!({
        "hosts": cfg.hosts,
        "config": {
            "capacity": cfg.capacity, "heartbeat_secs": cfg.heartbeat_secs,
            "resync_secs": cfg.resync_secs, "run_secs": cfg.run_secs,
            "progress_secs": cfg.progress_secs, "utilization": cfg.utilization,
            "fail_rate": cfg.fail_rate, "crash_rate_per_min": cfg.crash_rate_per_min,
            "window_secs": cfg.window_secs, "steady": cfg.steady,
        },
        "setup_secs": setup.as_secs_f64(),
        "idle": idle,
        "runs_created": created,
        "creation_rate": rate,
        "runs_live_after_drain": live,
        "pamd": {
            "cpu_seconds_window": cpu1.cpu_seconds - cpu0.cpu_seconds,
            "cpu_cores_window": (cpu1.cpu_seconds - cpu0.cpu_seconds) / window.as_secs_f64(),
            "rss_mb": end.rss_mb,
            "peak_rss_mb": end.peak_rss_mb,
        },
        "simulator_cpu_cores_window": (self1 - self0) / window.as_secs_f64(),
        "api": shared.lat.summary(),
        "api_errors": shared.lat.errors(),
        "loops": measure::loop_means(&metrics0, &metrics1),
        "signals_sent": shared.acks.signals_sent.load(Ordering::Relaxed),
        "journal": journal,
    }))
}

async fn pamd_metrics(pamd: &Pamd, http: &reqwest::Client) -> anyhow::Result<String> {
    Ok(http
        .get(format!("{}/metrics", pamd.url))
        .bearer_auth(&pamd.token)
        .send()
        .await?
        .text()
        .await?)
}

/// Runs not yet ended for good: pending, spawning, running, or failed with
/// a restart to come.
async fn live_runs(pamd: &Pamd) -> anyhow::Result<i64> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(&pamd.database_url)
        .await?;
    let (n,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM runs WHERE status IN ('pending','spawning','running') \
         OR (status = 'failed' AND requeue_at IS NOT NULL)",
    )
    .fetch_one(&pool)
    .await?;
    pool.close().await;
    Ok(n)
}
