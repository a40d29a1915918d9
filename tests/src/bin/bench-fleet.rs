//! bench-fleet: pamd under a simulated fleet.
//!
//! `bench-fleet [--hosts 10,100,1000] [--compress K] [--window SECS] [--resync SECS]
//! [--json PATH]` runs the fleet simulator ([`pam_tests::fleet`]) once per
//! fleet size against a fresh pamd, prints one table, and writes the full
//! reports as JSON. `--compress K` runs K times faster than real time
//! (heartbeats every 30/K s, runs of 60/K s on average): each host is K
//! times as busy, so a compressed 1,000-host run loads pamd like a real
//! 1,000·K-host fleet would.
//!
//! Targets at 1,000 hosts (real time): no lost or duplicated signal,
//! heartbeat p99 ≤ 100 ms, dispatch p99 ≤ 1 s, pamd RSS ≤ 200 MB.
//!
//! Watching hosts (`--hosts 1000,10000 --idle SECS`): the same
//! targets at 10,000 hosts with RSS ≤ 300 MB and mean CPU ≤ 0.5 core, and
//! the idle fleet (no runs, measured for `--idle` seconds before the
//! window) ≤ 0.05 core at 10,000 hosts. RSS is printed idle and at its
//! peak (the start-up, every host opening its watch at once). The
//! open-files limit is raised to its hard limit first (each host holds a watch and pooled connections;
//! pamd, started after, inherits it). `--steady` spreads each host's first
//! resync over its first `resync_secs` (by default it falls in the
//! second): the idle window then counts the steady state's resync reads
//! (33 a second at 10,000 hosts), which a fleet that has just started
//! does not make yet.
//!
//! `cargo build --release --workspace --bins &&
//!  ./target/release/bench-fleet --hosts 10,100,1000`

use pam_tests::bench::{record, Figure};
use pam_tests::fleet::{simulate, FleetConfig};
use serde_json::Value;

