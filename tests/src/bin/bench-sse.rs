//! SSE fan-out benchmark (docs/benchmarks.md, "SSE"): a real pamd (build
//! it with `--release`), N subscribers on `GET /api/v1/events/stream`, and a
//! generator journaling events at a fixed rate through `POST
//! /api/v1/apply` (each apply creates a few tasks: one `work_item.created`
//! each). Prints p50/p99 latency and lost/duplicated counts, for a 1-
//! subscriber baseline and the full run, and their ratio.
//!
//! Latency is publish→receive: pamd runs with its event bus logging at
//! trace level, one `published first_seq=… last_seq=… unix_us=…` line per
//! commit (the instant it hands the commit's events to the streams); a
//! subscriber notes the instant it read each event's frame; both clocks are
//! this machine's wall clock. Two brackets are printed next to it as a
//! cross-check: *upper* = read instant − the instant the generator sent the
//! apply (its task names carry it; includes the apply's own work in pamd),
//! *lower* = read instant − the instant the apply's answer came back
//! (publish happens before pamd answers; clamped at 0). The 1-subscriber
//! baseline, run first in the same process, gives the ratio: the cost of
//! fan-out.
//!
//! The generators run on a thread and runtime of their own (so an answer
//! is noted when it arrives, not after the subscriber tasks), staggered so
//! applies arrive at a steady pace. Subscribers read the raw chunked body
//! from a plain TCP connection and find frames, `id:` and the task name by
//! byte search (no HTTP client, no UTF-8 check, no JSON parse), so the
//! 1,000 readers' own CPU cost stays small; they still count every event
//! and note each seq seen in a bitset (a stream follows the journal's
//! order, by transaction then seq, not seq order), so
//! lost/duplicated counts are exact. They share
//! one thread (a current-thread runtime): on a 2-core machine that also
//! runs pamd and PostgreSQL, two client threads only took CPU from pamd
//! (p99 32–58 ms with two, 34–37 ms with one).
//!
//! Across replicas (`REPLICAS` = 2): two pamd on one database,
//! the generator applying through the first, every subscriber on the
//! second; publish→receive is then from the first replica's publish (its
//! commit) to the read on the second's stream — the NOTIFY, the second
//! replica's journal read and its fan-out included. Target: p99 ≤ 100 ms
//! at 1,000 subscribers.
//!
//! Mixed roles (`PAM_BENCH_ROLES=mixed`): more phases with the
//! same subscribers, a third of them on the admin token, a third on a
//! viewer token and a third on an operator token scoped to the phase's
//! projects (every one the generators make), so every stream is filtered
//! event by event and still receives every event. Per round (
//! `PAM_BENCH_ROUNDS`, default 1, at most 4) two mixed phases and one more
//! admin-only phase follow the admin-only one above — A M M A — so a drift
//! over the run weighs on both kinds alike; the ratio of the mixed phases'
//! pooled p99 to the admin-only phases' is authorization's cost on the
//! stream (target ≤ 1.05).
//!
//! Usage: `bench-sse [SUBSCRIBERS] [EVENTS_PER_SEC] [SECONDS] [TASKS_PER_APPLY] [REPLICAS]`
//! (defaults 1000 1000 10 20 1).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use memchr::memmem;
use pam_tests::{Pamd, PamdOptions};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Tasks per apply by default; the generator runs `GENERATORS` appliers in
/// parallel.
const BATCH: u64 = 20;
const GENERATORS: usize = 8;

struct Stats {
    /// (batch index, read instant µs, upper-bound latency µs, seq).
    reads: Vec<(u32, u64, u32, u32)>,
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
    exact_p50_ms: f64,
    exact_p99_ms: f64,
    exact_max_ms: f64,
    /// Reads whose event had no publish line in pamd's log.
    unmatched: usize,
    low_p50_ms: f64,
    low_p99_ms: f64,
    lost: u64,
    duplicated: u64,
    apply_p50_ms: f64,
    apply_p99_ms: f64,
    /// Across replicas: first replica's publish → second's (NaN on one).
    hop_p50_ms: f64,
    hop_p99_ms: f64,
    /// Every publish→receive latency (µs), sorted: phases of one kind are
    /// pooled for the mixed-roles comparison.
    exact: Vec<u32>,
}

fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    f64::from(sorted[i]) / 1000.0
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: u64| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    let subscribers = arg(1, 1000) as usize;
    let rate = arg(2, 1000);
    let seconds = arg(3, 10);
    let batch = arg(4, BATCH).max(1) as usize;
    let replicas = arg(5, 1).clamp(1, 2);

    let database_url = pam_testkit::testdb::fresh_database_url().await?;
    let start = || {
        Pamd::start(PamdOptions {
            // Measures pamd, not its rate limits.
            config_toml: "[rate_limits]\nenabled = false\n".into(),
            log_filter: Some("info,pam_controller::events=trace".into()),
            database_url: Some(database_url.clone()),
            ..PamdOptions::default()
        })
    };
    let pamd = start().await?;
    // Subscribers on the second replica when there are two.
    let second = if replicas == 2 {
        Some(start().await?)
    } else {
        None
    };
    let subscribe_to = second.as_ref().unwrap_or(&pamd);
    let epoch = Instant::now();
    let epoch_unix = unix_us();

    println!(
        "SSE fan-out: pamd {} (applies) → {} (streams), {rate} events/s, {batch} tasks per apply",
        pamd.url, subscribe_to.url
    );
    let b = Bench {
        pamd: &pamd,
        streams: subscribe_to,
        epoch,
        epoch_unix,
        rate,
        batch,
    };
    let admin = vec![pamd.token.clone()];
    let base = run(&b, phase(1, seconds.min(5), "a", &admin)).await?;
    let full = run(&b, phase(subscribers, seconds, "b", &admin)).await?;
    // Mixed roles: admin-only and mixed phases in the order
    // A M M A per round (the admin-only phase above is the first A), so a
    // drift over the run (a growing database, a neighbour's build) weighs
    // on both alike; each kind's latencies are pooled.
    let mut mixed = Vec::new();
    let mut admin_only = Vec::new();
    if std::env::var("PAM_BENCH_ROLES").as_deref() == Ok("mixed") {
        let rounds = std::env::var("PAM_BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse::<usize>().ok())
            .unwrap_or(1)
            .clamp(1, 4);
        const TAGS: [&str; 12] = ["c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n"];
        for round in 0..rounds {
            let tags = &TAGS[round * 3..round * 3 + 3];
            for tag in &tags[..2] {
                let tokens = scoped_tokens(&pamd, tag, rate, seconds, batch).await?;
                mixed.push(run(&b, phase(subscribers, seconds, tag, &tokens)).await?);
            }
            admin_only.push(run(&b, phase(subscribers, seconds, tags[2], &admin)).await?);
        }
    }
    for r in [&base, &full]
        .into_iter()
        .chain(mixed.iter())
        .chain(admin_only.iter())
    {
        println!(
            "{:>5} subscribers: {} events in {:.1}s ({:.0}/s); publish→receive p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} reads without a publish line); upper bound (from send) p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; lower bound (from answer) p50 {:.1} ms, p99 {:.1} ms; lost {}, duplicated {}; apply round-trip p50 {:.1} ms, p99 {:.1} ms",
            r.subscribers,
            r.sent,
            r.seconds,
            r.sent as f64 / r.seconds,
            r.exact_p50_ms,
            r.exact_p99_ms,
            r.exact_max_ms,
            r.unmatched,
            r.p50_ms,
            r.p99_ms,
            r.max_ms,
            r.low_p50_ms,
            r.low_p99_ms,
            r.lost,
            r.duplicated,
            r.apply_p50_ms,
            r.apply_p99_ms,
        );
        if second.is_some() {
            println!(
                "       publish on the first replica → publish on the second p50 {:.1} ms, p99 {:.1} ms",
                r.hop_p50_ms, r.hop_p99_ms
            );
        }
    }
    let ratio = |full: f64, base: f64| {
        if base > 0.0 {
            format!("×{:.2}", full / base)
        } else {
            "n/a (baseline 0)".to_string()
        }
    };
    println!(
        "ratio {} vs 1 subscriber: publish→receive p50 {}, p99 {}; upper p50 {}, p99 {}; lower p50 {}, p99 {}",
        full.subscribers,
        ratio(full.exact_p50_ms, base.exact_p50_ms),
        ratio(full.exact_p99_ms, base.exact_p99_ms),
        ratio(full.p50_ms, base.p50_ms),
        ratio(full.p99_ms, base.p99_ms),
        ratio(full.low_p50_ms, base.low_p50_ms),
        ratio(full.low_p99_ms, base.low_p99_ms)
    );
    if !mixed.is_empty() {
        let (m50, m99) = pooled(mixed.iter());
        let (a50, a99) = pooled(std::iter::once(&full).chain(admin_only.iter()));
        let clean = mixed.iter().all(|m| m.lost == 0 && m.duplicated == 0);
        let verdict = pam_tests::bench::record(pam_tests::bench::Figure {
            name: &format!(
                "bench-sse {} subscribers with mixed roles publish->receive p99",
                subscribers
            ),
            value: m99,
            unit: "ms",
            baseline: Some(a99),
            target: "<= 1.05x the admin-only phases, 0 lost, 0 duplicated",
            pass: clean && m99 <= a99 * 1.05,
        });
        println!(
            "mixed roles ({} phases) vs admin only ({} phases), pooled: publish→receive p50 {m50:.1} vs {a50:.1} ms ({}), p99 {m99:.1} vs {a99:.1} ms ({}) (target p99 ≤ ×1.05): {verdict}",
            mixed.len(),
            admin_only.len() + 1,
            ratio(m50, a50),
            ratio(m99, a99),
        );
    }
    let clean = full.lost == 0 && full.duplicated == 0 && full.unmatched == 0;
    let limit = if second.is_some() { 100.0 } else { 50.0 };
    let verdict = pam_tests::bench::record(pam_tests::bench::Figure {
        name: &format!(
            "bench-sse {} subscribers{} publish->receive p99",
            full.subscribers,
            if second.is_some() {
                " across replicas"
            } else {
                ""
            }
        ),
        value: full.exact_p99_ms,
        unit: "ms",
        baseline: Some(base.exact_p99_ms),
        target: &format!("<= {limit} ms, 0 lost, 0 duplicated"),
        pass: clean && full.exact_p99_ms <= limit,
    });
    println!("target (p99 <= {limit} ms, 0 lost, 0 duplicated): {verdict}");
    Ok(())
}

