//! Events across pamd replicas: every journaling commit
//! notifies (PostgreSQL NOTIFY, [`pam_store::Store::journal_wakeups`]);
//! each replica, woken, has its journal reader ([`super::reader`]) read
//! after what it published, so other replicas' commits reach its own SSE
//! subscribers in the journal's one order, interleaved with its own. The
//! journal is the truth; a lost notification only delays (a pass also
//! runs every [`SAFETY`]).

use std::sync::Arc;
use std::time::Duration;

use pam_store::{Store, StoreResult};
use tokio_util::sync::CancellationToken;

use super::EventBus;

/// How often the journal is read without a wake-up.
pub const SAFETY: Duration = Duration::from_secs(2);

/// Follows the journal until `stop`, if other processes can share the
/// store (else returns at once). What the reader publishes of theirs goes
/// through the bus's [`EventBus::on_read`] hook.
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
    bus.start(&store, None).await?;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return Ok(()),
            woke = wakeups.recv() => if woke.is_none() { return Ok(()) },
            _ = tokio::time::sleep(SAFETY) => {}
        }
        bus.wake();
    }
}
