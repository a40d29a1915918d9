//! SSE fan-out benchmark (docs/benchmarks.md, "SSE"): a real pamd (build
//! it with `--release`), N subscribers on `GET /api/v1/events/stream`, and a
//! generator journaling events at a fixed rate through `POST
//! /api/v1/apply` (each apply creates a few tasks: one `work_item.created`
//! each). Prints p50/p99 latency and lost/duplicated counts, for a 1-
//! subscriber baseline and the full run, and their ratio.
//!
//! Latency is measured from the moment the generator *sends* the apply
//! that creates a task (its name carries that instant) to the moment a
//! subscriber reads the event, so it includes the apply's own time in
//! pamd; the generator's request round-trip is printed next to it.
//!
//! Usage: `bench-sse [SUBSCRIBERS] [EVENTS_PER_SEC] [SECONDS]`
//! (defaults 1000 1000 10).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pam_tests::Pamd;
use serde_json::json;

/// Tasks per apply; the generator runs `GENERATORS` appliers in parallel.
const BATCH: usize = 10;
const GENERATORS: usize = 4;

struct Stats {
    latencies_us: Vec<u32>,
    received: u64,
    duplicated: u64,
}

struct Report {
    subscribers: usize,
    sent: u64,
    seconds: f64,
    p50_ms: f64,
    p99_ms: f64,
    max_ms: f64,
    lost: u64,
    duplicated: u64,
    apply_p50_ms: f64,
    apply_p99_ms: f64,
}

fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let subscribers = arg(1, 1000) as usize;
    let rate = arg(2, 1000);
    let seconds = arg(3, 10);

    let pamd = Pamd::start(Default::default()).await?;
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    apply(
        &http,
        &pamd,
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: bench}\nspec: {displayName: Bench}\n"
            .to_string(),
    )
    .await?;
    let epoch = Instant::now();

    println!("SSE fan-out: pamd {}, {rate} events/s", pamd.url);
    let base = run(&http, &pamd, epoch, 1, rate, seconds.min(5), "a").await?;
    let full = run(&http, &pamd, epoch, subscribers, rate, seconds, "b").await?;
    for r in [&base, &full] {
        println!(
            "{:>5} subscribers: {} events in {:.1}s ({:.0}/s); publish→receive p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; lost {}, duplicated {}; apply round-trip p50 {:.1} ms, p99 {:.1} ms",
            r.subscribers,
            r.sent,
            r.seconds,
            r.sent as f64 / r.seconds,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.lost,
            r.duplicated,
            r.apply_p50_ms,
            r.apply_p99_ms,
        );
    }
    println!(
        "ratio {} vs 1 subscriber: p50 ×{:.2}, p99 ×{:.2}",
        full.subscribers,
        full.p50_ms / base.p50_ms,
        full.p99_ms / base.p99_ms
    );
    let verdict = if full.p99_ms <= 50.0 && full.lost == 0 && full.duplicated == 0 {
        "met"
    } else {
        "MISSED"
    };
    println!("target (p99 <= 50 ms, 0 lost, 0 duplicated): {verdict}");
    Ok(())
}

async fn apply(http: &reqwest::Client, pamd: &Pamd, yaml: String) -> anyhow::Result<()> {
    let r = http
        .post(format!("{}/api/v1/apply", pamd.url))
        .bearer_auth(&pamd.token)
        .json(&json!({"files": [{"name": "bench.yaml", "content": yaml}]}))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "apply: {}", r.text().await?);
    Ok(())
}