/// p50 and p99 (ms) of the reports' publish→receive latencies together.
fn pooled<'a>(reports: impl Iterator<Item = &'a Report>) -> (f64, f64) {
    let mut all: Vec<u32> = reports.flat_map(|r| r.exact.iter().copied()).collect();
    all.sort_unstable();
    (pct(&all, 0.5), pct(&all, 0.99))
}

/// Each generator's period between applies, and how many batches each
/// sends.
fn pacing(rate: u64, seconds: u64, batch: usize) -> (Duration, u64) {
    let per_gen = rate as f64 / GENERATORS as f64;
    let period = Duration::from_secs_f64(batch as f64 / per_gen);
    let batches = (seconds as f64 * per_gen / batch as f64).round() as u64;
    (period, batches)
}

/// The admin token, a viewer's and an operator's, the last two scoped to
/// every project the generators make in phase `tag`.
async fn scoped_tokens(
    pamd: &Pamd,
    tag: &str,
    rate: u64,
    seconds: u64,
    batch: usize,
) -> anyhow::Result<Vec<String>> {
    let (_, batches) = pacing(rate, seconds, batch);
    let projects: Vec<String> = (0..GENERATORS)
        .flat_map(|g| (0..batches).map(move |b| format!("{tag}{g}-{b}")))
        .collect();
    let mut tokens = vec![pamd.token.clone()];
    for role in ["viewer", "operator"] {
        let (status, body) = pamd
            .post(
                "/api/v1/tokens",
                json!({"name": format!("bench-{role}-{tag}"), "role": role, "projects": projects}),
            )
            .await;
        anyhow::ensure!(status == 201, "token {role}: {status} {body}");
        let token = body["token"].as_str().unwrap_or_default().to_string();
        tokens.push(token);
    }
    Ok(tokens)
}

/// Where a phase runs: applies through `pamd`, streams on `streams`, both
/// clocks' common origin.
struct Bench<'a> {
    pamd: &'a Pamd,
    streams: &'a Pamd,
    epoch: Instant,
    epoch_unix: u64,
    rate: u64,
    batch: usize,
}

/// One phase: `subs` subscribers on `tokens` in turn, `seconds` of applies
/// whose projects and tasks are named after `tag`.
struct Phase<'a> {
    subs: usize,
    seconds: u64,
    tag: &'static str,
    tokens: &'a [String],
}

fn phase<'a>(subs: usize, seconds: u64, tag: &'static str, tokens: &'a [String]) -> Phase<'a> {
    Phase {
        subs,
        seconds,
        tag,
        tokens,
    }
}

