//! The Store: everything pamd keeps, behind one trait with two
//! implementations — [`postgres::PgStore`] (production) and
//! [`memory::MemStore`] (fast unit tests of the loops). One behaviour suite,
//! [`conformance`], runs against both (River's driver test suite is the
//! model), so MemStore cannot drift from PostgreSQL.
//!
//! # Guarantees
//! - All access goes through a transaction ([`Store::begin`] → [`Tx`]);
//!   nothing is visible to others before [`Tx::commit`], and dropping a `Tx`
//!   without committing rolls it back.
//! - Status writes are guarded (`UPDATE … WHERE status = $expected`): zero
//!   rows is [`StoreError::Conflict`], or [`StoreError::NotFound`] when the
//!   row does not exist at all (every guarded write, spec or status). Before writing, every status change
//!   also passes the state-machine gate ([`pam_manifests::state::transition`]),
//!   so a store can never write an illegal edge ([`StoreError::Illegal`]).
//! - Spec writes are guarded by `resource_version`; a stale one is
//!   [`StoreError::Conflict`].
//! - Events appended in a transaction get sequence numbers in commit order:
//!   the first append of a transaction takes a transaction-scoped lock that
//!   is held until commit, so a reader that has seen seq N will never later
//!   see a newly committed seq < N. [`Tx::commit`] returns the appended
//!   events so the caller publishes them to subscribers only after commit.
//! - Every row write bumps that row's `resource_version` (spec writes, status
//!   writes, claims, progress); `generation` is the caller's to set.
//!
//! # Caveats
//! - After a failed `insert_*`, a Conflict or an Illegal, the transaction is
//!   still usable. After any other error, drop it and begin again:
//!   PostgreSQL aborts a transaction on a constraint error.

pub mod conformance;
pub mod memory;
pub mod postgres;

use std::collections::BTreeMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::{
    FailureReason, HostStatus, IllegalTransition, Platform, ProjectStatus, RunStatus, WorkItemKind,
    WorkItemStatus,
};
use serde_json::Value;
use uuid::Uuid;

pub type Labels = BTreeMap<String, String>;

/// What can go wrong in a store call. Every variant says when it happens.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A guarded update matched no row: the status, attempt or resource
    /// version was not what the caller expected (someone else changed it
    /// first). A row that is gone is [`StoreError::NotFound`] instead.
    #[error("conflict: {0}")]
    Conflict(String),
    /// An insert collided with a unique key (name, slug, session name…).
    /// The string names the constraint or the key.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The row the call names does not exist, or an insert references a
    /// row that does not (foreign key).
    #[error("not found: {0}")]
    NotFound(String),
    /// The state-machine gate refused the transition.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// A structural rule was broken (cross-project parent, a cycle, a CHECK
    /// constraint, deleting a host that runs still reference, …).
    #[error("invalid: {0}")]
    Invalid(String),
    /// The database failed (connection lost, …). Not the caller's fault.
    #[error("database error: {0}")]
    Database(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Metadata shared by the four declarative kinds.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// The applied spec as JSON (last-applied, used for diffs and
    /// idempotency).
    pub spec: Value,
    pub labels: Labels,
    pub annotations: Labels,
    /// Bumps on spec change only.
    pub generation: i64,
    /// Bumps on every write; optimistic concurrency token. Set by the store.
    pub resource_version: i64,
    pub observed_generation: i64,
    /// `[{type, status, reason, message, lastTransitionTime}]`.
    pub conditions: Value,
}

