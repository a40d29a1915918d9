//! Ending what a revoked token holds open: event streams and attach leases.
//!
//! A REST call looks its token up on every request, so a revoked token is
//! refused at once. An SSE stream or an attach lease outlives the request
//! that authenticated it: each holds a [`Hold`] on its token here, and the
//! hold reports the token revoked when either
//!
//! - the revoke handler of this pamd signals it ([`Revocations::revoke`]):
//!   at once; or
//! - the re-check finds it revoked (or gone) in the database: at most
//!   [`RECHECK`] later. One re-check looks up every held token with one
//!   statement (a task and a transaction per token every second
//!   were 10,000 transactions a second for a fleet of 10,000 watching
//!   workers, most of an idle pamd's CPU and its database pool), running
//!   only while something is held; since it reads the database, a
//!   revocation made through another pamd replica sharing it ends this
//!   replica's streams and leases too.
//!
//! A worker token held by its host's watch stream also authenticates
//! that worker's other requests (heartbeats, desired sets, signals)
//! without a database read ([`Revocations::held_worker`]: at
//! 10,000 watching hosts those reads were ~500 a second, and under load
//! each waited for the pool before its heartbeat could). It answers only
//! while the token is held, not revoked, and found live by a lookup that
//! started at most [`FRESH`] ago, so it is as current as the stream the
//! worker already holds open: a revocation through this pamd refuses the
//! next request at once; one through another replica, within a re-check
//! (as it ends this replica's streams). Operator tokens are always read.
//!
//! # Caveats
//! - While the database does not answer, the re-check keeps what it has
//!   (a stream is not ended because PostgreSQL is restarting); the next
//!   answer decides. A held worker token stops authenticating from memory
//!   [`FRESH`] after the last lookup that answered, so its requests go to
//!   the database (and fail with it) as any other's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pam_store::prelude::*;
use pam_store::StoreResult;
use tokio::sync::Notify;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use uuid::Uuid;

use crate::rules::tokens;

/// How often a held token is looked up again.
pub const RECHECK: Duration = Duration::from_secs(1);
/// How old the last lookup that found a held worker token live may be for
/// it to authenticate requests from memory: a re-check and the time one
/// lookup may take under load.
pub const FRESH: Duration = Duration::from_secs(3);

/// The tokens that streams and leases hold, shared by the API handlers.
#[derive(Clone, Default)]
pub struct Revocations {
    tokens: Arc<Mutex<Held>>,
    /// Signalled (one stored permit) when a held token is found revoked,
    /// so whoever releases leases looks now.
    revoked_any: Arc<Notify>,
    /// The re-check task runs (it ends when nothing is held).
    checking: Arc<AtomicBool>,
}

/// The held tokens by id, and the held worker tokens by fingerprint.
#[derive(Default)]
struct Held {
    by_id: HashMap<Uuid, Watched>,
    workers: HashMap<String, Uuid>,
}

struct Watched {
    revoked: CancellationToken,
    /// `revoked` was cancelled (read without the token's own lock: the
    /// re-check looks at every held token each second).
    dead: bool,
    holders: usize,
    check: Check,
    /// When the last lookup that found the token live started (the
    /// authentication of the request that held it, or a re-check).
    verified: tokio::time::Instant,
    /// A worker token: what authenticates its requests from memory.
    worker: Option<HeldWorker>,
}

struct HeldWorker {
    fingerprint: String,
    host: String,
    /// The last use recorded through this hold (None: not yet).
    last_used: Option<chrono::DateTime<chrono::Utc>>,
}

/// Something open under a token (a stream, a lease). Dropping it lets go;
/// the token's re-check stops with its last hold.
pub struct Hold {
    registry: Revocations,
    token_id: Uuid,
    revoked: CancellationToken,
}

impl Hold {
    /// Whether the token has been revoked.
    pub fn is_revoked(&self) -> bool {
        self.revoked.is_cancelled()
    }

    /// Completes when the token is revoked.
    pub fn revoked(&self) -> WaitForCancellationFutureOwned {
        self.revoked.clone().cancelled_owned()
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.registry.let_go(self.token_id);
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("token_id", &self.token_id)
            .field("revoked", &self.is_revoked())
            .finish()
    }
}

impl Revocations {
    /// Holds the token `token_id` for something that stays open; starts
    /// the re-check if nothing was held. Must be called inside the tokio
    /// runtime. (The re-check looks tokens up by id: the fingerprint is
    /// not needed any more.)
    pub fn hold(&self, store: &Arc<dyn Store>, token_id: Uuid, _fingerprint: &str) -> Hold {
        self.hold_checked(
            token_id,
            Check::Token {
                store: store.clone(),
            },
            None,
        )
    }

    /// Holds worker token `token_id` (fingerprint `fingerprint`, bound to
    /// `host`), just authenticated, for its host's watch: while held it
    /// also authenticates the worker's requests ([`Self::held_worker`]).
    pub fn hold_worker(
        &self,
        store: &Arc<dyn Store>,
        token_id: Uuid,
        fingerprint: &str,
        host: &str,
    ) -> Hold {
        self.hold_checked(
            token_id,
            Check::Token {
                store: store.clone(),
            },
            Some(HeldWorker {
                fingerprint: fingerprint.to_string(),
                host: host.to_string(),
                last_used: None,
            }),
        )
    }

