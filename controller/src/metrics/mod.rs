//! pamd's Prometheus metrics (served at `GET /metrics` by the API) (OpenMetrics text, which
//! Prometheus scrapes natively), with the `prometheus-client` crate.
//!
//! Counters and histograms are updated where things happen (HTTP
//! middleware, dispatch, signal ingest, the loops, the event bus); the
//! runs-by-phase and hosts-by-phase gauges are computed from the database
//! at scrape time, so they are right across restarts and other writers.
//! docs/operations.md lists every metric.

use pam_store::Webhook;
use std::time::Instant;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use tokio::sync::Mutex;

use pam_store::prelude::*;

use crate::events::EventBus;

mod process;

type Labels = Vec<(&'static str, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

/// Run phases (the `runs.status` column) and host phases, always reported
/// (as 0 when none), so dashboards see every series.
const RUN_PHASES: [&str; 6] = [
    "pending", "spawning", "running", "exited", "failed", "stopped",
];
const HOST_PHASES: [&str; 4] = ["registered", "online", "offline", "disabled"];

/// Six buckets from 5 ms to 10 s (a bucket line per route,
/// method and status class, and per loop, adds up — the tour's instance
/// served 47 KB with sixteen; steps of about ×4 are what dashboards read).
const SECONDS_BUCKETS: [f64; 6] = [0.005, 0.025, 0.1, 0.5, 2.5, 10.0];

fn seconds_buckets() -> Histogram {
    Histogram::new(SECONDS_BUCKETS)
}

fn dispatch_buckets() -> Histogram {
    // 10 ms … ~5.8 h (a pending run can wait for a host for long).
    Histogram::new(exponential_buckets(0.01, 3.0, 14))
}

pub struct Metrics {
    registry: Mutex<Registry>,
    runs: Family<Labels, Gauge>,
    hosts: Family<Labels, Gauge>,
    /// pending_since → spawning (a claim), seconds.
    pub dispatch_latency: Histogram,
    /// Worker signals by outcome: applied, duplicate, stale, rejected.
    pub signals: Family<Labels, Counter>,
    /// One loop's sweep, seconds, by `loop`.
    pub loop_duration: HistogramFamily,
    /// Sweeps that failed (and were retried on the next pass), by `loop`.
    loop_errors: Family<Labels, Counter>,
    /// HTTP requests by method, matched route and status, seconds.
    pub http_duration: HistogramFamily,
    /// One Source sync, seconds, by `result` (see [`SYNC_RESULTS`]).
    pub source_sync: HistogramFamily,
    /// 1 while this replica leads (runs the loops), else 0; the term.
    pub leader: Gauge,
    pub leader_term: Gauge,
    /// Tokens reported by providers, by provider, project and
    /// `type` (input, cached_input, output).
    tokens: Family<Labels, Counter>,
    /// Cost in US dollars, by provider and project.
    cost: Family<Labels, Counter<f64, std::sync::atomic::AtomicU64>>,
    /// The projects labelled so far (at most [`MAX_PROJECT_LABELS`]).
    project_labels: std::sync::Mutex<std::collections::HashSet<uuid::Uuid>>,
    /// Webhook delivery attempts by webhook and outcome
    /// (delivered, retry, failed).
    webhook_deliveries: Family<Labels, Counter>,
    /// One delivery attempt, seconds, by webhook.
    webhook_attempts: HistogramFamily,
    /// Deliveries waiting, by webhook (set at scrape time).
    webhook_pending: Family<Labels, Gauge>,
    /// 1 when the database answered this scrape's reads, else 0.
    database_up: Gauge,
    /// Requests refused (429) because their client address
    /// failed authentication too often (api/rate_limit.rs).
    pub auth_failures_limited: Counter,
    /// Push receiver requests by provider and outcome
    /// (`api::source_hooks::Outcome`).
    source_hooks: Family<Labels, Counter>,
    /// Requests refused 401/403, per token name (operator-named
    /// and few: a bounded label; `unknown` for a token pamd does not know).
    api_refused: Family<Labels, Counter>,
}

/// How long `/readyz` and a scrape's database reads may wait: probes give
/// up after about a second, so a database that is down is reported within
/// that, not after the pool's acquire timeout.
pub const DATABASE_PROBE: std::time::Duration = std::time::Duration::from_millis(800);

/// Usage metrics label at most this many projects; later ones count as
/// `other` (a bounded label set).
pub const MAX_PROJECT_LABELS: usize = 200;

/// The providers usage metrics name; anything else counts as `other`.
const USAGE_PROVIDERS: [&str; 4] = ["claude", "codex", "gemini", "grok"];

/// The controller loops' sweeps (`reconcile::sweep_all` and the
/// integrity check): their duration and error series exist from the
/// first scrape.
pub const LOOPS: [&str; 8] = [
    "liveness",
    "gate",
    "schedule",
    "secrets",
    "budget",
    "timeout",
    "restart",
    "integrity",
];

/// How a Source sync ended: `changed` (only the changed files applied),
/// `full` (the whole tree applied), `unchanged` (the revision applied
/// already, no drift), `out_of_sync` (drift left in place), `failed`.
pub const SYNC_RESULTS: [&str; 5] = ["changed", "full", "unchanged", "out_of_sync", "failed"];

impl Metrics {
    /// Registers everything, including the bus's own counters.
    pub fn new(bus: &EventBus) -> Metrics {
        // The standard `process_*` series unprefixed beside pam's own.
        let mut root = Registry::default();
        root.register_collector(Box::new(process::Process::new()));
        let r = root.sub_registry_with_prefix("pam");
        r.register(
            "build",
            "pamd's version and the commit it was built from",
            prometheus_client::metrics::info::Info::new(vec![
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                ("commit", env!("PAM_COMMIT").to_string()),
            ]),
        );
        let runs = Family::<Labels, Gauge>::default();
        r.register("runs", "Runs by phase", runs.clone());
        let hosts = Family::<Labels, Gauge>::default();
        r.register("hosts", "Hosts by phase", hosts.clone());
        let dispatch_latency = dispatch_buckets();
        r.register(
            "dispatch_latency_seconds",
            "Time from a run's pending_since to its claim (spawning)",
            dispatch_latency.clone(),
        );
        let signals = Family::<Labels, Counter>::default();
        r.register(
            "signals",
            "Worker signals ingested, by outcome (applied, duplicate, stale, rejected)",
            signals.clone(),
        );
        let loop_duration = HistogramFamily::new_with_constructor(seconds_buckets);
        r.register(
            "loop_duration_seconds",
            "Duration of one sweep of a controller loop, by loop",
            loop_duration.clone(),
        );
        let loop_errors = Family::<Labels, Counter>::default();
        r.register(
            "loop_errors",
            "Controller loop sweeps that failed (retried on the next pass), by loop",
            loop_errors.clone(),
        );
        let http_duration = HistogramFamily::new_with_constructor(seconds_buckets);
        r.register(
            "http_request_duration_seconds",
            "HTTP request duration (to the response head), by method, route and status",
            http_duration.clone(),
        );
        let source_sync = HistogramFamily::new_with_constructor(seconds_buckets);
        r.register(
            "source_sync_duration_seconds",
            "Duration of one Source sync (GitOps), by result: changed, full, unchanged, out_of_sync, failed",
            source_sync.clone(),
        );
        let leader = Gauge::default();
        r.register(
            "leader",
            "1 while this pamd replica holds the loops' lease (runs the loops), else 0",
            leader.clone(),
        );
        let leader_term = Gauge::default();
        r.register(
            "leader_term",
            "The term of the loops' lease this replica holds (0: none)",
            leader_term.clone(),
        );
        r.register(
            "events_journaled",
            "Events committed to the journal and published by this pamd",
            bus.journaled.clone(),
        );
        r.register(
            "sse_subscribers",
            "Open event streams (GET /api/v1/events/stream)",
            bus.subscribers.clone(),
        );
        r.register(
            "sse_lagged",
            "Times a slow event-stream subscriber was caught up from the journal",
            bus.lagged.clone(),
        );
        let tokens = Family::<Labels, Counter>::default();
        r.register(
            "tokens",
            "Tokens providers reported, by provider, project (uid; `other` past 200 projects) and type: input (cached included), cached_input, output",
            tokens.clone(),
        );
        let cost = Family::<Labels, Counter<f64, std::sync::atomic::AtomicU64>>::default();
        r.register(
            "cost_usd",
            "Cost in US dollars of what providers reported, by provider and project",
            cost.clone(),
        );
        let webhook_deliveries = Family::<Labels, Counter>::default();
        r.register(
            "webhook_deliveries",
            "Webhook delivery attempts, by webhook and outcome: delivered, retry (failed, retried later), failed (retries exhausted)",
            webhook_deliveries.clone(),
        );
        let webhook_attempts = HistogramFamily::new_with_constructor(seconds_buckets);
        r.register(
            "webhook_attempt_duration_seconds",
            "Duration of one webhook delivery attempt (to the answer, or the timeout), by webhook",
            webhook_attempts.clone(),
        );
        let webhook_pending = Family::<Labels, Gauge>::default();
        r.register(
            "webhook_deliveries_pending",
            "Webhook deliveries queued and not yet delivered or failed, by webhook",
            webhook_pending.clone(),
        );
        let database_up = Gauge::default();
        r.register(
            "database_up",
            "1 when the database answered this scrape's reads (within 800 ms), else 0 (the phase and pending gauges are then left out)",
            database_up.clone(),
        );
        let auth_failures_limited = Counter::default();
        r.register(
            "auth_failures_limited",
            "Requests refused (429) because their client address failed authentication too often ([rate_limits] auth_failures_*)",
            auth_failures_limited.clone(),
        );
        let source_hooks = Family::<Labels, Counter>::default();
        r.register(
            "source_hooks",
            "Push receiver requests, by provider and outcome: accepted (a sync asked for), ping, or why refused",
            source_hooks.clone(),
        );
        let api_refused = Family::<Labels, Counter>::default();
        r.register(
            "api_refused",
            "API requests refused as unauthorized (401) or forbidden (403), per token name",
            api_refused.clone(),
        );
        // Every known series from the start (at 0), so rates work from the
        // first scrape.
        for outcome in ["applied", "duplicate", "stale", "rejected"] {
            let _ = signals.get_or_create(&vec![("outcome", outcome.to_string())]);
        }
        for name in LOOPS {
            let _ = loop_duration.get_or_create(&vec![("loop", name.to_string())]);
            let _ = loop_errors.get_or_create(&vec![("loop", name.to_string())]);
        }
        // (Not the Source syncs' histograms: an instance without Sources
        // would serve five empty ones.)
        Metrics {
            registry: Mutex::new(root),
            runs,
            hosts,
            dispatch_latency,
            signals,
            loop_duration,
            loop_errors,
            http_duration,
            source_sync,
            leader,
            leader_term,
            tokens,
            cost,
            project_labels: Default::default(),
            webhook_deliveries,
            webhook_attempts,
            webhook_pending,
            database_up,
            auth_failures_limited,
            source_hooks,
            api_refused,
        }
    }

    /// A request of token `token` (its name, never its value)
    /// was refused with `status` (401 or 403).
    pub fn api_refused(&self, token: &str, status: u16) {
        self.api_refused
            .get_or_create(&vec![
                ("token", token.to_string()),
                ("status", status.to_string()),
            ])
            .inc();
    }

    /// A delivery attempt to `webhook` ended as `outcome`
    /// (delivered, retry, failed). Webhooks are few and operator-named: a
    /// bounded label set.
    /// One push receiver request's outcome.
    pub fn source_hook(&self, provider: &'static str, outcome: &'static str) {
        self.source_hooks
            .get_or_create(&vec![
                ("provider", provider.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
    }

    pub fn webhook_outcome(&self, webhook: &str, outcome: &'static str) {
        self.webhook_deliveries
            .get_or_create(&vec![
                ("webhook", webhook.to_string()),
                ("outcome", outcome.to_string()),
            ])
            .inc();
    }

    /// A delivery attempt to `webhook` took from `started` to now.
    pub fn webhook_attempt(&self, webhook: &str, started: Instant) {
        self.webhook_attempts
            .get_or_create(&vec![("webhook", webhook.to_string())])
            .observe(started.elapsed().as_secs_f64());
    }

    /// Usage signal ingest committed for a run of `provider` in
    /// `project` (a delta; negative parts — a provider's final totals
    /// below its steps' sum — are not counted: counters only grow).
    pub fn usage(&self, provider: &str, project: uuid::Uuid, delta: &pam_store::Usage) {
        let provider = if USAGE_PROVIDERS.contains(&provider) {
            provider
        } else {
            "other"
        };
        let project = {
            let mut seen = self.project_labels.lock().expect("not poisoned");
            if seen.contains(&project) || seen.len() < MAX_PROJECT_LABELS {
                seen.insert(project);
                project.to_string()
            } else {
                "other".to_string()
            }
        };
        for (kind, n) in [
            ("input", delta.input_tokens),
            ("cached_input", delta.cached_input_tokens),
            ("output", delta.output_tokens),
        ] {
            if n > 0 {
                self.tokens
                    .get_or_create(&vec![
                        ("provider", provider.to_string()),
                        ("project", project.clone()),
                        ("type", kind.to_string()),
                    ])
                    .inc_by(n as u64);
            }
        }
        if delta.cost_micro_usd > 0 {
            self.cost
                .get_or_create(&vec![
                    ("provider", provider.to_string()),
                    ("project", project),
                ])
                .inc_by(delta.cost_micro_usd as f64 / 1e6);
        }
    }

    pub fn signal(&self, outcome: pam_manifests::protocol::SignalOutcome) {
        use pam_manifests::protocol::SignalOutcome as O;
        let label = match outcome {
            O::Applied => "applied",
            O::Duplicate => "duplicate",
            O::Stale => "stale",
            O::Rejected => "rejected",
        };
        self.signals
            .get_or_create(&vec![("outcome", label.to_string())])
            .inc();
    }

    /// One sweep of loop `name` failed.
    pub fn loop_failed(&self, name: &'static str) {
        debug_assert!(LOOPS.contains(&name), "{name} is not in LOOPS");
        self.loop_errors
            .get_or_create(&vec![("loop", name.to_string())])
            .inc();
    }

    pub fn loop_took(&self, name: &'static str, started: Instant) {
        debug_assert!(LOOPS.contains(&name), "{name} is not in LOOPS");
        self.loop_duration
            .get_or_create(&vec![("loop", name.to_string())])
            .observe(started.elapsed().as_secs_f64());
    }

    /// One Source sync took from `started` to now and ended as `result`
    /// (one of [`SYNC_RESULTS`]).
    pub fn source_synced(&self, result: &'static str, started: Instant) {
        debug_assert!(SYNC_RESULTS.contains(&result));
        self.source_sync
            .get_or_create(&vec![("result", result.to_string())])
            .observe(started.elapsed().as_secs_f64());
    }

    /// The exposition, after refreshing the phase gauges from the store.
    /// A database that does not answer within [`DATABASE_PROBE`] leaves
    /// those gauges out and sets `pam_database_up` to 0: pamd's own
    /// metrics are served whatever the database does.
    pub async fn render(&self, store: &dyn Store) -> String {
        let read = tokio::time::timeout(DATABASE_PROBE, Self::read_gauges(store)).await;
        // One scrape at a time: the gauges are set, then encoded.
        let registry = self.registry.lock().await;
        self.webhook_pending.clear();
        match read {
            Ok(Ok((runs, hosts, pending))) => {
                self.database_up.set(1);
                set_phases(&self.runs, &RUN_PHASES, &runs);
                set_phases(&self.hosts, &HOST_PHASES, &hosts);
                for (name, n) in pending {
                    self.webhook_pending
                        .get_or_create(&vec![("webhook", name)])
                        .set(n);
                }
            }
            failed => {
                if let Ok(Err(e)) = failed {
                    tracing::debug!(error = %e, "metrics: the database did not answer");
                }
                // Unknown now: no series rather than stale ones.
                self.database_up.set(0);
                self.runs.clear();
                self.hosts.clear();
            }
        }
        let mut out = String::new();
        encode(&mut out, &registry).expect("writing to a String cannot fail");
        out
    }

    /// Runs and hosts by phase, and deliveries pending by webhook.
    async fn read_gauges(store: &dyn Store) -> pam_store::StoreResult<Gauges> {
        let (runs, hosts, pending) = {
            let mut tx = store.begin().await?;
            let counts = tx.delivery_counts().await?;
            let pending: Vec<(String, i64)> = tx
                .list::<Webhook>(())
                .await?
                .into_iter()
                .map(|w| {
                    let n = counts.get(&w.id).map_or(0, |c| c.0);
                    (w.name, i64::try_from(n).unwrap_or(i64::MAX))
                })
                .collect();
            let runs: Vec<(String, i64)> = tx
                .count_runs_by_status()
                .await?
                .into_iter()
                .map(|(s, n)| (s.as_str().to_string(), n))
                .collect();
            let hosts: Vec<(String, i64)> = tx
                .count_hosts_by_status()
                .await?
                .into_iter()
                .map(|(s, n)| (s.as_str().to_string(), n))
                .collect();
            (runs, hosts, pending)
        };
        Ok((runs, hosts, pending))
    }
}

/// Runs by phase, hosts by phase, pending deliveries by webhook.
type Gauges = (Vec<(String, i64)>, Vec<(String, i64)>, Vec<(String, i64)>);

fn set_phases(family: &Family<Labels, Gauge>, phases: &[&str], counts: &[(String, i64)]) {
    family.clear();
    for p in phases {
        family.get_or_create(&vec![("phase", p.to_string())]).set(0);
    }
    for (p, n) in counts {
        family.get_or_create(&vec![("phase", p.clone())]).set(*n);
    }
}
