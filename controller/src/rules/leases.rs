//! Attach leases (`pamctl attach RUN`): an interactive lease on a live run.
//! One holder at a time; a lease expires `ttl` after it was acquired or last
//! renewed; while held, the holder's typed lines are queued and handed to
//! the run's worker with the desired set (the worker types them into the
//! pane with `tmux send-keys -l`).
//!
//! In the database ([`pam_store::AttachTx`]: `attach_leases`,
//! `attach_input`), so every pamd replica answers every attach request and
//! a pamd restart keeps them. Acquire, release and expiry are
//! journaled (`run.lease_acquired`, `run.lease_released` with `reason`),
//! each payload carrying run_id and attempt.
//!
//! # Guarantees
//! - A lease change and its event are one transaction: each function here
//!   writes the lease and appends its event in the caller's transaction,
//!   which commits through [`crate::ctx::Ctx::commit`] (a crash
//!   between the two can no longer lose the event).
//! - Input accepted under a valid lease is delivered even if the lease is
//!   released before the worker picks it up.

use std::time::Duration;

use chrono::{DateTime, Utc};
use pam_store::prelude::*;
use pam_store::StoreResult;
use serde_json::json;
use uuid::Uuid;

use crate::events::{payload, topic};

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

fn expiry(now: DateTime<Utc>, ttl: Duration) -> DateTime<Utc> {
    now + chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::seconds(30))
}

/// Who acquires a lease, for how long.
pub struct Acquirer<'a> {
    pub run_id: Uuid,
    pub attempt: i32,
    pub holder: &'a str,
    /// The acquirer's token: revoking it releases the lease.
    pub token_id: Option<Uuid>,
    pub ttl: Duration,
}

/// Acquires the lease on the run unless someone holds an unexpired one;
/// journals the release of an expired lease it replaced and
/// `run.lease_acquired`.
pub async fn acquire(
    tx: &mut dyn Tx,
    who: Acquirer<'_>,
    now: DateTime<Utc>,
) -> StoreResult<Result<Lease, LeaseError>> {
    let lease = Lease {
        id: Uuid::new_v4(),
        run_id: who.run_id,
        attempt: who.attempt,
        holder: who.holder.to_string(),
        ttl: who.ttl,
        token_id: who.token_id,
        acquired_at: now,
        expires_at: expiry(now, who.ttl),
    };
    let expired = match tx.acquire_attach(&lease, now).await? {
        Ok(expired) => expired,
        Err(e) => return Ok(Err(e)),
    };
    if let Some(old) = expired {
        journal(tx, topic::RUN_LEASE_RELEASED, &old, Some("expired"), now).await?;
    }
    journal(tx, topic::RUN_LEASE_ACQUIRED, &lease, None, now).await?;
    Ok(Ok(lease))
}

/// Extends the lease by its TTL from now (not journaled).
pub async fn renew(
    tx: &mut dyn Tx,
    run_id: Uuid,
    lease_id: Uuid,
    now: DateTime<Utc>,
) -> StoreResult<Result<Lease, LeaseError>> {
    Ok(tx
        .renew_attach(run_id, lease_id, now)
        .await?
        .ok_or(LeaseError::NotHeld))
}

/// Releases the lease, journaling `run.lease_released` (`released`).
/// Input accepted while it was held is still handed out (a `pamctl attach`
/// fed from a pipe sends its lines and releases at once).
pub async fn release(
    tx: &mut dyn Tx,
    run_id: Uuid,
    lease_id: Uuid,
    now: DateTime<Utc>,
) -> StoreResult<Result<Lease, LeaseError>> {
    let Some(lease) = tx.release_attach(run_id, lease_id, now).await? else {
        return Ok(Err(LeaseError::NotHeld));
    };
    journal(tx, topic::RUN_LEASE_RELEASED, &lease, Some("released"), now).await?;
    Ok(Ok(lease))
}

/// Queues a typed line for the run's worker.
pub async fn push_input(
    tx: &mut dyn Tx,
    run_id: Uuid,
    lease_id: Uuid,
    text: &str,
    now: DateTime<Utc>,
) -> StoreResult<Result<(), LeaseError>> {
    tx.push_attach_input(run_id, lease_id, text, MAX_QUEUED_INPUT, now)
        .await
}

/// Removes every lease expired at `now`, journaling each release
/// (`expired`). Returns them.
pub async fn expire(tx: &mut dyn Tx, now: DateTime<Utc>) -> StoreResult<Vec<Lease>> {
    let gone = tx.take_expired_attach(now).await?;
    for lease in &gone {
        journal(tx, topic::RUN_LEASE_RELEASED, lease, Some("expired"), now).await?;
    }
    Ok(gone)
}

/// Removes every lease whose acquirer's token has been revoked,
/// journaling each release (`revoked`). Returns them.
pub async fn release_revoked(tx: &mut dyn Tx, now: DateTime<Utc>) -> StoreResult<Vec<Lease>> {
    let gone = tx.take_revoked_attach().await?;
    for lease in &gone {
        journal(tx, topic::RUN_LEASE_RELEASED, lease, Some("revoked"), now).await?;
    }
    Ok(gone)
}

/// Appends a lease event for `lease` (run_id and attempt always present).
async fn journal(
    tx: &mut dyn Tx,
    topic: &'static str,
    lease: &Lease,
    reason: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut extra = json!({ "lease_id": lease.id, "holder": lease.holder });
    if let Some(r) = reason {
        extra["reason"] = json!(r);
    }
    let payload = match tx.get_run(lease.run_id).await? {
        Some(run) => {
            let mut p = payload::run(&run, extra);
            // The lease's attempt, which a requeue may have moved on from.
            p["attempt"] = json!(lease.attempt);
            p
        }
        None => {
            extra["run_id"] = json!(lease.run_id);
            extra["attempt"] = json!(lease.attempt);
            extra
        }
    };
    tx.append_event(topic, payload, now).await.map(drop)
}
