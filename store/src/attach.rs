//! Attach leases (`attach_leases`, `attach_input`): one holder at a time
//! on a live run, expiring `ttl` after it was acquired or last renewed;
//! lines typed under it queue until the run's worker takes them. In the
//! database, so that every pamd replica serves every attach request.

use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::StoreResult;

/// One attach lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachLease {
    pub id: Uuid,
    pub run_id: Uuid,
    pub attempt: i32,
    pub holder: String,
    pub ttl: Duration,
    /// The acquirer's token (its revocation releases the lease).
    pub token_id: Option<Uuid>,
    pub acquired_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// Why a lease operation was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttachRefusal {
    /// Someone else holds an unexpired lease on the run.
    Held(AttachLease),
    /// No unexpired lease with that id on the run.
    NotHeld,
    /// Too much input queued for the run.
    Backlog,
}

/// Attach leases. Part of every [`crate::Tx`].
#[async_trait]
pub trait AttachTx: Send {
    /// Takes the lease on `lease.run_id` unless an unexpired one is held;
    /// returns the expired lease it replaced (to journal its release).
    async fn acquire_attach(
        &mut self,
        lease: &AttachLease,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<Option<AttachLease>, AttachRefusal>>;
    /// Extends an unexpired lease by its TTL from `now`.
    async fn renew_attach(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>>;
    /// Ends an unexpired lease (its queued input is still handed out).
    async fn release_attach(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>>;
    /// Queues a line under an unexpired lease (at most `max` queued).
    async fn push_attach_input(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        text: &str,
        max: usize,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(), AttachRefusal>>;
    /// Takes the queued lines of these runs (run, its current attempt), in
    /// one call: each run's lines of that attempt, in order (other
    /// attempts' are dropped); runs with none are absent.
    async fn take_attach_input(
        &mut self,
        runs: &[(Uuid, i32)],
    ) -> StoreResult<std::collections::HashMap<Uuid, Vec<String>>>;
    /// The unexpired lease on the run.
    async fn get_attach(
        &mut self,
        run_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>>;
    /// Removes and returns the leases expired at `now`.
    async fn take_expired_attach(&mut self, now: DateTime<Utc>) -> StoreResult<Vec<AttachLease>>;
    /// Removes and returns the leases whose token has been revoked.
    async fn take_revoked_attach(&mut self) -> StoreResult<Vec<AttachLease>>;
}
