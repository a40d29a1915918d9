//! The runtime context the API, apply and the loops share: the store, the
//! injected clock, the event bus, metrics, thresholds, the wake-ups and
//! what this pamd has observed of the fleet ([`Ctx::observing_since`]) —
//! and [`Ctx::commit`], the one way a transaction is committed and its
//! events published.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use pam_store::{Store, StoreResult, Tx};
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::events::EventBus;
use crate::metrics::Metrics;
use crate::rules::runs::usage::PriceTable;
use crate::rules::secrets::Keyring;
use crate::rules::webhooks::{self, WebhookSettings};

/// Thresholds the loops use; config with the seed's defaults.
#[derive(Debug, Clone)]
pub struct Thresholds {
    /// How often workers heartbeat (30 s).
    pub heartbeat: Duration,
    /// Online hosts silent this long go offline (90 s); also the OQ-14
    /// recency window.
    pub offline_after: Duration,
    /// Pending runs unclaimed this long fail (5 min, OQ-15), unless the run
    /// sets its own.
    pub dispatch_timeout: Duration,
    /// How often the loops resync without a wake-up.
    pub resync: Duration,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            heartbeat: Duration::from_secs(30),
            offline_after: Duration::from_secs(90),
            dispatch_timeout: Duration::from_secs(300),
            resync: Duration::from_secs(1),
        }
    }
}

/// What the loops need: the store, the clock, the event bus, thresholds,
/// and the wake-ups they share with the API.
#[derive(Clone)]
pub struct Ctx {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub bus: EventBus,
    /// pamd's metrics (`GET /metrics`).
    pub metrics: Arc<Metrics>,
    pub thresholds: Thresholds,
    /// Every wake-up the loops, the claims and the sender share with the
    /// API, in one place.
    pub wakeups: Wakeups,
    /// Since when this pamd has been able to observe the fleet.
    observation: Arc<Observation>,
    /// The leader lease this context's commits are fenced by: the loops'
    /// context has one, the API's none.
    pub fence: Option<Arc<Fence>>,
    /// pamd's `[prices]` table: what signal ingest prices a
    /// provider's tokens at when the provider reports no cost.
    pub prices: Arc<PriceTable>,
    /// pamd's `[webhooks]`: signing keys, retries, links.
    pub webhooks: Arc<WebhookSettings>,
    /// The keys Secrets are sealed with: pamd's key file, or
    /// one key in memory for tests.
    pub secrets: Arc<Keyring>,
}

/// The wake-ups (one place). Each only makes something happen
/// sooner: the loops resync, the claims long-poll with a timeout and the
/// sender polls, so a lost wake-up costs time, never correctness.
#[derive(Clone, Default)]
pub struct Wakeups {
    /// A run may have become claimable (new run, requeue, host change):
    /// wakes long-polling claims ([`Ctx::runs_claimable`]).
    pub claimable: Arc<Notify>,
    /// Per-host wake-ups of long-poll claims (a run of the host ended).
    pub host_claims: Arc<HostClaims>,
    /// Runs the loops sooner than the resync period.
    pub loops: Arc<Notify>,
    /// A commit queued webhook deliveries: the sender wakes sooner than
    /// its poll.
    pub deliveries: Arc<Notify>,
    /// Wakes the workers' claim long-polls early (a stop, a signal, attach
    /// input), so they fetch their desired set now rather than next tick.
    pub nudge: Arc<Notify>,
    /// Per-host watch streams (`api/watch.rs`): a change of one
    /// host's desired set wakes that host's stream only.
    pub watches: Arc<HostWatches>,
    /// When the timeout sweep last woke the claims for runs left unclaimed
    /// (`reconcile::timeout`): at most once per its grace, however often
    /// the loops pass.
    pub unclaimed_woken: Arc<std::sync::Mutex<Option<chrono::DateTime<chrono::Utc>>>>,
}

