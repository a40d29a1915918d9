//! The host aggregate: [`Host`] rows (the worker registry) and the
//! [`HostTx`] calls.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
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
    /// The labels the host itself brings: Host `spec.labels`, or what the
    /// worker reports at registration. Selectors never read this alone:
    /// see [`Host::labels`].
    pub dispatch_labels: Labels,
    /// Desired (spec.disabled); status follows through the gate.
    pub disabled: bool,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Host {
    /// The host's one label set (issue 16): `metadata.labels` with the
    /// labels the host brings (`spec.labels` or the worker's report) over
    /// them. Run target selectors, `pamctl get hosts -l` and the host's
    /// `status.labels` all use this set, so what users see is what
    /// selects.
    pub fn labels(&self) -> Labels {
        let mut all = self.meta.labels.clone();
        all.extend(
            self.dispatch_labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        all
    }
}

/// Hosts (`hosts`). Part of every [`crate::Tx`].
#[async_trait]
pub trait HostTx: Send {
    /// Inserts a host. A taken name is AlreadyExists.
    async fn insert_host(&mut self, h: &Host) -> StoreResult<()>;
    async fn get_host(&mut self, id: Uuid) -> StoreResult<Option<Host>>;
    async fn get_host_by_name(&mut self, name: &str) -> StoreResult<Option<Host>>;
    /// All hosts ordered by name.
    async fn list_hosts(&mut self) -> StoreResult<Vec<Host>>;
    /// Writes every mutable column of the host (platform, token_fingerprint,
    /// instance fields, last_seen_at, capacity, disabled, meta except
    /// resource_version) where `resource_version = expected_rv`, bumping it.
    /// Status is NOT written here: use [`Tx::set_host_status`].
    async fn update_host(&mut self, h: &Host, expected_rv: i64) -> StoreResult<Host>;
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
    /// How many hosts are in each status (statuses with none are left out).
    async fn count_hosts_by_status(&mut self) -> StoreResult<Vec<(HostStatus, i64)>>;
    /// Deletes a host; Invalid while any run references it (no cascade).
    async fn delete_host(&mut self, id: Uuid) -> StoreResult<bool>;
}
