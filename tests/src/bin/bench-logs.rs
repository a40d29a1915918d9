//! bench-logs: a finished run's 50 MB log read through pamd after a pamd
//! restart (nothing cached): time to first byte (target ≤ 300 ms), the
//! whole log's throughput (target ≥ 50 MB/s), and pamd's peak resident
//! set while serving it against `[logs] cache_bytes` (target: within the
//! budget plus 32 MB over pamd's resident set before the read). Printed,
//! not asserted.
//!
//! One real pamd (16 MiB cache budget), one real pam-worker, the fake
//! provider printing `--mb` MB (default 50) of plain lines. The log is
//! read over HTTP (`GET …/runs/{name}/log`) twice — cold (every chunk from
//! the worker) and again (what the cache holds from pamd's memory) — and
//! once with `pamctl logs` into /dev/null. The baseline, measured in the
//! same run: reading the worker's file straight from disk.
//!
//! Needs the workspace binaries of the same profile:
//! `cargo build --release --workspace --bins &&
//!  cargo run --release -p pam-tests --bin bench-logs`.

use std::time::{Duration, Instant};

use pam_tests::bench::{record, Figure};
use pam_tests::worker::{apply, fake, project_yaml, run_yaml, wait_online, wait_phase, Worker};
use pam_tests::{eventually, Pamd, PamdOptions};

const CACHE: u64 = 16 << 20;
const TTFB_TARGET_MS: f64 = 300.0;
const THROUGHPUT_TARGET: f64 = 50.0;
/// What pamd may hold beyond the cache budget while serving (MB).
const RSS_SLACK_MB: f64 = 32.0;

/// A field of /proc/PID/status in MB (`VmRSS`, `VmHWM`).
fn proc_mb(pid: u32, field: &str) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Reads the log over HTTP: (time to first byte, total time, bytes).
async fn read(pamd: &Pamd, url: &str) -> anyhow::Result<(Duration, Duration, usize)> {
    let t = Instant::now();
    let mut r = pamd.http().get(url).bearer_auth(&pamd.token).send().await?;
    anyhow::ensure!(r.status().is_success(), "GET log: {}", r.status());
    let mut first = None;
    let mut n = 0;
    while let Some(c) = r.chunk().await? {
        first.get_or_insert_with(|| t.elapsed());
        n += c.len();
    }
    Ok((first.unwrap_or_default(), t.elapsed(), n))
}

fn mbps(bytes: usize, d: Duration) -> f64 {
    bytes as f64 / 1e6 / d.as_secs_f64()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mb: u64 = std::env::args()
        .skip_while(|a| a != "--mb")
        .nth(1)
        .map_or(Ok(50), |v| v.parse())?;
    let mut pamd = Pamd::start(PamdOptions {
        config_toml: format!("[logs]\ncache_bytes = {CACHE}\n"),
        ..PamdOptions::default()
    })
    .await?;
    let worker = Worker::start(&pamd, "h1").await?;
    wait_online(&pamd, "h1").await;
    apply(&pamd, &project_yaml());
    let bytes = mb * 1_000_000;
    let cmd = fake(&["--lines", "0", "--filler-bytes", &bytes.to_string()]);
    apply(&pamd, &run_yaml("big", worker.tmp(), &cmd, ""));
    let r = wait_phase(&pamd, "big", "exited", Duration::from_secs(300)).await;
    let id = r["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let file = worker.run_log(&id, 1);

    // Baseline: the file straight from disk (page cache warm, as the
    // worker reads it).
    let _ = std::fs::read(&file)?;
    let t = Instant::now();
    let disk = std::fs::read(&file)?;
    let disk_time = t.elapsed();
    let t = Instant::now();
    {
        use std::io::Read;
        let mut f = std::fs::File::open(&file)?;
        let mut buf = vec![0; 1 << 20];
        f.read_exact(&mut buf)?;
    }
    let disk_first = t.elapsed();
    let size = disk.len();
    drop(disk);

    pamd.restart().await?;
    let url = format!("{}/api/v1/projects/e2e/runs/big/log", pamd.url);
    // The worker's watch is back (a headers-only read answers).
    eventually(Duration::from_secs(60), "the worker's watch", || async {
        let r = pamd
            .http()
            .get(format!("{url}?limit=0"))
            .bearer_auth(&pamd.token)
            .send()
            .await
            .ok()?;
        r.status().is_success().then_some(())
    })
    .await;
    let pid = pamd.pid().expect("pamd runs");
    let idle = proc_mb(pid, "VmRSS");
    let (first, total, n) = read(&pamd, &url).await?;
    anyhow::ensure!(n == size, "read {n} of {size} bytes");
    let cold_peak = proc_mb(pid, "VmHWM");
    let (first2, total2, n2) = read(&pamd, &url).await?;
    anyhow::ensure!(n2 == size, "read {n2} of {size} bytes again");
    let t = Instant::now();
    let out = pamd
        .isolated(&pam_tests::bin("pamctl"), Some(&pamd.token))
        .args(["-p", "e2e", "logs", "big"])
        .stdout(std::process::Stdio::null())
        .status()?;
    anyhow::ensure!(out.success(), "pamctl logs failed");
    let pamctl_time = t.elapsed();
    let peak = proc_mb(pid, "VmHWM");

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let budget_mb = CACHE as f64 / (1 << 20) as f64;
    println!(
        "bench-logs: a {:.1} MB log, pamd restarted, cache budget {budget_mb} MiB",
        size as f64 / 1e6
    );
    println!(
        "  baseline (disk): first MiB {:.2} ms, whole {:.0} MB/s",
        ms(disk_first),
        mbps(size, disk_time)
    );
    let v = record(Figure {
        name: "bench-logs time to first byte (cold)",
        value: ms(first),
        unit: "ms",
        baseline: Some(ms(disk_first)),
        target: "<= 300 ms",
        pass: ms(first) <= TTFB_TARGET_MS,
    });
    println!(
        "  time to first byte, cold: {:.1} ms (target <= {TTFB_TARGET_MS} ms) {v}",
        ms(first)
    );
    let cold = mbps(size, total);
    let v = record(Figure {
        name: "bench-logs whole-log throughput (cold)",
        value: cold,
        unit: "MB/s",
        baseline: Some(mbps(size, disk_time)),
        target: ">= 50 MB/s",
        pass: cold >= THROUGHPUT_TARGET,
    });
    println!(
        "  whole log, cold: {:.2} s, {cold:.0} MB/s (target >= {THROUGHPUT_TARGET}), {:.3}x disk {v}",
        total.as_secs_f64(),
        cold / mbps(size, disk_time)
    );
    println!(
        "  again (cache of {budget_mb} MiB): first byte {:.1} ms, {:.0} MB/s",
        ms(first2),
        mbps(size, total2)
    );
    println!(
        "  pamctl logs > /dev/null: {:.2} s, {:.0} MB/s",
        pamctl_time.as_secs_f64(),
        mbps(size, pamctl_time)
    );
    let grew = peak - idle;
    let v = record(Figure {
        name: "bench-logs pamd peak RSS over idle",
        value: grew,
        unit: "MB",
        baseline: Some(budget_mb),
        target: "<= cache budget + 32 MB",
        pass: grew <= budget_mb + RSS_SLACK_MB,
    });
    println!(
        "  pamd RSS: idle {idle:.1} MB, peak {peak:.1} MB after the cold read {cold_peak:.1} MB; grew {grew:.1} MB vs budget {budget_mb} MiB (target <= budget + {RSS_SLACK_MB} MB) {v}"
    );
    Ok(())
}
