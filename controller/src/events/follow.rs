//! Events across pamd replicas (issue 15): every journaling commit
//! notifies (PostgreSQL NOTIFY, [`pam_store::Store::journal_wakeups`]);
//! each replica, woken, reads the journal after the highest seq it
//! published and publishes what other replicas committed to its own SSE
//! subscribers — in seq order, since seqs commit in order (the journal's
//! lock) and this runs under the bus's publish-order lock like a local
//! commit. The journal is the truth; a lost notification only delays
//! (a pass also runs every [`SAFETY`]).

use std::sync::Arc;
use std::time::Duration;

use pam_store::{Store, StoreResult};
use tokio_util::sync::CancellationToken;

use super::EventBus;

/// How often the journal is read without a wake-up.
pub const SAFETY: Duration = Duration::from_secs(2);
/// Events read per query.
const PAGE: i64 = 1000;

/// Follows the journal until `stop`, if other processes can share the
/// store (else returns at once). What it reads goes through the bus's
/// [`EventBus::on_read`] hook.
pub async fn follow(
    store: Arc<dyn Store>,
    bus: EventBus,
    stop: CancellationToken,
) -> StoreResult<()> {
    let Some(mut wakeups) = store.journal_wakeups().await? else {
        return Ok(());
    };
    // Only what commits from now on: the history is the journal's, read
    // by streams that resume.
    {
        // Read before the order lock: whoever holds that lock never waits
        // for a pool connection (see [`catch_up`]).
        let mut tx = store.begin().await?;
        let high = tx.event_high_water().await?;
        drop(tx);
        let _order = bus.order_lock().await;
        bus.skip_to(high);
        bus.following
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            woke = wakeups.recv() => if woke.is_none() { return Ok(()) },
            _ = tokio::time::sleep(SAFETY) => {}
        }
        if let Err(e) = catch_up(store.as_ref(), &bus).await {
            tracing::debug!(error = %e, "reading the journal after other replicas failed; retrying");
        }
    }
}

/// Publishes what was committed after the highest seq published. Read
/// outside the bus's order lock, published under it: a local commit waits
/// for that lock holding its connection (and the journal's lock), so a
/// holder that waited for a connection could starve the pool (issue 20).
/// What a local commit published meanwhile is dropped by
/// [`EventBus::publish_read`] (seqs at or below the highest published).
async fn catch_up(store: &dyn Store, bus: &EventBus) -> StoreResult<()> {
    loop {
        let mut tx = store.begin().await?;
        let events = tx.events_after(bus.published_upto(), PAGE).await?;
        drop(tx);
        let full = events.len() as i64 == PAGE;
        if events.is_empty() {
            return Ok(());
        }
        let _order = bus.order_lock().await;
        bus.publish_read(events);
        if !full {
            return Ok(());
        }
    }
}
