//! The runtime context the API, apply and the loops share: the store, the
//! injected clock, the event bus, metrics, thresholds and the wake-ups —
//! and [`Ctx::commit`], the one way a transaction is committed and its
//! events published.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pam_store::{Store, StoreResult, Tx};
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::events::EventBus;
use crate::metrics::Metrics;

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
            metrics: Arc::new(Metrics::new(&bus)),
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