impl Default for Meta {
    fn default() -> Self {
        Meta {
            spec: Value::Object(Default::default()),
            labels: Labels::new(),
            annotations: Labels::new(),
            generation: 1,
            resource_version: 1,
            observed_generation: 0,
            conditions: Value::Array(vec![]),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Project {
    pub id: Uuid,
    /// Human-readable name (manifest `spec.displayName`).
    pub name: String,
    /// URL-safe identifier; the manifest's `metadata.name`.
    pub slug: String,
    pub description: String,
    pub status: ProjectStatus,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct WorkItem {
    pub id: Uuid,
    pub project_id: Uuid,
    pub parent_id: Option<Uuid>,
    /// Operator name, unique per project.
    pub name: String,
    pub kind: WorkItemKind,
    pub title: String,
    pub description: String,
    pub status: WorkItemStatus,
    pub assignee: Option<String>,
    /// Materialized path `<root short>/…/<own short>`; computed by the store.
    pub path: String,
    pub sort_order: i32,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Where a run may be dispatched.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Target {
    /// Any eligible host.
    #[default]
    Any,
    /// The host with this name.
    Host(String),
    /// Hosts whose labels contain all of these (equality selector).
    Selector(Labels),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: Uuid,
    pub project_id: Uuid,
    pub task_id: Uuid,
    /// Operator name, unique per project.
    pub name: String,
    pub host_id: Option<Uuid>,
    pub provider: String,
    pub prompt: String,
    pub cwd: String,
    /// `pam-<first 8 hex of id>`.
    pub session_name: String,
    pub status: RunStatus,
    pub attempt: i32,
    pub last_progress_seq: Option<i64>,
    pub failure_reason: Option<FailureReason>,
    pub pending_since: DateTime<Utc>,
    pub exit_code: Option<i32>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub target: Target,
    pub max_attempts: i32,
    pub backoff_seconds: i32,
    pub backoff_max_seconds: i32,
    /// None: the controller's configured dispatch timeout.
    pub dispatch_timeout_seconds: Option<i32>,
    /// Desired stop (`spec.stopped`).
    pub stop_requested: bool,
    /// When a failed run becomes due for its restart requeue.
    pub requeue_at: Option<DateTime<Utc>>,
    /// Whether an eligible host ever matched while pending (OQ-15).
    pub eligible_host_seen: bool,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Run {
    /// A guarded status transition applied to this row in memory, as
    /// [`Tx::transition_run`] does it in a store: the state-machine gate,
    /// then the status and attempt guard (Conflict), then each set field of
    /// `update` (COALESCE), updated_at = now, resource_version + 1.
    pub fn apply_transition(
        &mut self,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        pam_manifests::state::transition(from, to)?;
        if self.status != from || self.attempt != attempt {
            return Err(StoreError::Conflict(format!(
                "run {} is not {from} at attempt {attempt}",
                self.id
            )));
        }
        self.status = to;
        self.host_id = update.host_id.or(self.host_id);
        self.exit_code = update.exit_code.or(self.exit_code);
        self.failure_reason = update.failure_reason.or(self.failure_reason);
        self.started_at = update.started_at.or(self.started_at);
        self.finished_at = update.finished_at.or(self.finished_at);
        self.requeue_at = update.requeue_at.or(self.requeue_at);
        self.updated_at = now;
        self.meta.resource_version += 1;
        Ok(())
    }

    /// The tmux session name for a run id: `pam-<first 8 hex>`.
    pub fn session_name_for(id: Uuid) -> String {
        format!("pam-{}", short_id(id))
    }
}

/// First 8 lowercase hex characters of a UUID (path segments, sessions).
pub fn short_id(id: Uuid) -> String {
    id.simple().to_string()[..8].to_string()
}

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
    /// Labels matched by run target selectors (Host `spec.labels`, or what
    /// the worker reports); `meta.labels` are for selecting manifests.
    pub dispatch_labels: Labels,
    /// Desired (spec.disabled); status follows through the gate.
    pub disabled: bool,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub seq: i64,
    pub topic: String,
    pub payload: Value,
    pub created_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Operator,
    Worker,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiToken {
    pub id: Uuid,
    pub name: String,
    pub kind: TokenKind,
    /// SHA-256 hex of the token; the token itself is never stored.
    pub fingerprint: String,
    /// Worker tokens: the host they may act for.
    pub host_name: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// Filter for [`Tx::list_runs`]; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub project_id: Option<Uuid>,
    pub task_id: Option<Uuid>,
    pub host_id: Option<Uuid>,
    pub statuses: Option<Vec<RunStatus>>,
}

/// A recorded one-shot signal: `processed_signals (run_id, attempt, kind)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SignalMarker {
    pub run_id: Uuid,
    pub attempt: i32,
    pub kind: String,
}

/// The per-attempt fields a guarded run transition may set alongside the
/// status. `None` leaves a column as it is.
#[derive(Debug, Clone, Default)]
pub struct RunUpdate {
    pub host_id: Option<Uuid>,
    pub exit_code: Option<i32>,
    pub failure_reason: Option<FailureReason>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub requeue_at: Option<DateTime<Utc>>,
}

/// The storage backend.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Starts a transaction. Every read and write happens in one.
    async fn begin(&self) -> StoreResult<Box<dyn Tx>>;
}

/// One transaction. `now` arguments come from the caller's injected clock;
/// stores never read the wall clock.
#[async_trait]
pub trait Tx: Send {
    /// Commits, returning the events appended in this transaction (in seq
    /// order) so the caller can publish them now that they are durable.
    async fn commit(self: Box<Self>) -> StoreResult<Vec<Event>>;

    /// Whether this transaction appended events (so its commit must be
    /// ordered with the other journaling commits before publishing).
    /// Conservative default: yes.
    fn has_events(&self) -> bool {
        true
    }

    // ---- projects ----------------------------------------------------------

    /// Inserts a project (`resource_version` is stored as given, normally 1).
    /// A taken slug is [`StoreError::AlreadyExists`].
    async fn insert_project(&mut self, p: &Project) -> StoreResult<()>;
    async fn get_project(&mut self, id: Uuid) -> StoreResult<Option<Project>>;
    async fn get_project_by_slug(&mut self, slug: &str) -> StoreResult<Option<Project>>;
    /// All projects ordered by slug.
    async fn list_projects(&mut self) -> StoreResult<Vec<Project>>;
    /// Writes name, description, status, meta (except resource_version) and
    /// updated_at where `resource_version = expected_rv`, bumping it; returns
    /// the stored row. Zero rows: Conflict (or NotFound if the id is gone).
    /// A status change passes the gate only in the sense that both values are
    /// legal; projects have no transition graph (active ⇄ archived).
    async fn update_project(&mut self, p: &Project, expected_rv: i64) -> StoreResult<Project>;
    /// Deletes a project and (by FK cascade) its work items, runs and
    /// processed signals. Returns whether it existed.
    async fn delete_project(&mut self, id: Uuid) -> StoreResult<bool>;

    // ---- work items ---------------------------------------------------------

    /// Inserts a work item, computing `path` from its parent
    /// (`<parent path>/<short id>`, or `<short id>` at the root). The parent
    /// must exist and be in the same project ([`StoreError::Invalid`]); a
    /// missing project is [`StoreError::NotFound`]. The given `path` is
    /// ignored. Returns the stored item.
    async fn insert_work_item(&mut self, w: &WorkItem) -> StoreResult<WorkItem>;
    /// Inserts many work items at once (apply's bulk path); same checks
    /// and path computation as [`Tx::insert_work_item`]. Each item's parent
    /// is stored already or earlier in `items`. Returns the stored rows in
    /// input order. After an error, rows of the batch may remain in the
    /// transaction: callers roll back (apply does).
    async fn insert_work_items(&mut self, items: Vec<WorkItem>) -> StoreResult<Vec<WorkItem>> {
        let mut out = Vec::with_capacity(items.len());
        for w in &items {
            out.push(self.insert_work_item(w).await?);
        }
        Ok(out)
    }
    async fn get_work_item(&mut self, id: Uuid) -> StoreResult<Option<WorkItem>>;
    async fn get_work_item_by_name(
        &mut self,
        project_id: Uuid,
        name: &str,
    ) -> StoreResult<Option<WorkItem>>;
    /// A project's items ordered by path, then sort_order.
    async fn list_work_items(&mut self, project_id: Uuid) -> StoreResult<Vec<WorkItem>>;
    /// The item and its descendants, by path prefix
    /// (`path = $p OR path LIKE $p || '/%'`, within the item's project:
    /// short ids are not identities), ordered by path (byte order),
    /// sort_order. An unknown id is NotFound.
    async fn subtree(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>>;
    /// The same set through live parent links (recursive CTE), same order.
    async fn subtree_recursive(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>>;
    /// Writes title, description, assignee, sort_order, meta (except
    /// resource_version) and updated_at where `resource_version =
    /// expected_rv`, bumping it. Never changes kind, status, parent or path.
    async fn update_work_item(&mut self, w: &WorkItem, expected_rv: i64) -> StoreResult<WorkItem>;
    /// Guarded status write: passes the gate (`from → to`), then updates
    /// only `WHERE status = from`, bumping resource_version.
    async fn set_work_item_status(
        &mut self,
        id: Uuid,
        from: WorkItemStatus,
        to: WorkItemStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem>;
    /// Moves an item under `new_parent` (or to the root), rewriting the
    /// path of the item and every descendant in this transaction (located by
    /// the old path prefix). Refuses a parent in another project, the item
    /// itself, or one of its descendants (a cycle, OQ-6) with
    /// [`StoreError::Invalid`]. Bumps the item's resource_version.
    async fn reparent_work_item(
        &mut self,
        id: Uuid,
        new_parent: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem>;
    /// Deletes an item and (cascade) its descendants and their runs.
    async fn delete_work_item(&mut self, id: Uuid) -> StoreResult<bool>;

    // ---- runs ---------------------------------------------------------------

    /// Inserts a run as given (`session_name` included). A taken (project,
    /// name) or (host, session name) is AlreadyExists; a missing task or
    /// host is NotFound; a task outside `project_id` is Invalid. Whether the
    /// task's kind may carry runs, and whether the project is archived, is
    /// the caller's to check.
    async fn insert_run(&mut self, r: &Run) -> StoreResult<()>;
    async fn get_run(&mut self, id: Uuid) -> StoreResult<Option<Run>>;
    async fn get_run_by_name(&mut self, project_id: Uuid, name: &str) -> StoreResult<Option<Run>>;
    /// The run on `host_id` whose session is `session_name` (UNIQUE
    /// (host_id, session_name)).
    async fn get_run_by_session(
        &mut self,
        host_id: Uuid,
        session_name: &str,
    ) -> StoreResult<Option<Run>>;
    /// Runs matching the filter, ordered by created_at, then id.
    async fn list_runs(&mut self, f: &RunFilter) -> StoreResult<Vec<Run>>;
    /// Writes the operator-owned fields (target, restart policy,
    /// dispatch_timeout_seconds, stop_requested, meta except
    /// resource_version) where `resource_version = expected_rv`, bumping it.
    async fn update_run_spec(&mut self, r: &Run, expected_rv: i64) -> StoreResult<Run>;
    /// Guarded status write for the current attempt: passes the gate, then
    /// updates only `WHERE status = from AND attempt = attempt`, setting the
    /// given [`RunUpdate`] fields and updated_at. Zero rows: Conflict
    /// (NotFound if the run is gone).
    async fn transition_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<Run>;
    /// The restart requeue edge failed → pending (guarded on status and
    /// attempt): attempt += 1; host_id, started_at, finished_at, exit_code,
    /// last_progress_seq, failure_reason, requeue_at reset to NULL;
    /// eligible_host_seen = false; pending_since = now (OQ-15).
    async fn requeue_run(&mut self, id: Uuid, attempt: i32, now: DateTime<Utc>)
        -> StoreResult<Run>;
    /// Claims up to `limit` pending runs eligible for `host` (target Any,
    /// host name equal, or selector contained in the host's labels), oldest
    /// pending_since first, skipping runs with stop_requested. Locks rows
    /// (`FOR UPDATE SKIP LOCKED`), so concurrent claimers never claim the
    /// same run; each claimed run becomes spawning with host_id = host.
    /// Eligibility of the host itself (online, capacity) is the caller's.
    async fn claim_runs(
        &mut self,
        host: &Host,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Run>>;
    /// Pending runs, oldest pending_since first (index-driven).
    async fn list_pending_runs(&mut self, limit: i64) -> StoreResult<Vec<Run>>;
    /// Failed runs whose requeue_at is at or before `now` and that have no
    /// stop request, oldest requeue_at first.
    async fn list_requeue_due(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>>;
    /// Marks pending runs as having seen an eligible host (OQ-15).
    async fn mark_eligible_host_seen(&mut self, ids: &[Uuid]) -> StoreResult<()>;
    /// Applies progress `seq` for `attempt` only if `seq > last_progress_seq`
    /// (or it is NULL) and the attempt matches. Returns whether it applied;
    /// an unknown run is NotFound.
    async fn advance_progress(&mut self, id: Uuid, attempt: i32, seq: i64) -> StoreResult<bool>;
    /// Signal ingest's batch read: the runs with these ids that exist,
    /// row-locked until commit (`SELECT … ORDER BY id FOR UPDATE`: a fixed
    /// lock order, so two batches over the same runs serialize instead of
    /// deadlocking), together with every one-shot marker recorded for them
    /// (any attempt). Holding the locks, the caller can decide the whole
    /// batch in memory: no concurrent batch can add a marker or move one of
    /// these runs before it commits.
    async fn lock_runs_with_signals(
        &mut self,
        ids: &[Uuid],
    ) -> StoreResult<(Vec<Run>, Vec<SignalMarker>)>;
    /// Signal ingest's batch write of new one-shot markers (`INSERT … ON
    /// CONFLICT DO NOTHING`, one statement). Returns how many were new; the
    /// caller compares with how many it expected. An unknown run is
    /// NotFound.
    async fn insert_signal_markers(
        &mut self,
        markers: &[SignalMarker],
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
    /// Signal ingest's batch write of run state decided in memory: for each
    /// `(run, expected_rv)`, writes the per-attempt columns (status, host_id,
    /// exit_code, failure_reason, started_at, finished_at, requeue_at,
    /// last_progress_seq, updated_at, resource_version) where
    /// `resource_version = expected_rv`, in one statement. Every step that
    /// produced `run` already passed the state-machine gate. Any row that
    /// does not match is a Conflict and nothing is written.
    async fn write_run_states(&mut self, runs: &[(Run, i64)]) -> StoreResult<()>;
    /// Deletes a run (and its processed signals). Returns whether it existed.
    async fn delete_run(&mut self, id: Uuid) -> StoreResult<bool>;
    /// Number of runs in spawning or running on a host.
    async fn count_live_runs(&mut self, host_id: Uuid) -> StoreResult<i64>;

    // ---- hosts --------------------------------------------------------------

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
    /// Deletes a host; Invalid while any run references it (no cascade).
    async fn delete_host(&mut self, id: Uuid) -> StoreResult<bool>;

    // ---- events -------------------------------------------------------------

    /// Appends to the journal (seq assigned in commit order, see module doc).
    async fn append_event(
        &mut self,
        topic: &str,
        payload: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<Event>;
    /// Events with seq > `after`, ascending, at most `limit`.
    /// Appends many events in order (apply's bulk path); like
    /// [`Tx::append_event`] for each.
    async fn append_events(
        &mut self,
        events: Vec<(&'static str, Value)>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Event>> {
        let mut out = Vec::with_capacity(events.len());
        for (topic, payload) in events {
            out.push(self.append_event(topic, payload, now).await?);
        }
        Ok(out)
    }
    async fn events_after(&mut self, after: i64, limit: i64) -> StoreResult<Vec<Event>>;
    /// The journaled events of `topic` whose payload names one of these
    /// runs (`payload.run_id`), ascending by seq. pamd reads the operator
    /// signals of live runs back with it when it starts.
    async fn run_events_of_topic(&mut self, topic: &str, runs: &[Uuid]) -> StoreResult<Vec<Event>>;
    /// Deletes events created before `cutoff`; returns how many.
    async fn purge_events_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64>;
    /// (lowest, highest) seq still in the journal; None when empty.
    async fn event_bounds(&mut self) -> StoreResult<Option<(i64, i64)>>;
    /// The highest seq ever handed out (0 if none), committed or rolled
    /// back, purged or not. Takes the journal's order lock first (held
    /// until this transaction ends), so no append is in flight: every seq
    /// up to it is committed, rolled back or purged, and any later event
    /// gets a higher seq.
    async fn event_high_water(&mut self) -> StoreResult<i64>;

    // ---- tokens -------------------------------------------------------------

    async fn insert_token(&mut self, t: &ApiToken) -> StoreResult<()>;
    /// A token by fingerprint, revoked or not.
    async fn get_token_by_fingerprint(&mut self, fp: &str) -> StoreResult<Option<ApiToken>>;
    /// All tokens ordered by created_at.
    async fn list_tokens(&mut self) -> StoreResult<Vec<ApiToken>>;
    /// Sets revoked_at on a live token; returns whether one was revoked.
    async fn revoke_token(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<bool>;
}
