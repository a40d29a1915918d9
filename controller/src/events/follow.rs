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
        let _order = bus.order_lock().await;
        let mut tx = store.begin().await?;
        let high = tx.event_high_water().await?;
        drop(tx);
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

/// Publishes what other processes committed after the highest seq
/// published and before `before` (a local commit's first seq, about to be
/// published): theirs first, so the local bus stays in seq order. The
/// caller holds [`EventBus::order_lock`].
pub async fn publish_before(store: &dyn Store, bus: &EventBus, before: i64) -> StoreResult<()> {
    while bus.published_upto() < before - 1 {
        let mut tx = store.begin().await?;
        let mut events = tx.events_after(bus.published_upto(), PAGE).await?;
        drop(tx);
        events.retain(|e| e.seq < before);
        if events.is_empty() {
            break;
        }
        bus.publish_read(events);
    }
    Ok(())
}

/// Publishes what was committed after the highest seq published.
async fn catch_up(store: &dyn Store, bus: &EventBus) -> StoreResult<()> {
    let _order = bus.order_lock().await;
    loop {
        let mut tx = store.begin().await?;
        let events = tx.events_after(bus.published_upto(), PAGE).await?;
        drop(tx);
        let full = events.len() as i64 == PAGE;
        if events.is_empty() {
            return Ok(());
        }
        bus.publish_read(events);
        if !full {
            return Ok(());
        }
    }
}
