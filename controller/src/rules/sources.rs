//! Source rules (GitOps): creating and updating a Source, a sync request,
//! and every status the sync loop writes — sync, health, drift, errors,
//! the conditions Ready / Reconciling / Stalled — with its event.
//!
//! # Guarantees
//! - A status write and its event are in the caller's transaction: the
//!   sync's writes, inventory, status and events commit together or not
//!   at all (a SIGKILL mid-sync leaves the last good state).
//! - Events are journaled on change only: `source.synced` when a sync
//!   applied something or moved the revision, `source.sync_failed` once per
//!   failed revision and message, `source.drift_detected` when the drift
//!   list changes, `source.healed` once per heal.

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{self, Drift, SourceError};
use pam_manifests::kinds::{HealthState, OwnedState, SyncState};
use pam_store::prelude::*;
use pam_store::{Source, SourceStatus, StoreResult};
use serde_json::{json, Value};
use uuid::Uuid;

use super::meta::{self, Change, Desired};
use crate::events::{payload, topic};

pub use pam_manifests::conditions::{READY, RECONCILING, STALLED, SUSPENDED};

/// A Source as declared.
#[derive(Debug, Clone)]
pub struct SourceDesired {
    pub name: String,
    pub desired: Desired,
}

impl SourceDesired {
    pub fn of(s: &kinds::Source, desired: Desired) -> SourceDesired {
        SourceDesired {
            name: s.metadata.name.to_string(),
            desired,
        }
    }
}

/// Creates a Source (never synced yet: sync and health Unknown).
pub async fn create(tx: &mut dyn Tx, d: SourceDesired, now: DateTime<Utc>) -> StoreResult<Source> {
    let mut m = meta::new_meta(d.desired, now);
    meta::set_condition(&mut m, READY, false, "NotSynced", "not synced yet", now);
    meta::set_condition(
        &mut m,
        RECONCILING,
        true,
        "Created",
        "first sync pending",
        now,
    );
    suspended_condition(&mut m, now);
    let row = Source {
        id: Uuid::new_v4(),
        name: d.name,
        meta: m,
        status: SourceStatus {
            sync: SyncState::Unknown,
            health: HealthState::Unknown,
            errors: json!([]),
            drift: json!([]),
            departed: json!([]),
            ..SourceStatus::default()
        },
        created_at: now,
        updated_at: now,
    };
    tx.insert(&row).await?;
    Ok(row)
}

/// Updates a Source's spec, labels and annotations (guarded by its
/// resourceVersion). The same desired state writes nothing.
pub async fn update(
    tx: &mut dyn Tx,
    row: Source,
    d: SourceDesired,
    now: DateTime<Utc>,
) -> StoreResult<(Source, Change)> {
    let observed = row.meta.observed_generation;
    meta::write_desired(tx, row, d.desired, now, |row| {
        suspended_condition(&mut row.meta, now);
        // A Source's new spec is observed when the sync loop has synced
        // it (its status write), not when it is accepted: the loop syncs
        // a Source whose observedGeneration lags.
        row.meta.observed_generation = observed;
    })
    .await
}

/// `pamctl suspend source NAME` / `resume` (like `flux
/// suspend`): `spec.suspend` set through [`update`], a spec change like
/// any other (a new generation; the sync loop skips a suspended Source and
/// syncs a resumed one, its observedGeneration lagging). The next apply of
/// the Source's manifest declares `suspend` again.
pub async fn set_suspend(
    tx: &mut dyn Tx,
    row: Source,
    suspend: bool,
    now: DateTime<Utc>,
) -> StoreResult<(Source, Change)> {
    let d = SourceDesired {
        name: row.name.clone(),
        desired: Desired::stored(&row.meta).with_spec_field("suspend", json!(suspend)),
    };
    update(tx, row, d, now).await
}

/// Deletes a Source and its inventory; the objects it owned stay, owned by
/// nobody.
pub async fn delete(tx: &mut dyn Tx, s: &Source) -> StoreResult<bool> {
    tx.delete::<Source>(s.id).await
}

/// Whether the Source is suspended (`spec.suspend`).
pub fn suspended(m: &pam_store::Meta) -> bool {
    m.spec.get("suspend").and_then(Value::as_bool) == Some(true)
}

/// The `Suspended` condition as `spec.suspend` says, set with
/// every spec write (apply, `pamctl suspend/resume`); unchanged when it
/// already says so.
fn suspended_condition(m: &mut pam_store::Meta, now: DateTime<Utc>) {
    if suspended(m) {
        meta::set_condition(
            m,
            SUSPENDED,
            true,
            "Suspended",
            "spec.suspend is true: no syncs; its objects stay",
            now,
        );
    } else {
        meta::set_condition(
            m,
            SUSPENDED,
            false,
            "Active",
            "syncing every interval and on request",
            now,
        );
    }
}

