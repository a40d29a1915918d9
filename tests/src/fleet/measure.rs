//! What the fleet simulator measures: client-side latency per endpoint,
//! pamd's CPU and memory from /proc, the loops' pass duration from
//! /metrics, and the journal check at the end (dispatch latency, lost and
//! duplicated signals).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};
use uuid::Uuid;

/// Latencies per endpoint, in microseconds.
#[derive(Default)]
pub struct Latencies {
    by: Mutex<BTreeMap<&'static str, Vec<u32>>>,
    /// Answers that were not 2xx, per endpoint and status (0: transport).
    errors: Mutex<BTreeMap<(&'static str, u16), u64>>,
    /// While false, nothing is recorded (the fleet is still starting).
    pub recording: std::sync::atomic::AtomicBool,
}

impl Latencies {
    pub fn record(&self, endpoint: &'static str, took: Duration) {
        if !self.recording.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let us = took.as_micros().min(u32::MAX as u128) as u32;
        self.by
            .lock()
            .unwrap()
            .entry(endpoint)
            .or_default()
            .push(us);
    }

    pub fn error(&self, endpoint: &'static str, status: u16) {
        *self
            .errors
            .lock()
            .unwrap()
            .entry((endpoint, status))
            .or_default() += 1;
    }

    /// `{endpoint: {n, p50_ms, p99_ms, max_ms}}`.
    /// Forgets what was recorded (the idle phase's figures are kept
    /// apart from the window's).
    pub fn clear(&self) {
        self.by.lock().unwrap().clear();
        self.errors.lock().unwrap().clear();
    }

    pub fn summary(&self) -> Value {
        let by = self.by.lock().unwrap();
        let mut out = serde_json::Map::new();
        for (endpoint, v) in by.iter() {
            let mut v = v.clone();
            v.sort_unstable();
            out.insert(
                endpoint.to_string(),
                json!({
                    "n": v.len(),
                    "p50_ms": pct(&v, 0.50) as f64 / 1000.0,
                    "p99_ms": pct(&v, 0.99) as f64 / 1000.0,
                    "max_ms": v.last().copied().unwrap_or(0) as f64 / 1000.0,
                }),
            );
        }
        Value::Object(out)
    }

    pub fn errors(&self) -> Value {
        let e = self.errors.lock().unwrap();
        json!(e
            .iter()
            .map(|((ep, st), n)| (format!("{ep} {st}"), *n))
            .collect::<BTreeMap<_, _>>())
    }
}

/// The value at quantile `q` of sorted `v` (0 when empty).
pub fn pct<T: Copy + Default>(v: &[T], q: f64) -> T {
    if v.is_empty() {
        return T::default();
    }
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v[i.min(v.len() - 1)]
}

/// A process's CPU time (user + system) and memory, from /proc.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcStat {
    pub cpu_seconds: f64,
    pub rss_mb: f64,
    pub peak_rss_mb: f64,
}

pub fn proc_stat(pid: u32) -> ProcStat {
    let ticks = 100.0; // sysconf(_SC_CLK_TCK) on Linux
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command name: state is field 3;
    // utime and stime are fields 14 and 15.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0);
    let cpu_seconds = (num(11) + num(12)) / ticks;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    ProcStat {
        cpu_seconds,
        rss_mb: kb("VmRSS:") / 1024.0,
        peak_rss_mb: kb("VmHWM:") / 1024.0,
    }
}

/// This process's own CPU seconds (the simulator's cost, reported so the
/// reader can see how much of the 2 cores it took).
pub fn self_cpu_seconds() -> f64 {
    proc_stat(std::process::id()).cpu_seconds
}

/// `pam_loop_duration_seconds` sums and counts per loop, from /metrics.
pub fn loop_durations(metrics: &str) -> HashMap<String, (f64, f64)> {
    let mut out: HashMap<String, (f64, f64)> = HashMap::new();
    for line in metrics.lines() {
        let (is_sum, rest) = if let Some(r) = line.strip_prefix("pam_loop_duration_seconds_sum{") {
            (true, r)
        } else if let Some(r) = line.strip_prefix("pam_loop_duration_seconds_count{") {
            (false, r)
        } else {
            continue;
        };
        let Some((labels, value)) = rest.split_once("} ") else {
            continue;
        };
        let Some(name) = labels
            .split(',')
            .find_map(|l| l.strip_prefix("loop=\""))
            .map(|l| l.trim_end_matches('"').to_string())
        else {
            continue;
        };
        let v: f64 = value.trim().parse().unwrap_or(0.0);
        let e = out.entry(name).or_default();
        if is_sum {
            e.0 = v;
        } else {
            e.1 = v;
        }
    }
    out
}

