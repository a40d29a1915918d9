//! The controller loops. Each is level-triggered (kube-rs style): it is told
//! nothing about why it runs, reads the rows that need action (index-driven,
//! never the whole history), and acts idempotently through guarded writes.
//! A wake-up (a write, a worker report) only makes it sooner; the periodic
//! resync makes it correct. Time comes from the injected [`Clock`].
//!
//! One file per loop: [`dispatch`] (claims, eligibility), [`timeout`]
//! (dispatch timeout, pending stops), [`restart`] (requeue with backoff),
//! [`liveness`] (offline hosts, host_lost), [`identity`] (OQ-14),
//! [`integrity`], [`retention`]; [`runs`] holds the failure rule they share,
//! and [`ingest`] applies worker signals.

pub mod dispatch;
pub mod identity;
pub mod ingest;
pub mod integrity;
pub mod liveness;
pub mod restart;
pub mod retention;
pub mod runs;
pub mod timeout;

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::events::EventBus;
use crate::store::{Store, StoreResult, Tx};

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
    pub metrics: Arc<crate::metrics::Metrics>,
    pub thresholds: Thresholds,
    /// Signalled when a run may have become claimable (new run, requeue,
    /// host change), waking long-polling claims.
    pub claimable: Arc<Notify>,
    /// Signalled to run the loops sooner than the resync period.
    pub wake: Arc<Notify>,
}

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
            clock,
            metrics: Arc::new(crate::metrics::Metrics::new(&bus)),
            bus,
            thresholds,
            claimable: Arc::new(Notify::new()),
            wake: Arc::new(Notify::new()),
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// Commits `tx` and publishes the events it journaled — only after
    /// the commit succeeded (no phantom events). Journaling commits hold
    /// the bus's order lock from commit to publish: seqs already commit in
    /// order (the journal's advisory lock), and this keeps them published
    /// in that order, so a resuming reader never skips a late seq.
    pub async fn commit(&self, tx: Box<dyn Tx>) -> StoreResult<()> {
        if !tx.has_events() {
            tx.commit().await?;
            return Ok(());
        }
        let _order = self.bus.order_lock().await;
        let events = tx.commit().await?;
        self.bus.publish(events);
        Ok(())
    }
}

/// What one pass of the loops did (for tests and loop-duration metrics).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    pub hosts_offline: usize,
    pub runs_host_lost: usize,
    pub runs_timed_out: usize,
    pub runs_stopped: usize,
    pub runs_requeued: usize,
}

/// One pass of every periodic loop, in dependency order: liveness first (it
/// fails runs the restart loop then requeues), then timeouts and restarts.
pub async fn pass(ctx: &Ctx) -> anyhow::Result<Pass> {
    let mut p = Pass::default();
    let started = std::time::Instant::now();
    let (offline, lost) = liveness::sweep(ctx).await?;
    ctx.metrics.loop_took("liveness", started);
    p.hosts_offline = offline;
    p.runs_host_lost = lost;
    let started = std::time::Instant::now();
    let (timed_out, stopped) = timeout::sweep(ctx).await?;
    ctx.metrics.loop_took("timeout", started);
    p.runs_timed_out = timed_out;
    p.runs_stopped = stopped;
    let started = std::time::Instant::now();
    p.runs_requeued = restart::sweep(ctx).await?;
    ctx.metrics.loop_took("restart", started);
    if p.runs_requeued > 0 {
        ctx.claimable.notify_waiters();
    }
    Ok(p)
}

/// How often the integrity check runs (its cost is per active run, so it
/// is not part of every pass; only out-of-band SQL can break integrity).
const INTEGRITY_EVERY: chrono::Duration = chrono::Duration::minutes(5);

/// Runs [`pass`] every resync period or on a wake-up, until `shutdown`;
/// the integrity check at start and every few minutes.
pub async fn run_loops(ctx: Ctx, shutdown: tokio_util_like::Shutdown) {
    let mut integrity_due = ctx.now();
    loop {
        if ctx.now() >= integrity_due {
            integrity_due = ctx.now() + INTEGRITY_EVERY;
            let started = std::time::Instant::now();
            if let Err(e) = integrity::sweep(&ctx).await {
                tracing::error!(error = %e, "integrity check failed");
            }
            ctx.metrics.loop_took("integrity", started);
        }
        if let Err(e) = pass(&ctx).await {
            tracing::error!(error = %e, "reconcile pass failed; retrying on the next resync");
        }
        tokio::select! {
            _ = tokio::time::sleep(ctx.thresholds.resync) => {}
            _ = ctx.wake.notified() => {}
            _ = shutdown.wait() => return,
        }
    }
}

/// A tiny shutdown signal (a watch channel), so the loop stops cleanly.
pub mod tokio_util_like {
    use tokio::sync::watch;

    #[derive(Clone)]
    pub struct Shutdown(watch::Receiver<bool>);

    pub struct Trigger(watch::Sender<bool>);

    pub fn channel() -> (Trigger, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (Trigger(tx), Shutdown(rx))
    }

    impl Trigger {
        pub fn fire(&self) {
            let _ = self.0.send(true);
        }
    }

    impl Shutdown {
        pub async fn wait(&self) {
            let mut rx = self.0.clone();
            while !*rx.borrow() {
                if rx.changed().await.is_err() {
                    return;
                }
            }
        }
    }
}

/// `Ok(None)` on a guarded-update conflict: another writer moved the row
/// first, which a level-triggered loop treats as "nothing to do now".
pub(crate) fn ignore_conflict<T>(r: StoreResult<T>) -> StoreResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(crate::store::StoreError::Conflict(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
