//! [`MemStore`]: an in-memory [`Store`] with PostgreSQL's behaviour, for
//! fast tests of the loops. The conformance suite holds it to [`PgStore`].
//!
//! # Guarantees
//! - Transactions are serializable: [`Store::begin`] takes the one lock and
//!   works on a copy of the state; [`Tx::commit`] writes the copy back and
//!   releases the lock, dropping the `Tx` discards the copy.
//! - The same keys are unique as in the schema (project slug, work item and
//!   run `(project, name)`, host name, `(host_id, session_name)`, token
//!   fingerprint, live operator token name) and deletes cascade like its
//!   foreign keys.
//!
//! # Caveats
//! - Every transaction copies the whole state: fine for tests, not for
//!   production sizes.
//! - A failed call never leaves partial effects and the `Tx` stays usable;
//!   on PostgreSQL only failed inserts (and Conflict/Illegal) leave it
//!   usable (see [`crate::postgres`]).
//!
//! [`PgStore`]: crate::postgres::PgStore

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::{transition, HostStatus, RunStatus, WorkItemStatus};
use serde_json::Value;
use tokio::sync::{Mutex, OwnedMutexGuard};
use uuid::Uuid;

#[allow(unused_imports)]
pub(crate) use crate::prelude::*;
#[allow(unused_imports)]
pub(crate) use crate::{
    short_id, ApiToken, Event, Host, Journaled, OwnedObject, PendingRun, Project, Role, Run,
    RunFilter, RunUpdate, SignalMarker, Source, SourceObject, SourceStatus, StoreError,
    StoreResult, Target, TokenKind, WorkItem,
};

#[derive(Clone, Default)]
struct State {
    projects: HashMap<Uuid, Project>,
    work_items: HashMap<Uuid, WorkItem>,
    /// `work_item_deps`: task → the tasks it depends on, in order.
    deps: BTreeMap<Uuid, Vec<Uuid>>,
    runs: HashMap<Uuid, Run>,
    /// `run_results`: (run, attempt) → its workspace result.
    results: BTreeMap<(Uuid, i32), crate::RunResultRow>,
    /// `applysets`: name → what it holds.
    applysets: BTreeMap<String, crate::ApplySetRecord>,
    /// `run_activity`: (run, attempt) → its newest activity items.
    activity: BTreeMap<(Uuid, i32), Vec<pam_manifests::protocol::Entry>>,
    /// (run, attempt, kind) → received_at.
    signals: BTreeMap<(Uuid, i32, String), DateTime<Utc>>,
    hosts: HashMap<Uuid, Host>,
    events: BTreeMap<i64, Event>,
    /// The last seq handed out. Lives outside the transaction copy
    /// (see `append_event`).
    last_seq: i64,
    tokens: HashMap<Uuid, ApiToken>,
    sources: HashMap<Uuid, Source>,
    secrets: HashMap<Uuid, crate::Secret>,
    /// `run_secret_waits`: run → its wait.
    secret_waits: BTreeMap<Uuid, crate::SecretWait>,
    schedules: HashMap<Uuid, crate::Schedule>,
    /// `schedule_runs`: (schedule, tick) → run.
    schedule_runs: BTreeMap<(Uuid, DateTime<Utc>), Uuid>,
    /// (kind, object id) → the owning Source's row.
    source_objects: BTreeMap<(String, Uuid), SourceObject>,
    leases: HashMap<String, crate::Lease>,
    attach_leases: HashMap<Uuid, crate::AttachLease>,
    /// Run → (attempt, line), in order.
    attach_input: HashMap<Uuid, Vec<(i32, String)>>,
    webhooks: HashMap<Uuid, crate::Webhook>,
    deliveries: HashMap<Uuid, crate::Delivery>,
    /// (principal, key hash) → the stored key.
    idempotency: HashMap<(String, String), idempotency::KeyRow>,
    /// `managed_fields`: (kind, object id) → its managers.
    managed: HashMap<(String, Uuid), Vec<crate::ManagedEntry>>,
    /// `objects`: the kinds stored generically.
    objects: HashMap<Uuid, crate::Object>,
}

/// The in-memory store.
#[derive(Clone, Default)]
pub struct MemStore {
    state: Arc<Mutex<State>>,
}

impl MemStore {
    pub fn new() -> Self {
        Self::default()
    }
}

#[async_trait]
impl Store for MemStore {
    async fn begin(&self) -> StoreResult<Box<dyn Tx>> {
        let guard = self.state.clone().lock_owned().await;
        let work = guard.clone();
        Ok(Box::new(MemTx {
            guard,
            work,
            events: Journaled::default(),
        }))
    }

    async fn ready(&self) -> Result<(), String> {
        Ok(())
    }
}

struct MemTx {
    guard: OwnedMutexGuard<State>,
    work: State,
    events: Journaled,
}

fn not_found(what: &str, id: Uuid) -> StoreError {
    StoreError::NotFound(format!("{what} {id}"))
}

/// The error for a guarded update that did not match.
fn conflict(why: String) -> StoreError {
    StoreError::Conflict(why)
}

