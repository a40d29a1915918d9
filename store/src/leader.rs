//! Leader leases (`leader_leases`): which pamd replica runs the loops.
//! A lease is held by one process until it expires; renewing
//! keeps its `term`, a takeover by another process bumps it. The term is
//! the fencing token: [`LeaderTx::fence`] in a loop's transaction makes its
//! commit fail once another process took over, and makes a takeover wait
//! for a fenced transaction that is already committing.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::StoreResult;

/// One lease.
#[derive(Debug, Clone, PartialEq)]
pub struct Lease {
    pub name: String,
    /// The replica holding it (stable across its restarts).
    pub holder: String,
    /// The holding process.
    pub instance: Uuid,
    pub term: i64,
    pub renewed_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Leader leases. Part of every [`crate::Tx`].
#[async_trait]
pub trait LeaderTx: Send {
    /// Takes or renews lease `name` for process `instance` of replica
    /// `holder` until `now + ttl`, and returns its term; `None` while
    /// another process holds it unexpired. The same process renews (same
    /// term); another process takes it when it expired, or at once when it
    /// is the same replica's (a restart: its old process is gone) — with
    /// the term bumped.
    async fn lead(
        &mut self,
        name: &str,
        holder: &str,
        instance: Uuid,
        ttl: chrono::Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<i64>>;
    /// Gives the lease up (expires it now) if `instance` holds it.
    async fn resign(&mut self, name: &str, instance: Uuid, now: DateTime<Utc>) -> StoreResult<()>;
    /// The fence: Ok when lease `name` is still at `term` — and it stays so
    /// until this transaction ends (a takeover waits for it) — else
    /// [`crate::StoreError::Fenced`].
    async fn fence(&mut self, name: &str, term: i64) -> StoreResult<()>;
    async fn get_lease(&mut self, name: &str) -> StoreResult<Option<Lease>>;
}
