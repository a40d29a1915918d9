//! Attach leases (`pamctl attach RUN`): an interactive lease on a live run.
//! One holder at a time; a lease expires `ttl` after it was acquired or last
//! renewed; while held, the holder's typed lines are queued and handed to
//! the run's worker with the desired set (the worker types them into the
//! pane with `tmux send-keys -l`). The pane streams back through the output
//! snapshot cache (`GET …/runs/{name}/output`).
//!
//! Input accepted under a valid lease is delivered even if the lease is
//! released before the worker picks it up.
//!
//! In the database ([`pam_store::AttachTx`]: `attach_leases`,
//! `attach_input`), so every pamd replica answers every attach request —
//! acquire through one, renew, type and release through another — and a
//! pamd restart keeps them (issue 15). Acquire, release and expiry are
//! journaled (`run.lease_acquired`, `run.lease_released` with `reason`),
//! each payload carrying run_id and attempt.
//!
//! A lease records its acquirer's token: revoking the token releases it
//! within a second ([`Leases::take_revoked`], journaled with
//! `reason: revoked`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pam_store::{Store, StoreResult};
use uuid::Uuid;

/// The default lease time-to-live; `pamctl attach` renews well within it.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30);
/// The longest TTL an acquirer may ask for.
pub const MAX_TTL: Duration = Duration::from_secs(600);
/// At most this many input lines wait per run (a worker that is not
/// fetching its desired set must not make the queue grow without bound).
const MAX_QUEUED_INPUT: usize = 1000;

/// One held lease.
pub type Lease = pam_store::AttachLease;
/// Why an operation on a lease was refused.
pub type LeaseError = pam_store::AttachRefusal;

/// The leases, over the store.
#[derive(Clone)]
pub struct Leases {
    store: Arc<dyn Store>,
}

fn expiry(now: DateTime<Utc>, ttl: Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::seconds(30))
}

impl Leases {
    pub fn new(store: Arc<dyn Store>) -> Leases {
        Leases { store }
    }

    /// Acquires the lease on `run_id` for `holder` (acquired with token
    /// `token_id`), unless someone holds an unexpired one. Returns the new
    /// lease and, when an expired lease was replaced, that lease (to
    /// journal its release).
    pub async fn acquire(
        &self,
        run_id: Uuid,
        attempt: i32,
        holder: &str,
        token_id: Option<Uuid>,
        ttl: Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(Lease, Option<Lease>), LeaseError>> {
        let lease = Lease {
            id: Uuid::new_v4(),
            run_id,
            attempt,
            holder: holder.to_string(),
            ttl,
            token_id,
            acquired_at: now,
            expires_at: expiry(now, ttl),
        };
        let mut tx = self.store.begin().await?;
        let r = tx.acquire_attach(&lease, now).await?;
        tx.commit().await?;
        Ok(r.map(|expired| (lease, expired)))
    }

    /// Extends the lease by its TTL from now.
    pub async fn renew(
        &self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<Lease, LeaseError>> {
        let mut tx = self.store.begin().await?;
        let r = tx.renew_attach(run_id, lease_id, now).await?;
        tx.commit().await?;
        Ok(r.ok_or(LeaseError::NotHeld))
    }

    /// Releases the lease. Input accepted while it was held is still
    /// handed out (a `pamctl attach` fed from a pipe sends its lines and
    /// releases at once).
    pub async fn release(
        &self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<Lease, LeaseError>> {
        let mut tx = self.store.begin().await?;
        let r = tx.release_attach(run_id, lease_id, now).await?;
        tx.commit().await?;
        Ok(r.ok_or(LeaseError::NotHeld))
    }

    /// Queues a typed line for the run's worker.
    pub async fn push_input(
        &self,
        run_id: Uuid,
        lease_id: Uuid,
        text: String,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(), LeaseError>> {
        let mut tx = self.store.begin().await?;
        let r = tx
            .push_attach_input(run_id, lease_id, &text, MAX_QUEUED_INPUT, now)
            .await?;
        tx.commit().await?;
        Ok(r)
    }

    /// Removes and returns every lease expired at `now` (to journal).
    pub async fn take_expired(&self, now: DateTime<Utc>) -> StoreResult<Vec<Lease>> {
        let mut tx = self.store.begin().await?;
        let gone = tx.take_expired_attach(now).await?;
        tx.commit().await?;
        Ok(gone)
    }

    /// Removes and returns every lease whose acquirer's token has been
    /// revoked (to journal).
    pub async fn take_revoked(&self) -> StoreResult<Vec<Lease>> {
        let mut tx = self.store.begin().await?;
        let gone = tx.take_revoked_attach().await?;
        tx.commit().await?;
        Ok(gone)
    }
}