/// Mean milliseconds per call of each loop between two scrapes.
pub fn loop_means(
    before: &HashMap<String, (f64, f64)>,
    after: &HashMap<String, (f64, f64)>,
) -> Value {
    let mut out = BTreeMap::new();
    for (name, (sum, count)) in after {
        let (s0, c0) = before.get(name).copied().unwrap_or_default();
        let n = count - c0;
        if n > 0.0 {
            out.insert(
                name.clone(),
                json!({"passes": n, "mean_ms": (sum - s0) / n * 1000.0}),
            );
        }
    }
    json!(out)
}

/// What the simulator knows it was told: every (run, attempt, kind) whose
/// signal pamd acknowledged as applied, and how many replayed signals
/// came back applied (each one would be a duplicated effect).
#[derive(Default)]
pub struct Acks {
    pub applied: Mutex<HashSet<(Uuid, i32, &'static str)>>,
    pub replayed: std::sync::atomic::AtomicU64,
    pub replays_applied: std::sync::atomic::AtomicU64,
    pub signals_sent: std::sync::atomic::AtomicU64,
}

/// The journal check: dispatch latency (pending → spawning, server
/// timestamps), and lost or duplicated lifecycle events.
pub async fn check_journal(database_url: &str, acks: &Acks) -> anyhow::Result<Value> {
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect(database_url)
        .await?;
    let rows: Vec<(String, i32, String, i64, chrono::DateTime<chrono::Utc>)> = sqlx::query_as(
        "SELECT payload->>'run_id', COALESCE((payload->>'attempt')::int, 0), topic, count(*), min(created_at) \
         FROM events WHERE topic IN ('run.created','run.requeued','run.spawning','run.started','run.finished') \
         GROUP BY 1, 2, 3",
    )
    .fetch_all(&pool)
    .await?;
    let mut at: HashMap<(String, i32, String), chrono::DateTime<chrono::Utc>> = HashMap::new();
    let mut duplicated = 0u64;
    let mut counts: HashMap<(String, i32, String), i64> = HashMap::new();
    for (run, attempt, topic, n, first) in rows {
        if n > 1 && topic != "run.created" {
            duplicated += (n - 1) as u64;
        }
        counts.insert((run.clone(), attempt, topic.clone()), n);
        at.insert((run, attempt, topic), first);
    }
    // Dispatch latency per attempt: from creation (attempt 1) or requeue.
    let mut dispatch: Vec<i64> = Vec::new();
    for ((run, attempt, topic), t) in &at {
        if topic != "run.spawning" {
            continue;
        }
        let from = if *attempt == 1 {
            at.get(&(run.clone(), 1, "run.created".into()))
        } else {
            at.get(&(run.clone(), *attempt, "run.requeued".into()))
        };
        if let Some(from) = from {
            dispatch.push((*t - *from).num_microseconds().unwrap_or(0));
        }
    }
    dispatch.sort_unstable();
    // Lost: pamd said applied, but the event that records it is missing.
    let mut lost = 0u64;
    for (run, attempt, kind) in acks.applied.lock().unwrap().iter() {
        let topic = match *kind {
            "started" => "run.started",
            "finished" => "run.finished",
            _ => continue,
        };
        if !counts.contains_key(&(run.to_string(), *attempt, topic.to_string())) {
            lost += 1;
        }
    }
    let statuses: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, count(*) FROM runs GROUP BY 1 ORDER BY 1")
            .fetch_all(&pool)
            .await?;
    pool.close().await;
    Ok(json!({
        "dispatch_latency": {
            "n": dispatch.len(),
            "p50_ms": pct(&dispatch, 0.50) as f64 / 1000.0,
            "p99_ms": pct(&dispatch, 0.99) as f64 / 1000.0,
            "max_ms": dispatch.last().copied().unwrap_or(0) as f64 / 1000.0,
        },
        "lost_signals": lost,
        "duplicated_events": duplicated,
        "replayed_signals": acks.replayed.load(std::sync::atomic::Ordering::Relaxed),
        "replays_applied": acks.replays_applied.load(std::sync::atomic::Ordering::Relaxed),
        "runs_by_status": statuses.into_iter().collect::<BTreeMap<_, _>>(),
    }))
}