/// The desired-set version of every host with a watch stream open on this
/// pamd. A host's version is the process-wide change count at
/// its last change, so it only grows, and a version made after a host's
/// entry was dropped (no stream held it) is above every one handed out
/// before: a stream resuming at a version that is no longer current always
/// resyncs. A host without a stream has no entry, and a change of it costs
/// one hash lookup.
#[derive(Default)]
pub struct HostWatches {
    hosts: Mutex<std::collections::HashMap<uuid::Uuid, tokio::sync::watch::Sender<u64>>>,
    changes: std::sync::atomic::AtomicU64,
    /// The bus fan-out task ([`crate::api`]'s watch) is running.
    pub fanout: AtomicBool,
    /// This process's versions' prefix: a version another pamd (or an
    /// earlier run of this one) handed out is never taken for current.
    epoch: std::sync::OnceLock<String>,
}

impl HostWatches {
    /// The version stream of `host`'s desired set (made when none is open).
    pub fn subscribe(&self, host: uuid::Uuid) -> tokio::sync::watch::Receiver<u64> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = hosts.get(&host) {
            return tx.subscribe();
        }
        // Entries of hosts whose streams all closed go now and then, at
        // sizes where the sweep is paid for by as many insertions.
        if hosts.len() >= 64 && hosts.len().is_power_of_two() {
            hosts.retain(|_, tx| tx.receiver_count() > 0);
        }
        let (tx, rx) = tokio::sync::watch::channel(self.next());
        hosts.insert(host, tx);
        rx
    }

    pub fn epoch(&self) -> String {
        self.epoch
            .get_or_init(|| uuid::Uuid::new_v4().simple().to_string()[..12].to_string())
            .clone()
    }

    fn next(&self) -> u64 {
        self.changes.fetch_add(1, Ordering::SeqCst) + 1
    }

    /// A watch stream of `host` is open on this pamd.
    pub fn watched(&self, host: uuid::Uuid) -> bool {
        let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        hosts.get(&host).is_some_and(|tx| tx.receiver_count() > 0)
    }

    /// `host`'s desired set changed: its open streams send a frame.
    pub fn changed(&self, host: uuid::Uuid) {
        let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(tx) = hosts.get(&host) {
            tx.send_replace(self.next());
        }
    }

    /// Every open stream resyncs (the fan-out fell behind the bus).
    pub fn changed_all(&self) {
        let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        for tx in hosts.values() {
            tx.send_replace(self.next());
        }
    }
}

/// A fencing token: the term of a leader lease this process holds (0:
/// none). [`Ctx::commit`] of a fenced context checks it in the
/// transaction, so once another process took the lease over, a loop of
/// this one (say, resumed after a pause) commits nothing.
#[derive(Debug)]
pub struct Fence {
    pub lease: &'static str,
    term: AtomicI64,
}

impl Fence {
    pub fn new(lease: &'static str) -> Fence {
        Fence {
            lease,
            term: AtomicI64::new(0),
        }
    }

    /// The term held (0: not leading).
    pub fn term(&self) -> i64 {
        self.term.load(Ordering::SeqCst)
    }

    pub fn set(&self, term: i64) {
        self.term.store(term, Ordering::SeqCst);
    }
}

/// Since when this pamd has been watching the workers report: its start, or
/// the pass at which its loops reached the database again after failing to
/// (kept in memory: it is what *this* process saw, Kubernetes' node
/// lifecycle controller style). A host's silence counts only from here
/// (`reconcile::liveness`), and a pending run's dispatch timeout fires only
/// once the fleet had a full offline window to come back (OQ-15,
/// `reconcile::timeout`): workers that went on heartbeating into a pamd
/// that was down, or cut off from its database, are not taken for lost.
#[derive(Debug)]
struct Observation {
    since: Mutex<DateTime<Utc>>,
    /// The last pass failed because the database did not answer: the next
    /// pass restarts the observation.
    blind: AtomicBool,
}

/// Per-host wake-ups of long-poll claims ([`crate::reconcile::dispatch::
/// claim_wait`]), and how many hosts with free capacity are waiting for new
/// runs.
#[derive(Default)]
pub struct HostClaims {
    hosts: std::sync::Mutex<std::collections::HashMap<uuid::Uuid, std::sync::Weak<Notify>>>,
    waiting: std::sync::atomic::AtomicUsize,
}