/// Runs one phase: `ph.subs` subscribers (on `b.streams`), `b.rate`
/// events/s for `ph.seconds` (applied through `b.pamd`).
async fn run(b: &Bench<'_>, ph: Phase<'_>) -> anyhow::Result<Report> {
    let (pamd, streams, epoch, epoch_unix) = (b.pamd, b.streams, b.epoch, b.epoch_unix);
    let (subs, rate, seconds, batch, tag, tokens) =
        (ph.subs, b.rate, ph.seconds, b.batch, ph.tag, ph.tokens);
    // Subscribers: live streams of this phase's task creations, on the
    // tokens in turn.
    let expected = Arc::new(AtomicU64::new(u64::MAX));
    let mut handles = Vec::new();
    let mut opened = Vec::new();
    for i in 0..subs {
        opened.push(open_stream(streams, &tokens[i % tokens.len()]).await?);
    }
    for (conn, head_rest) in opened {
        let expected = expected.clone();
        handles.push(tokio::spawn(subscribe(
            conn, head_rest, epoch, tag, expected,
        )));
    }

    // Generators: GENERATORS appliers, each at rate/GENERATORS events/s,
    // staggered so applies arrive at a steady pace. They run on a thread
    // and runtime of their own, so the instant an answer is noted is not
    // delayed behind the 1,000 subscriber tasks (that would shrink the
    // lower bound below the truth).
    let (period, batches) = pacing(rate, seconds, batch);
    // When each batch's apply answered (µs since epoch), by batch index.
    let answered: Arc<Vec<AtomicU64>> = Arc::new(
        (0..GENERATORS as u64 * batches)
            .map(|_| AtomicU64::new(0))
            .collect(),
    );
    let started = Instant::now();
    let url = format!("{}/api/v1/apply", pamd.url);
    let token = pamd.token.clone();
    let answered2 = answered.clone();
    let generators = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("generator runtime");
        rt.block_on(generate(
            url, token, answered2, epoch, period, batches, batch, tag,
        ))
    });
    let mut round_trips = tokio::task::spawn_blocking(move || generators.join())
        .await?
        .map_err(|_| anyhow::anyhow!("generator thread panicked"))??;
    let took = started.elapsed().as_secs_f64();
    let sent = round_trips.len() as u64 * batch as u64;
    expected.store(sent, Ordering::SeqCst);

    let mut all = Vec::new();
    let mut low = Vec::new();
    let mut exact = Vec::new();
    let mut unmatched = 0;
    let (mut received, mut duplicated) = (0u64, 0u64);
    let mut reads = Vec::new();
    for h in handles {
        let s = h.await?;
        received += s.received;
        duplicated += s.duplicated;
        reads.push(s.reads);
    }
    // The publish lines of every event read. Across replicas the first
    // replica may log its own publish after the second's stream delivered
    // the event (each replica's reader runs on its own): read its log
    // again, for up to 2 s, until no event read lacks one.
    let mut published = publish_instants(&pamd.log());
    for _ in 0..10 {
        let missing = reads
            .iter()
            .flatten()
            .any(|(_, _, _, seq)| !published.contains_key(&u64::from(*seq)));
        if !missing {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        published = publish_instants(&pamd.log());
    }
    // Across replicas: the hop from the first's publish to the second's,
    // per event of this phase (what the NOTIFY and the second replica's
    // reader add, before its fan-out).
    let mut hops = Vec::new();
    if let (true, Some(first)) = (streams.url != pamd.url, reads.first()) {
        let second = publish_instants(&streams.log());
        for (_, _, _, seq) in first {
            let seq = u64::from(*seq);
            if let (Some(a), Some(b)) = (published.get(&seq), second.get(&seq)) {
                hops.push(b.saturating_sub(*a) as u32);
            }
        }
        hops.sort_unstable();
    }
    for (idx, read, upper, seq) in reads.into_iter().flatten() {
        all.push(upper);
        let answer = answered[idx as usize].load(Ordering::SeqCst);
        low.push(read.saturating_sub(answer) as u32);
        match published.get(&u64::from(seq)) {
            Some(at) => exact.push((epoch_unix + read).saturating_sub(*at) as u32),
            None => unmatched += 1,
        }
    }
    all.sort_unstable();
    low.sort_unstable();
    exact.sort_unstable();
    round_trips.sort_unstable();
    let want = sent * subs as u64;
    Ok(Report {
        subscribers: subs,
        sent,
        seconds: took,
        p50_ms: pct(&all, 0.5),
        p99_ms: pct(&all, 0.99),
        max_ms: all.last().map_or(f64::NAN, |m| f64::from(*m) / 1000.0),
        exact_p50_ms: pct(&exact, 0.5),
        exact_p99_ms: pct(&exact, 0.99),
        exact_max_ms: exact.last().map_or(f64::NAN, |m| f64::from(*m) / 1000.0),
        unmatched,
        low_p50_ms: pct(&low, 0.5),
        low_p99_ms: pct(&low, 0.99),
        lost: want.saturating_sub(received),
        duplicated,
        apply_p50_ms: pct(&round_trips, 0.5),
        apply_p99_ms: pct(&round_trips, 0.99),
        hop_p50_ms: pct(&hops, 0.5),
        hop_p99_ms: pct(&hops, 0.99),
        exact,
    })
}

