//! The host aggregate: [`Host`] rows (the worker registry) and the
//! [`HostTx`] calls.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::names::WORKER_LABEL_PREFIX;
use pam_manifests::protocol::Capabilities;
use pam_manifests::state::{HostStatus, Platform};
use uuid::Uuid;

use crate::{Labels, Meta, StoreResult};

#[derive(Debug, Clone, PartialEq)]
pub struct Host {
    pub id: Uuid,
    pub name: String,
    pub platform: Platform,
    pub token_fingerprint: Option<String>,
    pub status: HostStatus,
    pub instance_id: Option<Uuid>,
    pub instance_suspect: bool,
    pub instance_flagged_at: Option<DateTime<Utc>>,
    /// The newest instance_id presented while suspect (OQ-14); pinned by
    /// clear-suspect.
    pub presented_instance_id: Option<Uuid>,
    pub last_seen_at: Option<DateTime<Utc>>,
    pub capacity: i32,
    /// The Host manifest's `spec.labels`: set by an operator, like
    /// `metadata.labels`. Selectors never read this alone: see
    /// [`Host::labels`].
    pub dispatch_labels: Labels,
    /// What the worker reported for itself at its last registration, each
    /// key already under `worker.pam.dev/`: a worker chooses
    /// these, so they never share a key with an operator's labels.
    pub worker_labels: Labels,
    /// What the worker last reported it can run; `None` until a
    /// worker that reports capabilities registers — such a host is taken
    /// to run every provider, as all hosts did before (see
    /// [`crate::dispatch::host_has_provider`]).
    pub capabilities: Option<Capabilities>,
    /// Desired (spec.disabled); status follows through the gate.
    pub disabled: bool,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Host {
    /// A host as it is first stored: `registered`, no worker seen yet,
    /// capacity 4, no labels or capabilities.
    pub fn new(name: String, platform: Platform, now: DateTime<Utc>) -> Host {
        Host {
            id: Uuid::new_v4(),
            name,
            platform,
            token_fingerprint: None,
            status: HostStatus::Registered,
            instance_id: None,
            instance_suspect: false,
            instance_flagged_at: None,
            presented_instance_id: None,
            last_seen_at: None,
            capacity: 4,
            dispatch_labels: Labels::new(),
            worker_labels: Labels::new(),
            capabilities: None,
            disabled: false,
            meta: Meta::default(),
            created_at: now,
            updated_at: now,
        }
    }

    /// The host's one label set: `metadata.labels` with
    /// `spec.labels` over them (both operator-set), and the worker's report
    /// in its own namespace. Run target selectors, `pamctl get
    /// hosts -l` and the host's `status.labels` all use this set, so what
    /// users see is what selects. A worker-reported label satisfies a
    /// selector only on its `worker.pam.dev/` key: a worker that reports
    /// `secure=true` does not match `secure: "true"`. A stray operator key
    /// in that namespace (refused by validation, but stored before it) is
    /// left out, so the namespace holds the worker's word alone.
    pub fn labels(&self) -> Labels {
        let operator = self.meta.labels.iter().chain(&self.dispatch_labels);
        let mut all: Labels = operator
            .filter(|(k, _)| !k.starts_with(WORKER_LABEL_PREFIX))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        all.extend(
            self.worker_labels
                .iter()
                .filter(|(k, _)| k.starts_with(WORKER_LABEL_PREFIX))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        all
    }
}

/// Hosts (`hosts`). Part of every [`crate::Tx`].
#[async_trait]
pub trait HostTx: Send {
    /// The hosts with these names (any order; names with no host are left
    /// out). One statement: the heartbeat batch reads its hosts with it.
    async fn get_hosts_by_names(&mut self, names: &[String]) -> StoreResult<Vec<Host>>;
    /// Heartbeats that change nothing but liveness, set-based:
    /// for each `(id, expected_rv)`, `last_seen_at = now` and the version
    /// bumped where the host is still at `expected_rv` — what
    /// [`crate::NamedTx::update`] writes for such a host, one statement for all.
    /// Returns the ids written (a host at another version is left out).
    async fn touch_hosts(
        &mut self,
        seen: &[(Uuid, i64)],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Uuid>>;
    /// Guarded status write through the gate (`WHERE status = from`).
    async fn set_host_status(
        &mut self,
        id: Uuid,
        from: HostStatus,
        to: HostStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<Host>;
    /// Online hosts whose last_seen_at is before `cutoff` (index-driven).
    async fn list_silent_hosts(&mut self, cutoff: DateTime<Utc>) -> StoreResult<Vec<Host>>;
    /// How many live (spawning or running) runs each host has; hosts with
    /// none are left out. One statement for the whole fleet: the dispatch
    /// pass counts "at capacity" hosts from it.
    async fn count_live_runs_per_host(&mut self) -> StoreResult<Vec<(Uuid, i64)>>;
    /// How many hosts are in each status (statuses with none are left out).
    async fn count_hosts_by_status(&mut self) -> StoreResult<Vec<(HostStatus, i64)>>;
}

crate::named::row!(Host);

impl crate::NamedKind for Host {
    type Scope = ();
    const NOUN: &'static str = "host";
    fn scope(&self) {}
}
