//! Idempotency keys: the [`IdempotencyTx`] calls behind pamd's
//! `Idempotency-Key` layer.
//!
//! # Guarantees
//! - One claim per (principal, key) at a time: [`IdempotencyTx::claim_idempotency_key`]
//!   inserts the key or reads what is stored, in one statement each; two
//!   concurrent claims serialize on the primary key and the second sees
//!   the first (in progress, or answered).
//! - An expired key, or a claim in progress older than the lease (its
//!   pamd died before answering), is taken over by the next claim.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::StoreResult;

/// A claim of a key for a request.
#[derive(Debug, Clone, PartialEq)]
pub struct IdempotencyClaim {
    pub principal: String,
    pub key_hash: String,
    pub request_hash: String,
    pub now: DateTime<Utc>,
    /// When the stored answer stops being replayed.
    pub expires_at: DateTime<Utc>,
    /// A claim in progress made before this is abandoned.
    pub stale_before: DateTime<Utc>,
}

/// What a claim found.
#[derive(Debug, Clone, PartialEq)]
pub enum Claimed {
    /// The key is this request's: do the work, then store the answer.
    New,
    /// The same request was answered: replay this.
    Answered {
        status: i32,
        /// None: the answer held a credential and was not stored.
        body: Option<Vec<u8>>,
        content_type: Option<String>,
    },
    /// The same request is in progress (another connection, replica).
    InProgress,
    /// The key was used for a different request.
    Mismatch,
}

/// `idempotency_keys`. Part of every [`crate::Tx`].
#[async_trait]
pub trait IdempotencyTx: Send {
    /// Claims a key for a request (see [`Claimed`]).
    async fn claim_idempotency_key(&mut self, c: &IdempotencyClaim) -> StoreResult<Claimed>;
    /// Stores the answer of a claimed key.
    async fn answer_idempotency_key(
        &mut self,
        principal: &str,
        key_hash: &str,
        status: i32,
        body: Option<&[u8]>,
        content_type: Option<&str>,
    ) -> StoreResult<()>;
    /// Gives a claimed key up (the request failed on the server's side: a
    /// retry does the work).
    async fn release_idempotency_key(&mut self, principal: &str, key_hash: &str)
        -> StoreResult<()>;
    /// Deletes keys expired at `now`; returns how many.
    async fn purge_idempotency_keys(&mut self, now: DateTime<Utc>) -> StoreResult<u64>;
}