/// `pamctl sync NAME` (and a push): sync now — unless the
/// Source is suspended: `Ok(Err(why))`, which the caller answers 409.
pub async fn request_sync(
    tx: &mut dyn Tx,
    s: &Source,
    now: DateTime<Utc>,
) -> StoreResult<Result<Source, String>> {
    if suspended(&s.meta) {
        return Ok(Err(format!(
            "Source {:?} is suspended (spec.suspend: true): `pamctl resume source {}` first",
            s.name, s.name
        )));
    }
    tx.request_source_sync(s.id, now).await.map(Ok)
}

/// How many objects a sync created, changed and pruned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    pub created: usize,
    pub configured: usize,
    pub pruned: usize,
}

impl Counts {
    pub fn any(&self) -> bool {
        self.created + self.configured + self.pruned > 0
    }
}

/// Health rolled up from the owned objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    /// Healthy | Progressing | Degraded, or Unknown before any revision
    /// was applied.
    pub status: HealthState,
    pub message: String,
}

/// What a sync pass found.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The tree at `revision` is what is stored: applied now (`counts`),
    /// or confirmed unchanged. `healed` lists the drift this sync put back.
    Synced {
        revision: String,
        counts: Counts,
        healed: Vec<Drift>,
        /// What left the tree, when this sync wrote: kept in
        /// the status until a sync moves the revision or sees more leave.
        departed: Option<Vec<OwnedState>>,
    },
    /// Owned fields were changed by another path and not put back.
    OutOfSync { drift: Vec<Drift> },
    /// The revision (when one was read) could not be applied; nothing was.
    Failed {
        attempted: Option<String>,
        errors: Vec<SourceError>,
        message: String,
    },
}

fn source_payload(s: &Source, extra: Value) -> Value {
    payload::source(s, extra)
}

