//! Shared pieces of the benchmark binaries (`src/bin/bench-*.rs`): a fresh
//! database on the test server, the real API router served in-process on a
//! loopback port, tokens, timing and reporting.
//!
//! Benchmarks are binaries, not tests: they print figures and ratios
//! against a baseline measured in the same run on the same database.

use std::sync::Arc;
use std::time::{Duration, Instant};

/// The allocator pamd runs on (jemalloc, controller/src/main.rs), for a
/// benchmark that serves pamd's router in-process: its figures are then
/// pamd's, not the system allocator's. Expands to the
/// `#[global_allocator]` item; use it once, at a bench binary's top.
#[macro_export]
macro_rules! pamd_allocator {
    () => {
        #[global_allocator]
        static GLOBAL: $crate::bench::Jemalloc = $crate::bench::Jemalloc;
    };
}
pub use tikv_jemallocator::Jemalloc;

use chrono::Utc;
use pam_controller::api::{router, AppState};
use pam_controller::clock::SystemClock;
use pam_store::TokenKind;
use sqlx::PgPool;
use uuid::Uuid;

/// A fresh migrated database with a bigger pool than the tests use.
pub async fn pool(max_connections: u32) -> anyhow::Result<(PgPool, String)> {
    let url = pam_testkit::testdb::fresh_database_url().await?;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(max_connections)
        .connect(&url)
        .await?;
    Ok((pool, url))
}

/// The real router over `pool`, served on 127.0.0.1; returns its base URL
/// and the state.
pub async fn serve(pool: PgPool) -> anyhow::Result<(String, AppState)> {
    let store = Arc::new(pam_store::postgres::PgStore::new(pool));
    let state = AppState::new(store, Arc::new(SystemClock), Default::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    // As pamd serves it (controller/src/server/mod.rs): one service for
    // every connection, not a route table copied per connection.
    let app = router(state.clone()).into_make_service();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((url, state))
}

/// Creates a token of `kind` (for `host` when a worker token).
pub async fn token(
    state: &AppState,
    kind: TokenKind,
    host: Option<&str>,
) -> anyhow::Result<String> {
    let mut tx = state.ctx.store.begin().await?;
    let (_, token) = pam_controller::rules::tokens::mint(
        &mut *tx,
        kind,
        format!("bench-{}", &Uuid::new_v4().simple().to_string()[..8]),
        host.map(str::to_string),
        Utc::now(),
    )
    .await?;
    tx.commit().await?;
    Ok(token)
}

/// Runs `f` once and returns its result and wall time.
pub async fn timed<T, F: std::future::Future<Output = T>>(f: F) -> (T, Duration) {
    let t = Instant::now();
    let v = f.await;
    (v, t.elapsed())
}

/// `n / d` per second.
pub fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

/// `PASS`/`MISS` against a target.
pub fn verdict(ok: bool) -> &'static str {
    if ok {
        "PASS"
    } else {
        "MISS"
    }
}

/// One figure of a benchmark for the summary (`scripts/bench`): appended
/// as a JSON line to the file `$PAM_BENCH_SUMMARY` names, when it is set.
pub struct Figure<'a> {
    /// `bench-loops claim`, `bench-fleet 1000 hosts heartbeat p99`, ….
    pub name: &'a str,
    pub value: f64,
    /// `runs/s`, `ms`, `MB`, `x`.
    pub unit: &'a str,
    /// The baseline measured in the same run, when the figure has one.
    pub baseline: Option<f64>,
    /// The target in words (`>= 0.7x pgbench`, `<= 100 ms`).
    pub target: &'a str,
    /// Whether the figure meets it.
    pub pass: bool,
}

/// Records `f` (see [`Figure`]) and returns its verdict, `PASS`/`MISS`.
pub fn record(f: Figure<'_>) -> &'static str {
    if let Some(path) = std::env::var_os("PAM_BENCH_SUMMARY") {
        use std::io::Write as _;
        let line = serde_json::json!({
            "name": f.name,
            "value": f.value,
            "unit": f.unit,
            "baseline": f.baseline,
            "ratio": f.baseline.filter(|b| *b != 0.0).map(|b| f.value / b),
            "target": f.target,
            "pass": f.pass,
        });
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| writeln!(file, "{line}"));
        if let Err(e) = written {
            eprintln!(
                "PAM_BENCH_SUMMARY {}: {e}",
                std::path::Path::new(&path).display()
            );
        }
    }
    verdict(f.pass)
}
