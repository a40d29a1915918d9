//! Instance identity (OQ-14): one worker token cloned onto two machines must
//! not alias one host row unnoticed.
//!
//! - The first instance-aware registration pins `hosts.instance_id`.
//! - A different instance_id while the pinned instance was seen within the
//!   offline threshold reads as a concurrent clone: `instance_suspect =
//!   true`, `instance_flagged_at = now`, `worker.instance_suspect` journaled
//!   once on the false → true edge (not on every heartbeat). The host gets
//!   no new runs; its running runs are left alone.
//! - A different instance_id after the pinned one went quiet past the
//!   threshold reads as a reinstall: `instance_id` is updated silently and
//!   `worker.instance_reinstalled` (info) is journaled.
//! - `pamctl host clear-suspect` clears the flag and pins the newest
//!   presenter ([`clear_suspect`]).
//!
//! Only the pinned instance refreshes `last_seen_at`, so a clone cannot
//! keep the pinned instance looking alive (and "the pinned instance's last
//! last_seen_at" keeps its meaning).

use chrono::{DateTime, Utc};
use pam_manifests::state::HostStatus;
use serde_json::json;
use uuid::Uuid;

use crate::events::topic;
use crate::store::{Host, StoreError, StoreResult, Tx};

/// What a presentation (registration or heartbeat) was judged to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Presence {
    /// The pinned instance (or a worker that sends no instance id).
    Pinned,
    /// First instance-aware registration: now pinned.
    FirstPin,
    /// A clone while the pinned instance looked alive: flagged now.
    Flagged,
    /// A clone presenting while the host is already suspect (debounced).
    StillSuspect,
    /// The pinned instance had gone quiet: the new one is pinned.
    Reinstalled,
}

/// Applies OQ-14 to a presentation of `instance_id` by the worker of
/// `host`, updates `last_seen_at`, and brings a registered/offline host
/// online (journaling `worker.registered`). Returns the stored host.
pub async fn present(
    tx: &mut dyn Tx,
    mut host: Host,
    instance_id: Option<Uuid>,
    offline_after: std::time::Duration,
    now: DateTime<Utc>,
) -> StoreResult<(Host, Presence)> {
    let window = chrono::Duration::from_std(offline_after).expect("threshold in range");
    let rv = host.meta.resource_version;
    let presence = match (host.instance_id, instance_id) {
        (_, None) => Presence::Pinned,
        (None, Some(new)) => {
            host.instance_id = Some(new);
            Presence::FirstPin
        }
        (Some(pinned), Some(new)) if pinned == new => Presence::Pinned,
        (Some(_), Some(new)) => {
            let recently_seen = host.last_seen_at.is_some_and(|seen| now - seen <= window);
            if host.instance_suspect {
                host.presented_instance_id = Some(new);
                Presence::StillSuspect
            } else if recently_seen {
                host.instance_suspect = true;
                host.instance_flagged_at = Some(now);
                host.presented_instance_id = Some(new);
                Presence::Flagged
            } else {
                host.instance_id = Some(new);
                Presence::Reinstalled
            }
        }
    };
    let pinned_speaking = matches!(
        presence,
        Presence::Pinned | Presence::FirstPin | Presence::Reinstalled
    );
    if pinned_speaking {
        host.last_seen_at = Some(now);
    }
    let mut host = tx.update_host(&host, rv).await?;
    match presence {
        Presence::Flagged => {
            tracing::warn!(host = %host.name, "worker.instance_suspect: a second instance presents this host's token");
            tx.append_event(
                topic::WORKER_INSTANCE_SUSPECT,
                json!({
                    "host_id": host.id, "host": host.name,
                    "pinned_instance_id": host.instance_id,
                    "presented_instance_id": instance_id,
                }),
                now,
            )
            .await?;
        }
        Presence::Reinstalled => {
            tx.append_event(
                topic::WORKER_INSTANCE_REINSTALLED,
                json!({ "host_id": host.id, "host": host.name, "instance_id": instance_id }),
                now,
            )
            .await?;
        }
        _ => {}
    }
    if pinned_speaking && matches!(host.status, HostStatus::Registered | HostStatus::Offline) {
        let from = host.status;
        host = tx
            .set_host_status(host.id, from, HostStatus::Online, now)
            .await?;
        tx.append_event(
            topic::WORKER_REGISTERED,
            json!({ "host_id": host.id, "host": host.name, "instance_id": host.instance_id, "from": from.as_str() }),
            now,
        )
        .await?;
    }
    Ok((host, presence))
}

/// `pamctl host clear-suspect`: clears the flag and pins the newest
/// presenter. Refuses a host that is not suspect.
pub async fn clear_suspect(
    tx: &mut dyn Tx,
    mut host: Host,
    now: DateTime<Utc>,
) -> StoreResult<Host> {
    if !host.instance_suspect {
        return Err(StoreError::Invalid(format!(
            "host {:?} is not instance-suspect",
            host.name
        )));
    }
    let rv = host.meta.resource_version;
    host.instance_suspect = false;
    host.instance_flagged_at = None;
    if let Some(newest) = host.presented_instance_id.take() {
        host.instance_id = Some(newest);
    }
    // The newest presenter is now the pinned one; count it as seen.
    host.last_seen_at = Some(now);
    tx.update_host(&host, rv).await
}