/// Counts one host with free capacity waiting for new runs while alive.
pub struct Waiting<'a>(&'a HostClaims);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0
            .waiting
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

impl HostClaims {
    /// The wake-up of `host`'s claims (one per host, shared while any
    /// claim of that host waits).
    pub fn listen(&self, host: uuid::Uuid) -> Arc<Notify> {
        let mut hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = hosts.get(&host).and_then(std::sync::Weak::upgrade) {
            return n;
        }
        if hosts.len() >= 64 && hosts.len().is_power_of_two() {
            hosts.retain(|_, w| w.strong_count() > 0);
        }
        let n = Arc::new(Notify::new());
        hosts.insert(host, Arc::downgrade(&n));
        n
    }

    /// Wakes `host`'s waiting claims: one of its runs ended, so it has
    /// capacity again.
    pub fn freed(&self, host: uuid::Uuid) {
        let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = hosts.get(&host).and_then(std::sync::Weak::upgrade) {
            n.notify_waiters();
        }
    }

    pub fn waiting(&self) -> Waiting<'_> {
        self.waiting
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Waiting(self)
    }

    fn waiting_now(&self) -> usize {
        self.waiting.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Runs created by one batch from which [`Ctx::created_runs`] refreshes
/// the planner's statistics.
pub const BULK_RUNS: usize = 500;

impl Ctx {
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, thresholds: Thresholds) -> Self {
        Ctx::with_bus(store, clock, thresholds, EventBus::default())
    }

    /// A context over a given bus (tests use a tiny broadcast capacity).
    pub fn with_bus(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        thresholds: Thresholds,
        bus: EventBus,
    ) -> Self {
        Ctx {
            store,
            metrics: Arc::new(Metrics::new(&bus)),
            bus,
            thresholds,
            wakeups: Wakeups::default(),
            observation: Arc::new(Observation {
                since: Mutex::new(clock.now()),
                blind: AtomicBool::new(false),
            }),
            clock,
            fence: None,
            prices: Arc::new(PriceTable::default()),
            webhooks: Arc::new(WebhookSettings::default()),
            secrets: Arc::new(Keyring::ephemeral()),
        }
    }

    /// This context with its commits fenced by `fence` (the loops').
    pub fn fenced(&self, fence: Arc<Fence>) -> Ctx {
        Ctx {
            fence: Some(fence),
            ..self.clone()
        }
    }

    /// `n` runs became claimable (created, requeued, released): wakes `n`
    /// of the long-poll claims of hosts with free capacity — each claims
    /// at least one — or all of them when there are fewer than 4n, or when
    /// a run is `targeted` (a woken host may not be one it can run on).
    pub fn runs_claimable(&self, n: usize, targeted: bool) {
        if n == 0 {
            return;
        }
        // A few spare wake-ups per run: a woken claim may lose the run to
        // another host's tick, or time out as it wakes.
        if targeted || n.saturating_mul(4) >= self.wakeups.host_claims.waiting_now() {
            self.wakeups.claimable.notify_waiters();
        } else {
            for _ in 0..n {
                self.wakeups.claimable.notify_one();
            }
        }
    }

    /// A host may take runs it could not before (registered, back online,
    /// enabled, relabelled or resized): every waiting claim looks again,
    /// since which pending runs it now matches is the claim's to find.
    /// (Workers claim only when woken since they watch; the
    /// timeout sweep wakes claims for runs left unclaimed, too.)
    pub fn host_may_take_runs(&self) {
        self.wakeups.claimable.notify_waiters();
    }

    /// A run on `host` ended: its own long-poll claims may claim again.
    pub fn host_freed(&self, host: uuid::Uuid) {
        self.wakeups.host_claims.freed(host);
    }

    /// After a committed batch created `n` runs: a bulk (at least
    /// [`BULK_RUNS`]) refreshes the planner's statistics of the run queue
    /// in the background ([`pam_store::Store::refresh_statistics`]), so
    /// claims do not run on a plan made for an empty queue.
    pub fn created_runs(&self, n: usize) {
        if n < BULK_RUNS {
            return;
        }
        let store = self.store.clone();
        tokio::spawn(async move {
            if let Err(e) = store.refresh_statistics().await {
                tracing::warn!(error = %e, "refreshing the run queue's statistics failed");
            }
        });
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Since when this pamd has observed the fleet (see [`Observation`]):
    /// a host is silent only when `now - max(last_seen_at, observing_since)
    /// > offline_after`.
    pub fn observing_since(&self) -> DateTime<Utc> {
        *self.observation.since.lock().expect("observation lock")
    }

    /// Whether the fleet has had a full offline window to report since
    /// [`Ctx::observing_since`]: before that, a host's silence and a
    /// pending run's wait say nothing about the workers (OQ-15).
    pub fn observed_a_full_window(&self, now: DateTime<Utc>) -> bool {
        now - self.observing_since() > self.offline_window()
    }

    /// `offline_after` as a chrono duration.
    pub fn offline_window(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.thresholds.offline_after).expect("threshold in range")
    }

    /// The loops could not reach the database: what the workers reported
    /// meanwhile was lost, so the observation starts again at the next
    /// pass ([`Ctx::begin_observing_pass`]).
    pub fn lost_sight(&self) {
        if !self.observation.blind.swap(true, Ordering::SeqCst) {
            tracing::warn!(
                "the loops cannot reach the database; hosts get a full offline window once they can again"
            );
        }
    }

    /// Called at the start of every loop pass: after [`Ctx::lost_sight`],
    /// the observation starts again now.
    pub fn begin_observing_pass(&self, now: DateTime<Utc>) {
        if self.observation.blind.load(Ordering::SeqCst) {
            *self.observation.since.lock().expect("observation lock") = now;
        }
    }

    /// Called after a pass that reached the database.
    pub fn pass_succeeded(&self) {
        if self.observation.blind.swap(false, Ordering::SeqCst) {
            tracing::info!(
                since = %crate::clock::ts(self.observing_since()),
                "the loops reach the database again; host liveness and dispatch timeouts count from now"
            );
        }
    }

    /// Commits `tx` and has the events it journaled published — only
    /// after the commit succeeded (no phantom events), and by the journal
    /// reader ([`crate::events::reader`]), in the journal's one order: a
    /// transaction that commits later may take an earlier place, so a
    /// commit never publishes its own events. A fenced context commits
    /// only while its leader lease is at its term
    /// ([`pam_store::StoreError::Fenced`] otherwise, nothing written).
    ///
    /// Before committing, the transaction's events are matched
    /// against the webhooks and their deliveries queued in it
    /// ([`webhooks::enqueue`]) — the one place events meet webhooks, so a
    /// committed event is never without its deliveries.
    pub async fn commit(&self, mut tx: Box<dyn Tx>) -> StoreResult<()> {
        if let Some(f) = &self.fence {
            tx.fence(f.lease, f.term()).await?;
        }
        if !tx.has_events() {
            tx.commit().await?;
            return Ok(());
        }
        let queued = webhooks::enqueue(tx.as_mut(), self.now(), &self.webhooks.link_base).await?;
        // Before the commit: the reader starts at the journal's end, read
        // before any of this process's commits (so after none of them).
        self.bus.start(&self.store, Some(tx.as_mut())).await?;
        let seqs: Vec<i64> = tx.pending_events().seqs().collect();
        self.bus.expect_local(seqs.iter().copied());
        let events = match tx.commit().await {
            Ok(events) => events,
            Err(e) => {
                // Rolled back (or, when the connection broke, unknown: then
                // committed events are merely also handed to the `on_read`
                // hook, a spurious wake-up).
                self.bus.forget_local(seqs.into_iter());
                return Err(e);
            }
        };
        if queued > 0 {
            self.wakeups.deliveries.notify_one();
        }
        self.bus.journaled.inc_by(events.len() as u64);
        self.bus.wake();
        Ok(())
    }
}