/// The applies of one phase: GENERATORS tasks, each `batches` applies of
/// `batch` tasks (in a fresh project) every `period`. Returns the apply
/// round-trips (µs).
#[allow(clippy::too_many_arguments)]
async fn generate(
    url: String,
    token: String,
    answered: Arc<Vec<AtomicU64>>,
    epoch: Instant,
    period: Duration,
    batches: u64,
    batch: usize,
    tag: &'static str,
) -> anyhow::Result<Vec<u32>> {
    let http = reqwest::Client::builder().build()?;
    let first = tokio::time::Instant::now();
    let mut gens = Vec::new();
    for g in 0..GENERATORS {
        let (http, url, token, answered) =
            (http.clone(), url.clone(), token.clone(), answered.clone());
        let start = first + period.mul_f64(g as f64 / GENERATORS as f64);
        gens.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(start, period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut round_trips = Vec::new();
            for b in 0..batches {
                tick.tick().await;
                let t0 = epoch.elapsed().as_micros();
                let idx = g as u64 * batches + b;
                // A fresh project per batch keeps each apply small (apply
                // reads the project's tasks), so the send instant stays
                // close to the publish instant.
                let project = format!("{tag}{g}-{b}");
                let mut yaml = format!(
                    "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: {project}}}\nspec: {{displayName: B}}\n"
                );
                for k in 0..batch {
                    yaml.push_str(&format!(
                        "---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {tag}{t0}-{idx}-{k}, project: {project}}}\nspec: {{title: x}}\n"
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
                answered[idx as usize].store(epoch.elapsed().as_micros() as u64, Ordering::SeqCst);
                round_trips.push(sent.elapsed().as_micros() as u32);
                assert!(r.status().is_success(), "apply failed: {}", r.status());
            }
            round_trips
        }));
    }
    let mut round_trips = Vec::new();
    for g in gens {
        round_trips.extend(g.await?);
    }
    Ok(round_trips)
}

/// Reads one stream until it has `expected` events of this phase (or 10 s
/// of silence after the generators finished).
/// Opens `GET /api/v1/events/stream?topic=work_item.created` on a plain
/// TCP connection (one task per subscriber, no HTTP client's connection
/// task and body channel in between); returns it with whatever body bytes
/// came with the response head.
async fn open_stream(pamd: &Pamd, token: &str) -> anyhow::Result<(TcpStream, Vec<u8>)> {
    let addr = pamd.url.trim_start_matches("http://");
    let mut conn = TcpStream::connect(addr).await?;
    conn.set_nodelay(true)?;
    let req = format!(
        "GET /api/v1/events/stream?topic=work_item.created HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n",
    );
    conn.write_all(req.as_bytes()).await?;
    let mut buf = Vec::with_capacity(4096);
    loop {
        if let Some(end) = memmem::find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            anyhow::ensure!(head.starts_with("http/1.1 200"), "stream: {head}");
            // The raw scan below relies on chunks holding whole frames.
            anyhow::ensure!(
                head.contains("transfer-encoding: chunked"),
                "stream not chunked: {head}"
            );
            return Ok((conn, buf[end + 4..].to_vec()));
        }
        anyhow::ensure!(conn.read_buf(&mut buf).await? > 0, "stream closed");
    }
}

