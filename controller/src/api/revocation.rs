//! Ending what a revoked token holds open: event streams and attach leases.
//!
//! A REST call looks its token up on every request, so a revoked token is
//! refused at once. An SSE stream or an attach lease outlives the request
//! that authenticated it: each holds a [`Hold`] on its token here, and the
//! hold reports the token revoked when either
//!
//! - the revoke handler of this pamd signals it ([`Revocations::revoke`]):
//!   at once; or
//! - the token's re-check finds it revoked (or gone) in the database: at
//!   most [`RECHECK`] later. There is one re-check per token, not per
//!   stream, running only while something holds the token; since it reads
//!   the database, a revocation made through another pamd replica sharing
//!   it ends this replica's streams and leases too.
//!
//! # Caveats
//! - While the database does not answer, the re-check keeps what it has
//!   (a stream is not ended because PostgreSQL is restarting); the next
//!   answer decides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pam_store::prelude::*;
use pam_store::StoreResult;
use tokio::sync::Notify;
use tokio::task::AbortHandle;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use uuid::Uuid;

/// How often a held token is looked up again.
pub const RECHECK: Duration = Duration::from_secs(1);

/// The tokens that streams and leases hold, shared by the API handlers.
#[derive(Clone, Default)]
pub struct Revocations {
    tokens: Arc<Mutex<HashMap<Uuid, Watched>>>,
    /// Signalled (one stored permit) when a held token is found revoked,
    /// so whoever releases leases looks now.
    revoked_any: Arc<Notify>,
}

struct Watched {
    revoked: CancellationToken,
    holders: usize,
    recheck: Option<AbortHandle>,
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
    /// Holds the token `token_id` (whose fingerprint is `fingerprint`) for
    /// something that stays open; starts the token's re-check if nothing
    /// held it yet. Must be called inside the tokio runtime.
    pub fn hold(&self, store: &Arc<dyn Store>, token_id: Uuid, fingerprint: &str) -> Hold {
        self.hold_checked(
            token_id,
            Check::Token {
                store: store.clone(),
                fingerprint: fingerprint.to_string(),
            },
        )
    }

    /// Holds a dashboard session (issue 34) for a stream: it ends at
    /// logout ([`Revocations::revoke`] with the session's id) or, found by
    /// the same re-check, when the session expires.
    pub fn hold_session(
        &self,
        id: Uuid,
        sessions: super::oidc::session::Sessions,
        clock: crate::clock::SharedClock,
    ) -> Hold {
        self.hold_checked(id, Check::Session { sessions, clock })
    }

    fn hold_checked(&self, token_id: Uuid, check: Check) -> Hold {
        let mut tokens = self.tokens.lock().expect("revocations lock");
        let w = tokens.entry(token_id).or_insert_with(|| Watched {
            revoked: CancellationToken::new(),
            holders: 0,
            recheck: None,
        });
        w.holders += 1;
        if w.recheck.is_none() && !w.revoked.is_cancelled() {
            let task = tokio::spawn(recheck(self.clone(), check, token_id, w.revoked.clone()));
            w.recheck = Some(task.abort_handle());
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
        let tokens = self.tokens.lock().expect("revocations lock");
        if let Some(w) = tokens.get(&token_id) {
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
        self.tokens.lock().expect("revocations lock").len()
    }

    fn let_go(&self, token_id: Uuid) {
        let mut tokens = self.tokens.lock().expect("revocations lock");
        let Some(w) = tokens.get_mut(&token_id) else {
            return;
        };
        w.holders -= 1;
        if w.holders == 0 {
            if let Some(task) = w.recheck.take() {
                task.abort();
            }
            tokens.remove(&token_id);
        }
    }
}

/// Looks the token up every [`RECHECK`] until it is revoked or nothing
/// holds it (the task is aborted then).
async fn recheck(registry: Revocations, check: Check, token_id: Uuid, revoked: CancellationToken) {
    let mut every = tokio::time::interval(RECHECK);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = revoked.cancelled() => return,
            _ = every.tick() => {}
        }
        let alive = match &check {
            Check::Token { store, fingerprint } => live(store.as_ref(), fingerprint).await,
            Check::Session { sessions, clock } => Ok(sessions.live(token_id, clock.now())),
        };
        match alive {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(%token_id, "token revoked: ending its streams and leases");
                registry.revoke(token_id);
                return;
            }
            Err(e) => tracing::debug!(%token_id, error = %e, "token re-check failed; trying again"),
        }
    }
}

/// What a hold's re-check looks up.
enum Check {
    Token {
        store: Arc<dyn Store>,
        fingerprint: String,
    },
    Session {
        sessions: super::oidc::session::Sessions,
        clock: crate::clock::SharedClock,
    },
}

/// Whether the token with this fingerprint exists and is not revoked.
async fn live(store: &dyn Store, fingerprint: &str) -> StoreResult<bool> {
    let mut tx = store.begin().await?;
    let t = tx.get_token_by_fingerprint(fingerprint).await?;
    Ok(t.is_some_and(|t| t.revoked_at.is_none()))
}