/// One phase: `subs` subscribers, `rate` events/s for `seconds`.
async fn run(
    http: &reqwest::Client,
    pamd: &Pamd,
    epoch: Instant,
    subs: usize,
    rate: u64,
    seconds: u64,
    tag: &'static str,
) -> anyhow::Result<Report> {
    // Subscribers: live streams of this phase's task creations.
    let expected = Arc::new(AtomicU64::new(u64::MAX));
    let mut handles = Vec::new();
    let mut opened = Vec::new();
    for _ in 0..subs {
        let client = reqwest::Client::builder().build()?;
        let resp = client
            .get(format!(
                "{}/api/v1/events/stream?topic=work_item.created",
                pamd.url
            ))
            .bearer_auth(&pamd.token)
            .send()
            .await?;
        anyhow::ensure!(resp.status().is_success(), "stream: {}", resp.status());
        opened.push((client, resp));
    }
    for (client, resp) in opened {
        let expected = expected.clone();
        handles.push(tokio::spawn(subscribe(client, resp, epoch, tag, expected)));
    }

    // Generators: GENERATORS appliers, each at rate/GENERATORS events/s.
    let per_gen = rate as f64 / GENERATORS as f64;
    let period = Duration::from_secs_f64(BATCH as f64 / per_gen);
    let batches = (seconds as f64 * per_gen / BATCH as f64).round() as u64;
    let started = Instant::now();
    let mut gens = Vec::new();
    for g in 0..GENERATORS {
        let http = http.clone();
        let url = format!("{}/api/v1/apply", pamd.url);
        let token = pamd.token.clone();
        gens.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut round_trips = Vec::new();
            for b in 0..batches {
                tick.tick().await;
                let t0 = epoch.elapsed().as_micros();
                let mut yaml = String::new();
                for k in 0..BATCH {
                    yaml.push_str(&format!(
                        "---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {tag}{t0}-{g}-{b}-{k}, project: bench}}\nspec: {{title: x}}\n"
                    ));
                }
                let sent = Instant::now();
                let r = http
                    .post(&url)
                    .bearer_auth(&token)
                    .json(&json!({"files": [{"name": "b.yaml", "content": yaml}]}))
                    .send()
                    .await
                    .expect("apply");
                assert!(r.status().is_success(), "apply failed: {}", r.status());
                round_trips.push(sent.elapsed().as_micros() as u32);
            }
            round_trips
        }));
    }
    let mut round_trips = Vec::new();
    for g in gens {
        round_trips.extend(g.await?);
    }
    let took = started.elapsed().as_secs_f64();
    let sent = round_trips.len() as u64 * BATCH as u64;
    expected.store(sent, Ordering::SeqCst);

    let mut all = Vec::new();
    let (mut received, mut duplicated) = (0u64, 0u64);
    for h in handles {
        let s = h.await?;
        received += s.received;
        duplicated += s.duplicated;
        all.extend(s.latencies_us);
    }
    all.sort_unstable();
    round_trips.sort_unstable();
    let want = sent * subs as u64;
    Ok(Report {
        subscribers: subs,
        sent,
        seconds: took,
        p50_ms: pct(&all, 0.5),
        p99_ms: pct(&all, 0.99),
        max_ms: all.last().map_or(f64::NAN, |m| f64::from(*m) / 1000.0),
        lost: want.saturating_sub(received),
        duplicated,
        apply_p50_ms: pct(&round_trips, 0.5),
        apply_p99_ms: pct(&round_trips, 0.99),
    })
}

/// Reads one stream until it has `expected` events of this phase (or 10 s
/// of silence after the generators finished).
async fn subscribe(
    _client: reqwest::Client,
    mut resp: reqwest::Response,
    epoch: Instant,
    tag: &'static str,
    expected: Arc<AtomicU64>,
) -> Stats {
    let mut s = Stats {
        latencies_us: Vec::new(),
        received: 0,
        duplicated: 0,
    };
    let mut buf = Vec::<u8>::new();
    let mut last_seq = 0i64;
    let needle = format!("\"name\":\"{tag}");
    loop {
        if s.received + s.duplicated >= expected.load(Ordering::SeqCst) {
            return s;
        }
        let chunk = match tokio::time::timeout(Duration::from_secs(10), resp.chunk()).await {
            Ok(Ok(Some(c))) => c,
            // Ended, or failed.
            Ok(_) => return s,
            // Silent for 10 s after the generators finished: the rest is lost.
            Err(_) if expected.load(Ordering::SeqCst) != u64::MAX => return s,
            Err(_) => continue,
        };
        let now = epoch.elapsed().as_micros() as i64;
        buf.extend_from_slice(&chunk);
        // Whole frames only; cheap scanning rather than JSON parsing, so
        // the client's own cost stays small.
        let mut consumed = 0;
        while let Some(end) = find(&buf[consumed..], b"\n\n") {
            let frame = std::str::from_utf8(&buf[consumed..consumed + end]).unwrap_or("");
            consumed += end + 2;
            let Some(id) = frame
                .strip_prefix("id: ")
                .and_then(|r| r.split('\n').next())
                .and_then(|v| v.parse::<i64>().ok())
            else {
                continue;
            };
            let Some(at) = frame.find(&needle) else {
                continue;
            };
            if id <= last_seq {
                s.duplicated += 1;
                continue;
            }
            last_seq = id;
            s.received += 1;
            let digits: String = frame[at + needle.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(t0) = digits.parse::<i64>() {
                s.latencies_us.push((now - t0).max(0) as u32);
            }
        }
        buf.drain(..consumed);
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
