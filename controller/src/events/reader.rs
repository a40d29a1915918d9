//! The journal reader: the one way committed events reach this
//! process's subscribers.
//!
//! Journaling transactions commit concurrently (no lock orders them), so
//! the order of commits is not seq order, and a commit finishing here says
//! nothing about one still in flight on another connection or replica
//! that will take an earlier place in the journal's order
//! ([`pam_store::Position`]). Publishing a commit's own events right after
//! it would let a stream pass that earlier place, and skip it for ever.
//! So nothing is published at commit: [`crate::ctx::Ctx::commit`] wakes
//! this reader, which reads the journal after the position it published up
//! to — only finished transactions, in (xid, seq) order — and publishes
//! that, one broadcast message per transaction. Other replicas' commits
//! wake it too ([`super::follow`]: NOTIFY), and while committed events
//! wait behind a transaction in flight (one that may end without a
//! notification: a rollback, a write that journals nothing) it reads
//! again on a short backoff rather than at the follower's safety pass.
//!
//! # Where it starts
//! At the journal's end when it is first needed, read *before* any commit
//! of this process ([`EventBus::start`] is awaited by every commit, and by
//! a stream before it subscribes): every later commit lies after it.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use pam_store::{Position, Store, StoreResult, Tx};
use tokio::sync::{Notify, OnceCell};

use super::EventBus;

/// Events read per query.
const PAGE: i64 = 1000;
/// The first and the longest pause while committed events wait behind a
/// transaction in flight.
const HELD_FIRST: Duration = Duration::from_millis(1);
const HELD_MAX: Duration = Duration::from_millis(50);

/// The reader's state, shared by every clone of the bus.
#[derive(Default)]
pub(super) struct Journal {
    /// The position published up to. Locked while publishing and while a
    /// stream subscribes ([`EventBus::subscribe_at`]).
    position: Mutex<Position>,
    /// Set once the start position is read and the reader runs.
    started: OnceCell<()>,
    wake: Notify,
    /// Seqs this process committed and the reader has not published yet:
    /// the `on_read` hook is for other processes' events only.
    local: Mutex<HashSet<i64>>,
}

impl Journal {
    pub(super) fn lock_position(&self) -> MutexGuard<'_, Position> {
        self.position.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn lock_local(&self) -> MutexGuard<'_, HashSet<i64>> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl EventBus {
    /// Starts the reader once: from the journal's end, read in `tx` when
    /// given (a commit's own transaction: no second connection while it
    /// holds one, and MemStore's transaction holds the whole store), else
    /// in a transaction of its own. Every later call returns at once; a
    /// concurrent one waits for the first.
    pub async fn start(&self, store: &Arc<dyn Store>, tx: Option<&mut dyn Tx>) -> StoreResult<()> {
        self.journal
            .started
            .get_or_try_init(|| async {
                let end = match tx {
                    Some(tx) => tx.journal_end().await?,
                    None => store.begin().await?.journal_end().await?,
                };
                *self.journal.lock_position() = end;
                tokio::spawn(run(self.clone(), store.clone()));
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// Whether the reader runs.
    pub fn started(&self) -> bool {
        self.journal.started.initialized()
    }

    /// Makes the reader read the journal (a commit here, a notification
    /// from another replica). Wake-ups coalesce.
    pub fn wake(&self) {
        self.journal.wake.notify_one();
    }

    /// Called before this process commits these seqs: when the reader
    /// publishes them, they are not handed to the `on_read` hook.
    pub fn expect_local(&self, seqs: impl Iterator<Item = i64>) {
        self.journal.lock_local().extend(seqs);
    }

    /// The commit of [`EventBus::expect_local`]'s seqs failed.
    pub fn forget_local(&self, seqs: impl Iterator<Item = i64>) {
        let mut local = self.journal.lock_local();
        for s in seqs {
            local.remove(&s);
        }
    }
}

/// Reads and publishes until pamd shuts down.
async fn run(bus: EventBus, store: Arc<dyn Store>) {
    let shutdown = bus.on_shutdown();
    tokio::pin!(shutdown);
    let mut pause = HELD_FIRST;
    loop {
        let held = match drain(&bus, store.as_ref()).await {
            Ok(held) => held,
            Err(e) => {
                tracing::debug!(error = %e, "reading the journal failed; retrying");
                pause = Duration::from_millis(500);
                true
            }
        };
        if !held {
            pause = HELD_FIRST;
        }
        tokio::select! {
            _ = &mut shutdown => return,
            _ = bus.journal.wake.notified() => {}
            _ = tokio::time::sleep(pause), if held => pause = (pause * 2).min(HELD_MAX),
        }
    }
}

/// Publishes every page after the published position; whether committed
/// events still wait behind a transaction in flight.
async fn drain(bus: &EventBus, store: &dyn Store) -> StoreResult<bool> {
    loop {
        let page = store.read_journal(bus.published(), PAGE).await?;
        let full = page.events.len() as i64 == PAGE;
        bus.publish_page(page.events);
        if !full {
            return Ok(page.held);
        }
    }
}