    /// The held worker token with fingerprint `fp`, when it was found live
    /// at most [`FRESH`] ago and not revoked since: its id, its host, and
    /// whether its use at `now` is to be recorded (`lastUsedAt`, at most
    /// once per [`tokens::LAST_USED_GRANULARITY`] through the hold). None:
    /// look the token up.
    pub fn held_worker(
        &self,
        fp: &str,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Option<(Uuid, String, bool)> {
        let mut held = self.tokens.lock().expect("revocations lock");
        let id = *held.workers.get(fp)?;
        let w = held.by_id.get_mut(&id)?;
        if w.dead || w.verified.elapsed() > FRESH {
            return None;
        }
        let worker = w.worker.as_mut()?;
        let stale = tokens::last_used_is_stale(worker.last_used, now);
        if stale {
            worker.last_used = Some(now);
        }
        Some((id, worker.host.clone(), stale))
    }

    /// Holds a dashboard session for a stream: it ends at
    /// logout ([`Revocations::revoke`] with the session's id) or, found by
    /// the same re-check, when the session expires.
    pub fn hold_session(
        &self,
        id: Uuid,
        sessions: crate::api::access::oidc::session::Sessions,
        clock: crate::clock::SharedClock,
    ) -> Hold {
        self.hold_checked(id, Check::Session { sessions, clock }, None)
    }

    fn hold_checked(&self, token_id: Uuid, check: Check, worker: Option<HeldWorker>) -> Hold {
        let mut tokens = self.tokens.lock().expect("revocations lock");
        if let Some(h) = &worker {
            tokens.workers.insert(h.fingerprint.clone(), token_id);
        }
        let w = tokens.by_id.entry(token_id).or_insert_with(|| Watched {
            revoked: CancellationToken::new(),
            dead: false,
            holders: 0,
            check,
            verified: tokio::time::Instant::now(),
            worker: None,
        });
        w.holders += 1;
        if w.worker.is_none() {
            w.worker = worker;
        }
        if !self.checking.swap(true, Ordering::SeqCst) {
            tokio::spawn(recheck(self.clone()));
        }
        Hold {
            registry: self.clone(),
            token_id,
            revoked: w.revoked.clone(),
        }
    }

    /// The token was revoked: every hold on it reports so now. A token
    /// nothing holds needs nothing (the next request is refused anyway).
    pub fn revoke(&self, token_id: Uuid) {
        let mut tokens = self.tokens.lock().expect("revocations lock");
        if let Some(w) = tokens.by_id.get_mut(&token_id) {
            w.dead = true;
            w.revoked.cancel();
            self.revoked_any.notify_one();
        }
    }

    /// Completes after a held token was found revoked (at once when that
    /// happened since the last call).
    pub async fn revoked_any(&self) {
        self.revoked_any.notified().await;
    }

    /// How many tokens are held (and re-checked) now.
    pub fn held_tokens(&self) -> usize {
        self.tokens.lock().expect("revocations lock").by_id.len()
    }

    fn let_go(&self, token_id: Uuid) {
        let mut tokens = self.tokens.lock().expect("revocations lock");
        let Some(w) = tokens.by_id.get_mut(&token_id) else {
            return;
        };
        w.holders -= 1;
        if w.holders == 0 {
            if let Some(h) = tokens.by_id.remove(&token_id).and_then(|w| w.worker) {
                tokens.workers.remove(&h.fingerprint);
            }
        }
    }
}

/// Every [`RECHECK`], looks up every held token that is not revoked yet
/// (one statement per store for all of them) and reports those revoked or
/// gone; ends when nothing is held (the next hold starts it again).
async fn recheck(registry: Revocations) {
    let mut every = tokio::time::interval(RECHECK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        every.tick().await;
        // What to look up, read under the lock, looked up outside it.
        let mut stores: Vec<(Arc<dyn Store>, Vec<Uuid>)> = Vec::new();
        let mut dead = Vec::new();
        {
            let tokens = registry.tokens.lock().expect("revocations lock");
            if tokens.by_id.is_empty() {
                // Under the lock a hold takes: the next hold starts a new
                // re-check.
                registry.checking.store(false, Ordering::SeqCst);
                return;
            }
            for (id, w) in tokens.by_id.iter().filter(|(_, w)| !w.dead) {
                match &w.check {
                    Check::Token { store } => {
                        match stores.iter_mut().find(|(s, _)| Arc::ptr_eq(s, store)) {
                            Some((_, ids)) => ids.push(*id),
                            None => stores.push((store.clone(), vec![*id])),
                        }
                    }
                    Check::Session { sessions, clock } => {
                        if !sessions.live(*id, clock.now()) {
                            dead.push(*id);
                        }
                    }
                }
            }
        }
        for (store, ids) in stores {
            let started = tokio::time::Instant::now();
            match dead_of(store.as_ref(), &ids).await {
                Ok(gone) => {
                    let mut tokens = registry.tokens.lock().expect("revocations lock");
                    for id in ids.iter().filter(|id| !gone.contains(id)) {
                        if let Some(w) = tokens.by_id.get_mut(id) {
                            w.verified = w.verified.max(started);
                        }
                    }
                    drop(tokens);
                    dead.extend(gone);
                }
                Err(e) => tracing::debug!(error = %e, "token re-check failed; trying again"),
            }
        }
        for token_id in dead {
            tracing::info!(%token_id, "token revoked: ending its streams and leases");
            registry.revoke(token_id);
        }
    }
}

/// What a hold's re-check looks up.
enum Check {
    Token {
        store: Arc<dyn Store>,
    },
    Session {
        sessions: crate::api::access::oidc::session::Sessions,
        clock: crate::clock::SharedClock,
    },
}

/// Those of `ids` that are revoked or gone (nearly always none).
async fn dead_of(store: &dyn Store, ids: &[Uuid]) -> StoreResult<std::collections::HashSet<Uuid>> {
    let mut tx = store.begin_priority().await?;
    Ok(tx.dead_tokens(ids).await?.into_iter().collect())
}