/// Writes the status of one sync pass, with its conditions and events;
/// clears the sync request that was read with `s` (a later one stays).
pub async fn write_status(
    tx: &mut dyn Tx,
    mut s: Source,
    outcome: Outcome,
    health: Health,
    inventory: usize,
    now: DateTime<Utc>,
) -> StoreResult<Source> {
    let before = s.status.clone();
    let st = &mut s.status;
    st.last_attempt_at = Some(now);
    st.health = health.status;
    st.health_message = health.message;
    let mut events: Vec<(&'static str, Value)> = Vec::new();
    match outcome {
        Outcome::Synced {
            revision,
            counts,
            healed,
            departed,
        } => {
            let moved = before.revision.as_deref() != Some(revision.as_str());
            if let Some(d) = departed.filter(|d| moved || !d.is_empty()) {
                st.departed = serde_json::to_value(&d).expect("states are JSON");
            }
            // Back to Synced from Failed or OutOfSync (say a directory
            // reverted to the last good revision): journaled too, so
            // watchers (the dashboard) see the recovery.
            let recovered = before.sync != SyncState::Synced;
            st.revision = Some(revision.clone());
            st.attempted_revision = Some(revision.clone());
            st.last_synced_at = Some(now);
            st.sync = SyncState::Synced;
            st.sync_message = String::new();
            st.errors = json!([]);
            st.drift = json!([]);
            if moved || recovered || counts.any() {
                events.push((
                    topic::SOURCE_SYNCED,
                    json!({"revision": revision, "created": counts.created,
                           "configured": counts.configured, "pruned": counts.pruned,
                           "inventory": inventory}),
                ));
            }
            if !healed.is_empty() {
                events.push((
                    topic::SOURCE_HEALED,
                    json!({"revision": revision, "objects": healed}),
                ));
            }
            let m = &mut s.meta;
            meta::set_condition(
                m,
                READY,
                true,
                "Synced",
                &format!("revision {revision} applied"),
                now,
            );
            meta::set_condition(m, STALLED, false, "Synced", "", now);
        }
        Outcome::OutOfSync { drift } => {
            let list = serde_json::to_value(&drift).expect("drift is JSON");
            if list != before.drift {
                events.push((topic::SOURCE_DRIFT_DETECTED, json!({"objects": drift})));
            }
            st.sync = SyncState::OutOfSync;
            st.sync_message = drift_message(&drift);
            st.drift = list;
            let message = st.sync_message.clone();
            let m = &mut s.meta;
            meta::set_condition(m, READY, false, "OutOfSync", &message, now);
            meta::set_condition(m, STALLED, false, "OutOfSync", "", now);
        }
        Outcome::Failed {
            attempted,
            errors,
            message,
        } => {
            let again = before.sync == SyncState::Failed
                && before.attempted_revision == attempted
                && before.sync_message == message;
            if !again {
                events.push((
                    topic::SOURCE_SYNC_FAILED,
                    json!({"revision": attempted, "message": message, "errors": errors}),
                ));
            }
            if attempted.is_some() {
                st.attempted_revision = attempted;
            }
            st.sync = SyncState::Failed;
            st.sync_message = message.clone();
            st.errors = serde_json::to_value(&errors).expect("errors are JSON");
            let m = &mut s.meta;
            meta::set_condition(m, READY, false, "SyncFailed", &message, now);
            meta::set_condition(m, STALLED, true, "SyncFailed", &message, now);
        }
    }
    s.meta.observed_generation = s.meta.generation;
    meta::set_condition(&mut s.meta, RECONCILING, false, "Idle", "", now);
    s.updated_at = now;
    // Every pass writes (it runs once per interval, a request or a
    // change): lastSyncedAt is what `pamctl sync` waits on.
    let clear = s.status.sync_requested_at.is_some();
    let s = tx.write_source_status(&s, clear).await?;
    for (t, extra) in events {
        tx.append_event(t, source_payload(&s, extra), now).await?;
    }
    Ok(s)
}

/// A Source's health recomputed between syncs (sync::health):
/// written only when it changed; `false` when it did not (or the Source
/// is gone). No event: the objects' own events tell what moved.
pub async fn refresh_health(
    tx: &mut dyn Tx,
    id: Uuid,
    health: Health,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let Some(mut s) = tx.get::<Source>(id).await? else {
        return Ok(false);
    };
    if s.status.health == health.status && s.status.health_message == health.message {
        return Ok(false);
    }
    s.status.health = health.status;
    s.status.health_message = health.message;
    s.updated_at = now;
    tx.write_source_status(&s, false).await?;
    Ok(true)
}

/// How a deferred sync's message starts ([`waiting`]).
pub const WAITING: &str = "waiting for files to settle: ";

/// A sync deferred because the Source's files are still being written:
/// nothing applied, nothing pruned — not a failure. The
/// message says what it waits for, with `Reconciling=True`; the sync
/// state, the last attempt and a pending request stay (the sync is tried
/// again shortly). Written when what it waits for changes, not at each
/// retry (the age in "changed 0.4 s ago" alone is no change).
pub async fn waiting(
    tx: &mut dyn Tx,
    mut s: Source,
    why: &str,
    now: DateTime<Utc>,
) -> StoreResult<Source> {
    let message = format!("{WAITING}{why}");
    let shape = |m: &str| -> String { m.chars().filter(|c| !c.is_ascii_digit()).collect() };
    if shape(&s.status.sync_message) == shape(&message) {
        return Ok(s);
    }
    s.status.sync_message = message.clone();
    meta::set_condition(
        &mut s.meta,
        RECONCILING,
        true,
        "WaitingForFiles",
        &message,
        now,
    );
    s.updated_at = now;
    tx.write_source_status(&s, false).await
}

/// `source.pruned`: one object this Source owned left its tree and was
/// deleted.
pub async fn pruned(
    tx: &mut dyn Tx,
    s: &Source,
    kind: &str,
    project: Option<&str>,
    name: &str,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    tx.append_event(
        topic::SOURCE_PRUNED,
        source_payload(s, json!({"kind": kind, "project": project, "name": name})),
        now,
    )
    .await?;
    Ok(())
}

/// An owned object that left the tree but was kept (and released from the
/// inventory) because deleting it would cascade into `held`: objects this
/// prune does not delete. At most 10 are named; `held_count` says how many.
pub async fn prune_skipped(
    tx: &mut dyn Tx,
    s: &Source,
    kind: &str,
    project: Option<&str>,
    name: &str,
    held: &[String],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let named: Vec<&String> = held.iter().take(10).collect();
    tx.append_event(
        topic::SOURCE_PRUNE_SKIPPED,
        source_payload(
            s,
            json!({"kind": kind, "project": project, "name": name,
                   "held": named, "held_count": held.len(),
                   "reason": "deleting it would also delete objects this Source does not prune"}),
        ),
        now,
    )
    .await?;
    Ok(())
}

/// `spec.title of Task web/a; …` — the sync message of a drift.
pub fn drift_message(drift: &[Drift]) -> String {
    let parts: Vec<String> = drift
        .iter()
        .map(|d| {
            let obj = match &d.project {
                Some(p) => format!("{} {p}/{}", d.kind, d.name),
                None => format!("{} {}", d.kind, d.name),
            };
            format!("{obj}: {}", d.fields.join(", "))
        })
        .collect();
    format!("changed by another path: {}", parts.join("; "))
}