pam_tests::pamd_allocator!();

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Raises this process's open-files soft limit to its hard limit.
fn raise_open_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                eprintln!("bench-fleet: cannot raise the open-files limit: {e}");
            }
            eprintln!("bench-fleet: open-files limit {soft} → {hard}");
        }
        Ok((soft, _)) => eprintln!("bench-fleet: open-files limit {soft}"),
        Err(e) => eprintln!("bench-fleet: cannot read the open-files limit: {e}"),
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes: Vec<usize> = arg("--hosts")
        .unwrap_or_else(|| "10,100,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let compress: f64 = arg("--compress")
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let window: Option<u64> = arg("--window").and_then(|s| s.parse().ok());
    let idle: u64 = arg("--idle").and_then(|s| s.parse().ok()).unwrap_or(0);
    raise_open_files();
    let mut reports = Vec::new();
    for hosts in sizes {
        let mut cfg = if compress > 1.0 {
            FleetConfig::compressed(hosts, compress)
        } else {
            FleetConfig::real(hosts)
        };
        if let Some(w) = window {
            cfg.window_secs = w;
        }
        cfg.idle_secs = idle;
        cfg.steady = std::env::args().any(|a| a == "--steady");
        // The worker's resync before 2026-12-05 (60), to compare.
        if let Some(r) = arg("--resync").and_then(|s| s.parse().ok()) {
            cfg.resync_secs = r;
        }
        eprintln!("bench-fleet: {hosts} hosts, {cfg:?}");
        let r = simulate(cfg).await?;
        eprintln!("{}", serde_json::to_string_pretty(&r)?);
        reports.push(r);
    }
    println!(
        "bench-fleet (compress {compress}×): hosts | runs | idle cores | pamd cores | idle / peak RSS MB | heartbeat p50/p99 ms | signals p99 ms | desired p99 ms | dispatch p50/p99 ms | pass ms | lost | dup"
    );
    for r in &reports {
        let api = &r["api"];
        let loops = &r["loops"];
        let pass: f64 = loops
            .as_object()
            .map(|o| o.values().map(|l| f(&l["mean_ms"])).sum())
            .unwrap_or(0.0);
        let j = &r["journal"];
        println!(
            "{:>6} | {:>6} | {:>5.3} | {:>5.2} | {:>6.1} / {:>6.1} | {:>6.1} / {:>6.1} | {:>6.1} | {:>6.1} | {:>7.1} / {:>7.1} | {:>6.2} | {} | {}",
            r["hosts"],
            r["runs_created"],
            f(&r["idle"]["cpu_cores"]),
            f(&r["pamd"]["cpu_cores_window"]),
            f(&r["idle"]["rss_mb"]),
            f(&r["pamd"]["peak_rss_mb"]),
            f(&api["heartbeat"]["p50_ms"]),
            f(&api["heartbeat"]["p99_ms"]),
            f(&api["signals"]["p99_ms"]),
            f(&api["desired"]["p99_ms"]),
            f(&j["dispatch_latency"]["p50_ms"]),
            f(&j["dispatch_latency"]["p99_ms"]),
            pass,
            j["lost_signals"],
            j["duplicated_events"].as_u64().unwrap_or(0) + j["replays_applied"].as_u64().unwrap_or(0),
        );
    }
    for r in &reports {
        let hosts = r["hosts"].as_u64().unwrap_or(0);
        if hosts < 1000 || compress > 1.0 {
            continue;
        }
        let j = &r["journal"];
        let bad = j["lost_signals"].as_u64().unwrap_or(1)
            + j["duplicated_events"].as_u64().unwrap_or(1)
            + j["replays_applied"].as_u64().unwrap_or(1);
        let (rss_target, rss_bound) = if hosts >= 10_000 {
            (300.0, "<= 300 MB")
        } else {
            (200.0, "<= 200 MB")
        };
        let idle = &r["idle"]["cpu_cores"];
        let figures = [
            ("lost or duplicated signals", bad as f64, "", "0", bad == 0),
            (
                "heartbeat p99",
                f(&r["api"]["heartbeat"]["p99_ms"]),
                "ms",
                "<= 100 ms",
                f(&r["api"]["heartbeat"]["p99_ms"]) <= 100.0,
            ),
            (
                "dispatch p99",
                f(&j["dispatch_latency"]["p99_ms"]),
                "ms",
                "<= 1000 ms",
                f(&j["dispatch_latency"]["p99_ms"]) <= 1000.0,
            ),
            (
                "pamd peak RSS",
                f(&r["pamd"]["peak_rss_mb"]),
                "MB",
                rss_bound,
                f(&r["pamd"]["peak_rss_mb"]) <= rss_target,
            ),
            // The steady state beside the peak (the peak is the start-up,
            // every host opening its watch at once): the same bound.
            (
                "pamd idle RSS",
                f(&r["idle"]["rss_mb"]),
                "MB",
                rss_bound,
                r["idle"]["rss_mb"].is_number() && f(&r["idle"]["rss_mb"]) <= rss_target,
            ),
            (
                "pamd mean CPU",
                f(&r["pamd"]["cpu_cores_window"]),
                "cores",
                "<= 0.5 core",
                f(&r["pamd"]["cpu_cores_window"]) <= 0.5,
            ),
            (
                "pamd idle CPU",
                f(idle),
                "cores",
                if hosts >= 10_000 {
                    "<= 0.05 core"
                } else {
                    "(no target)"
                },
                hosts < 10_000 || (idle.is_number() && f(idle) <= 0.05),
            ),
        ];
        for (what, value, unit, target, pass) in figures {
            record(Figure {
                name: &format!("bench-fleet {hosts} hosts {what}"),
                value,
                unit,
                baseline: None,
                target,
                pass,
            });
        }
    }
    if let Some(path) = arg("--json") {
        std::fs::write(&path, serde_json::to_string_pretty(&reports)?)?;
        eprintln!("bench-fleet: reports written to {path}");
    }
    Ok(())
}