/// Reads one stream until it has `expected` events of this phase (or 10 s
/// of silence after the generators finished).
///
/// It scans the raw chunked body: pamd puts whole frames in every chunk,
/// so the chunk-size lines (`\r\n<hex>\r\n`) only ever sit between a
/// frame's `\n\n` and the next `id: `, and a frame is "from after the
/// previous `\n\n` to the next", with the framing bytes before its `id: `.
async fn subscribe(
    mut conn: TcpStream,
    mut buf: Vec<u8>,
    epoch: Instant,
    tag: &'static str,
    expected: Arc<AtomicU64>,
) -> Stats {
    let mut s = Stats {
        reads: Vec::new(),
        received: 0,
        duplicated: 0,
    };
    // Seqs seen, one bit each (a few KB per subscriber).
    let mut seen: Vec<u64> = Vec::new();
    let needle = format!("\"name\":\"{tag}");
    let name = memmem::Finder::new(needle.as_bytes());
    let end_of_frame = memmem::Finder::new(b"\n\n");
    let id_field = memmem::Finder::new(b"id: ");
    buf.reserve(64 * 1024);
    let mut scan = !buf.is_empty();
    loop {
        if s.received + s.duplicated >= expected.load(Ordering::SeqCst) {
            return s;
        }
        if !scan {
            match tokio::time::timeout(Duration::from_secs(10), conn.read_buf(&mut buf)).await {
                Ok(Ok(n)) if n > 0 => {}
                // Ended, or failed.
                Ok(_) => return s,
                // Silent for 10 s after the generators finished: the rest is lost.
                Err(_) if expected.load(Ordering::SeqCst) != u64::MAX => return s,
                Err(_) => continue,
            }
        }
        scan = false;
        let now = epoch.elapsed().as_micros() as u64;
        // Whole frames only; SIMD byte search and digit parsing rather than
        // UTF-8 checks or JSON parsing, so the client's own cost stays small.
        let mut consumed = 0;
        for end in end_of_frame.find_iter(&buf) {
            let frame = &buf[consumed..end];
            consumed = end + 2;
            let Some(at_id) = id_field.find(frame) else {
                continue;
            };
            let frame = &frame[at_id..];
            let Some(id) = digits(&frame[4..]).0 else {
                continue;
            };
            // The task's name, not another `name` that starts with the
            // tag's letter (the event's actor, `admin`, for tag `a`): the
            // tag is followed by the send instant's digits.
            let Some(at) = name
                .find_iter(frame)
                .find(|&at| frame.get(at + needle.len()).is_some_and(u8::is_ascii_digit))
            else {
                continue;
            };
            let (word, bit) = ((id / 64) as usize, 1u64 << (id % 64));
            if word >= seen.len() {
                seen.resize(word + 1024, 0);
            }
            if seen[word] & bit != 0 {
                s.duplicated += 1;
                continue;
            }
            seen[word] |= bit;
            s.received += 1;
            // name: <tag><t0>-<batch index>-<k>
            let rest = &frame[at + needle.len()..];
            let (t0, n) = digits(rest);
            let idx = rest.get(n + 1..).and_then(|r| digits(r).0);
            if let (Some(t0), Some(idx)) = (t0, idx) {
                let upper = now.saturating_sub(t0 as u64) as u32;
                s.reads.push((idx as u32, now, upper, id as u32));
            }
        }
        buf.drain(..consumed);
    }
}

fn unix_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// seq → the instant (µs since the Unix epoch) pamd published it, from its
/// trace lines `published first_seq=A last_seq=B unix_us=T`.
fn publish_instants(log: &str) -> std::collections::HashMap<u64, u64> {
    let field = |line: &str, name: &str| -> Option<u64> {
        let at = line.find(name)? + name.len();
        let rest = &line[at..];
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[..n].parse().ok()
    };
    let mut out = std::collections::HashMap::new();
    for line in log.lines().filter(|l| l.contains("published")) {
        if let (Some(first), Some(last), Some(at)) = (
            field(line, "first_seq="),
            field(line, "last_seq="),
            field(line, "unix_us="),
        ) {
            for seq in first..=last {
                out.insert(seq, at);
            }
        }
    }
    out
}

/// The decimal number at the start of `b` and how many bytes it took.
fn digits(b: &[u8]) -> (Option<i64>, usize) {
    let n = b.iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 18 {
        return (None, n);
    }
    let v = b[..n]
        .iter()
        .fold(0i64, |v, c| v * 10 + i64::from(c - b'0'));
    (Some(v), n)
}