/// The schema's CHECK constraints on runs.
fn check_run(r: &Run) -> StoreResult<()> {
    if r.max_attempts < 1 {
        return Err(StoreError::Invalid(
            "check runs_max_attempts_check failed".into(),
        ));
    }
    if r.backoff_seconds < 0 {
        return Err(StoreError::Invalid(
            "check runs_backoff_seconds_check failed".into(),
        ));
    }
    if r.backoff_max_seconds < 0 {
        return Err(StoreError::Invalid(
            "check runs_backoff_max_seconds_check failed".into(),
        ));
    }
    if matches!(r.dispatch_timeout_seconds, Some(s) if s <= 0) {
        return Err(StoreError::Invalid(
            "check runs_dispatch_timeout_seconds_check failed".into(),
        ));
    }
    Ok(())
}

fn check_host(h: &Host) -> StoreResult<()> {
    if h.capacity < 0 {
        return Err(StoreError::Invalid(
            "check hosts_capacity_check failed".into(),
        ));
    }
    Ok(())
}

impl State {
    /// Whether another run on `host` holds `r`'s session name (short ids
    /// collide: a claim leaves such a run to another host).
    fn session_taken(&self, r: &Run, host: Uuid) -> bool {
        self.runs
            .values()
            .any(|o| o.id != r.id && o.host_id == Some(host) && o.session_name == r.session_name)
    }

    /// UNIQUE (host_id, session_name) for `r` as it would be stored.
    fn check_session_unique(&self, r: &Run) -> StoreResult<()> {
        if let Some(h) = r.host_id {
            if !self.hosts.contains_key(&h) {
                return Err(StoreError::NotFound(format!("referenced row (host {h})")));
            }
            if self.session_taken(r, h) {
                return Err(StoreError::AlreadyExists(
                    "runs_host_id_session_name_key".into(),
                ));
            }
        }
        Ok(())
    }

    /// Ids of `id` and every descendant, by live parent links.
    fn descendants(&self, id: Uuid) -> BTreeSet<Uuid> {
        let mut out = BTreeSet::from([id]);
        let mut frontier = vec![id];
        while let Some(p) = frontier.pop() {
            for w in self.work_items.values() {
                if w.parent_id == Some(p) && out.insert(w.id) {
                    frontier.push(w.id);
                }
            }
        }
        out
    }

    /// The one "blocked" rule of the memory store: `task` has a
    /// dependency that is not done.
    fn blocked(&self, task: Uuid) -> bool {
        self.deps.get(&task).is_some_and(|on| {
            on.iter().any(|d| {
                self.work_items
                    .get(d)
                    .is_some_and(|w| w.status != WorkItemStatus::Done)
            })
        })
    }

    fn remove_runs(&mut self, ids: &BTreeSet<Uuid>) {
        self.runs.retain(|id, _| !ids.contains(id));
        self.secret_waits.retain(|id, _| !ids.contains(id));
        self.schedule_runs.retain(|_, run| !ids.contains(run));
        self.signals.retain(|(run, _, _), _| !ids.contains(run));
        self.results.retain(|(run, _), _| !ids.contains(run));
        self.activity.retain(|(run, _), _| !ids.contains(run));
    }

    fn remove_work_items(&mut self, ids: &BTreeSet<Uuid>) {
        self.work_items.retain(|id, _| !ids.contains(id));
        self.deps.retain(|task, _| !ids.contains(task));
        for on in self.deps.values_mut() {
            on.retain(|d| !ids.contains(d));
        }
        let runs: BTreeSet<Uuid> = self
            .runs
            .values()
            .filter(|r| ids.contains(&r.task_id))
            .map(|r| r.id)
            .collect();
        self.remove_runs(&runs);
    }

    fn work_items_sorted(&self, mut items: Vec<WorkItem>) -> Vec<WorkItem> {
        items.sort_by(|a, b| (&a.path, a.sort_order, a.id).cmp(&(&b.path, b.sort_order, b.id)));
        items
    }
}

fn sorted_runs(mut runs: Vec<Run>, key: impl Fn(&Run) -> (DateTime<Utc>, Uuid)) -> Vec<Run> {
    runs.sort_by_key(|r| key(r));
    runs
}

fn take(limit: i64) -> usize {
    usize::try_from(limit.max(0)).unwrap_or(usize::MAX)
}

#[async_trait]
impl Tx for MemTx {
    async fn commit(self: Box<Self>) -> StoreResult<Journaled> {
        let MemTx {
            mut guard,
            work,
            events,
        } = *self;
        let last_seq = guard.last_seq;
        *guard = work;
        guard.last_seq = last_seq;
        Ok(events)
    }

    fn pending_events(&self) -> &Journaled {
        &self.events
    }
}

// The aggregates' parts of the transaction (after the helpers and
// macros above, which they use).
mod activity;
mod applysets;
mod attach;
mod charts;
mod deps;
mod events;
mod hosts;
mod idempotency;
mod leader;
mod managed;
mod named;
mod objects;
mod projects;
mod results;
mod runs;
mod schedules;
mod secrets;
mod sources;
mod tokens;
mod webhooks;
mod work_items;
