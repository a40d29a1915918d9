//! What the workers see, in one layer (as the kubelet sees its pods
//! through one watch, never rebuilt per handler): each host's desired set
//! ([`desired`], one builder for the answers to heartbeats, reads,
//! resyncs and claims), claims ([`claims`]), heartbeats written by group
//! commit ([`heartbeats`]), the operator signals waiting for their worker
//! ([`signals`]) and the fan-out of run events to the watches of the hosts
//! they name ([`fanout`]). The worker protocol's HTTP handlers and the
//! watch's transport (`api::worker`, `api::watch`) call it and answer.
//!
//! Below `api`, above `ctx` and `rules`; a sibling of `reconcile` and
//! `apply` (signal ingest, what workers report, is `reconcile`'s).

pub mod claims;
mod desired;
mod fanout;
mod heartbeats;
pub mod signals;

use std::sync::Arc;

use pam_manifests::protocol::DesiredSet;
use pam_store::{Host, Run, StoreError};
use uuid::Uuid;

use crate::batch::{Dropped, Reads};
use crate::ctx::Ctx;
use crate::retry::Conflict;

pub use desired::desired_run;

/// Why the fleet could not answer a worker.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FleetError {
    /// The worker's host has no row yet: it registers first.
    #[error("host {0:?} has not registered yet")]
    NotRegistered(String),
    /// The store failed (the database unavailable, a lost race).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Its batch's writer ended without answering (a panic, shutdown):
    /// the worker sends it again.
    #[error("the request was not served; send it again")]
    Dropped,
}

impl From<Dropped> for FleetError {
    fn from(_: Dropped) -> Self {
        FleetError::Dropped
    }
}

impl Conflict for FleetError {
    fn is_conflict(&self) -> bool {
        matches!(self, FleetError::Store(e) if e.is_conflict())
    }
}

/// The fleet's state on this pamd: what waits to be written or handed
/// to workers. Cheap to clone. Its calls take the [`Ctx`] (the store,
/// the clock, the keyring) of the caller, as pamd configures it.
#[derive(Clone, Default)]
pub struct Fleet {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    heartbeats: heartbeats::Heartbeats,
    signals: signals::PendingSignals,
    /// The hosts of opening watches, by name (gathered reads).
    host_reads: Arc<Reads<String, Uuid, FleetError>>,
}

impl Fleet {
    /// The operator signals waiting for their worker.
    pub fn signals(&self) -> &signals::PendingSignals {
        &self.inner.signals
    }

    /// Writes the heartbeat of `host`'s worker (instance `instance_id`,
    /// OQ-14) with the others waiting: its desired set once written.
    pub async fn heartbeat(
        &self,
        ctx: &Ctx,
        host: &str,
        instance_id: Uuid,
    ) -> Result<DesiredSet, FleetError> {
        heartbeats::queue(self, ctx, host, Some(instance_id)).await
    }

    /// `host`'s desired set read in the next heartbeat batch: a watching
    /// worker's safety-net resync, which no change asked for (in a batch
    /// it costs no transaction of its own).
    pub async fn resync(&self, ctx: &Ctx, host: &str) -> Result<DesiredSet, FleetError> {
        heartbeats::queue(self, ctx, host, None).await
    }

    /// Writes the waiting heartbeat batch now, not at the end of its
    /// gather: a read the worker waits for is queued behind it.
    pub fn hurry(&self) {
        self.inner.heartbeats.hurry();
    }

    /// `host`'s desired set, read now: the read a change asked for.
    pub async fn desired(&self, ctx: &Ctx, host: &str) -> Result<DesiredSet, FleetError> {
        desired::read_now(self, ctx, host).await
    }

    /// Claims for `host` (waiting up to `wait` for a run it can take, at
    /// most `max`): the claimed runs as its worker gets them.
    pub async fn claim(
        &self,
        ctx: &Ctx,
        host: &Host,
        max: i64,
        wait: std::time::Duration,
    ) -> Result<DesiredSet, FleetError> {
        let runs: Vec<Run> = claims::claim_wait(ctx, host.id, max, wait).await?;
        desired::claimed(ctx, &runs).await
    }

    /// The id of host `name` whose worker opens its watch, read with the
    /// other watches opening (a pamd restart reconnects every worker at
    /// once); `NotRegistered` when it has no row.
    pub async fn watched_host(&self, ctx: &Ctx, name: &str) -> Result<Uuid, FleetError> {
        let store = ctx.store.clone();
        crate::batch::read(&self.inner.host_reads, name.to_string(), move |names| {
            let store = store.clone();
            async move {
                let mut tx = store.begin_priority().await?;
                let found = tx.get_hosts_by_names(&names).await?;
                Ok(found.into_iter().map(|h| (h.name, h.id)).collect())
            }
        })
        .await?
        .ok_or_else(|| FleetError::NotRegistered(name.to_string()))
    }

    /// Starts, once per pamd, the fan-out of run events to their hosts'
    /// watches.
    pub async fn start_fanout(&self, ctx: &Ctx) -> Result<(), FleetError> {
        fanout::start(ctx).await
    }
}
