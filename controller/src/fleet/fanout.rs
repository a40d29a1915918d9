//! The watches' fan-out: published run events wake the watches of the
//! hosts they name ([`crate::ctx::HostWatches`], by host id), from this
//! replica and, through the journal, from the others. A frame says only
//! *that* a host's desired set changed; its worker reads it.

use tokio::sync::broadcast::error::RecvError;

use super::FleetError;
use crate::ctx::Ctx;
use crate::events::topic;

/// The run topics that change the desired set of the host they name.
const WAKES: &[&str] = &[
    topic::RUN_SPAWNING,
    topic::RUN_SIGNAL_RECEIVED,
    topic::RUN_BUDGET_EXCEEDED,
    topic::RUN_FAILED,
    topic::RUN_STOPPED,
    topic::RUN_STOP_REQUESTED,
];

/// Starts, once per pamd, the task that turns published run events into
/// their hosts' watch wake-ups: one lookup per event by the host it names,
/// never a scan of the streams.
pub(super) async fn start(ctx: &Ctx) -> Result<(), FleetError> {
    let watches = ctx.wakeups.watches.clone();
    if watches.fanout.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok(());
    }
    ctx.bus.start(&ctx.store, None).await?;
    if watches
        .fanout
        .swap(true, std::sync::atomic::Ordering::SeqCst)
    {
        return Ok(());
    }
    let mut rx = ctx.bus.subscribe();
    tokio::spawn(async move {
        loop {
            match rx.recv().await {
                Ok(p) => {
                    for e in &p.events {
                        if let Some(h) = e.host_id.filter(|_| WAKES.contains(&e.topic.as_str())) {
                            watches.changed(h);
                        }
                    }
                }
                // Changes were dropped: every stream resyncs.
                Err(RecvError::Lagged(_)) => watches.changed_all(),
                Err(RecvError::Closed) => return,
            }
        }
    });
    Ok(())
}
