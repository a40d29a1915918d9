//! The run aggregate: [`Run`] rows, their one-shot signal markers
//! (`processed_signals`) and the [`RunTx`] calls.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::kinds::EffectivePermissions;
use pam_manifests::protocol::{Entry, EntryKind};
use pam_manifests::state::{FailureReason, RunStatus};
use uuid::Uuid;

use crate::{Host, Labels, Meta, RunUsage, StoreError, StoreResult, Usage};

/// Where a run may be dispatched.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Target {
    /// Any eligible host.
    #[default]
    Any,
    /// The host with this name.
    Host(String),
    /// Hosts whose labels contain all of these (equality selector).
    Selector(Labels),
}

impl Target {
    /// Whether this target selects `host`: any host, the host of that
    /// name, or a host whose labels ([`Host::labels`]) contain every pair
    /// of the selector. Eligibility of the host itself (online, capacity) is not
    /// part of it.
    pub fn matches(&self, host: &Host) -> bool {
        match self {
            Target::Selector(_) => self.matches_labels(&host.name, &host.labels()),
            _ => self.matches_labels(&host.name, &Labels::new()),
        }
    }

    /// [`Target::matches`] given the host's name and its labels
    /// ([`Host::labels`]) already built: a pass over many runs builds
    /// each host's label set once.
    pub fn matches_labels(&self, host_name: &str, labels: &Labels) -> bool {
        match self {
            Target::Any => true,
            Target::Host(name) => name == host_name,
            Target::Selector(sel) => sel.iter().all(|(k, v)| labels.get(k) == Some(v)),
        }
    }
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
    /// Why the attempt failed, in words (a spawn failure's cause as the
    /// worker saw it); per attempt, cleared on requeue.
    pub failure_message: Option<String>,
    pub pending_since: DateTime<Utc>,
    /// When this pending run became dispatchable: its
    /// `pending_since`, or when its task's last dependency became done;
    /// `None` while blocked (a dependency not done). The dispatch timeout
    /// (OQ-15) counts from it. Computed by the store.
    pub dispatchable_since: Option<DateTime<Utc>>,
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
    /// Who asked for the stop (`{name, role}`, the request's actor), for
    /// `run.stopped`'s `actor`: the stop takes effect later,
    /// in a loop or the worker's report. Written with the stop only.
    pub stopped_by: Option<serde_json::Value>,
    /// When a failed run becomes due for its restart requeue.
    pub requeue_at: Option<DateTime<Utc>>,
    /// Whether an eligible host ever matched while pending (OQ-15).
    pub eligible_host_seen: bool,
    /// Token usage and cost: the current attempt's and all
    /// attempts'. Written by signal ingest.
    pub usage: RunUsage,
    /// The permissions settled when the run was created (its own, its
    /// task's, its project's or the default); `None` for a run created
    /// before they existed (its CLI's own default).
    pub permissions: Option<EffectivePermissions>,
    /// The provider's session id of the current attempt.
    pub session_id: Option<String>,
    /// The newest activity item of the current attempt, with its time.
    pub last_activity: Option<Entry>,
    /// The tool calls the current attempt's agent was refused.
    pub denials: Option<Denials>,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// The progress-sequence rule's SQL mirror of [`Run::advances_progress`]
/// (`$2` the signal's attempt, `$3` its seq), kept beside it so the two
/// stay one rule; the conformance suite runs both stores through it.
pub const ADVANCES_PROGRESS_SQL: &str =
    "attempt = $2 AND (last_progress_seq IS NULL OR last_progress_seq < $3)";

impl Run {
    /// The progress-sequence rule (pam-data-model.txt, processed_signals:
    /// "apply a progress signal only if seq > last_progress_seq", within
    /// the run's current attempt — the order is on (attempt, seq)). Its one
    /// home in Rust: the memory store and signal ingest's staging ask it;
    /// PostgreSQL's guard is [`ADVANCES_PROGRESS_SQL`].
    pub fn advances_progress(&self, attempt: i32, seq: i64) -> bool {
        self.attempt == attempt && self.last_progress_seq.is_none_or(|last| seq > last)
    }

    /// Applies progress `seq` of `attempt` when [`Self::advances_progress`]
    /// says so (last_progress_seq moves, resource_version + 1); returns
    /// whether it applied.
    pub fn advance_progress(&mut self, attempt: i32, seq: i64) -> bool {
        if !self.advances_progress(attempt, seq) {
            return false;
        }
        self.last_progress_seq = Some(seq);
        self.meta.resource_version += 1;
        true
    }

    /// Whether this run is assigned to `host_id`: a worker may report on,
    /// and send output of, only its own host's runs.
    pub fn is_on_host(&self, host_id: Uuid) -> bool {
        self.host_id == Some(host_id)
    }

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
        if update.failure_message.is_some() {
            self.failure_message = update.failure_message.clone();
        }
        self.started_at = update.started_at.or(self.started_at);
        self.finished_at = update.finished_at.or(self.finished_at);
        self.requeue_at = update.requeue_at.or(self.requeue_at);
        self.updated_at = now;
        self.meta.resource_version += 1;
        Ok(())
    }

    /// The tmux session name for a run id: `pam-<first 8 hex>`, in the
    /// one format the protocol defines ([`pam_manifests::protocol::session_name`]).
    pub fn session_name_for(id: Uuid) -> String {
        pam_manifests::protocol::session_name(id)
    }

    /// A new run `name` of `task_id` at its first attempt, pending since
    /// `now`: no host, progress, failure or usage yet, not yet
    /// dispatchable (the store computes that), and a plain spec (any
    /// host, one attempt, no backoff, the configured dispatch timeout,
    /// empty provider, prompt and cwd) that callers override with `..`.
    pub fn first_attempt(
        id: Uuid,
        (project_id, task_id): (Uuid, Uuid),
        name: impl Into<String>,
        now: DateTime<Utc>,
    ) -> Run {
        Run {
            id,
            project_id,
            task_id,
            name: name.into(),
            host_id: None,
            provider: String::new(),
            prompt: String::new(),
            cwd: String::new(),
            session_name: Run::session_name_for(id),
            status: RunStatus::Pending,
            attempt: 1,
            last_progress_seq: None,
            failure_reason: None,
            failure_message: None,
            pending_since: now,
            dispatchable_since: None,
            exit_code: None,
            started_at: None,
            finished_at: None,
            target: Target::Any,
            max_attempts: 1,
            backoff_seconds: 0,
            backoff_max_seconds: 0,
            dispatch_timeout_seconds: None,
            stop_requested: false,
            stopped_by: None,
            requeue_at: None,
            eligible_host_seen: false,
            usage: RunUsage::default(),
            permissions: None,
            session_id: None,
            last_activity: None,
            denials: None,
            meta: Meta::default(),
            created_at: now,
            updated_at: now,
        }
    }
}

/// Most distinct refused tool calls a run keeps (the count goes on).
pub const DENIALS_KEPT: usize = 10;

/// The tool calls an attempt's agent was refused by its permissions: how
/// many, the first [`DENIALS_KEPT`] distinct ones, and since when. The
/// run's `PermissionDenied` condition is read from it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Denials {
    pub count: u32,
    pub items: Vec<Denied>,
    pub since: DateTime<Utc>,
}

/// One refused tool call: the tool and what it would have acted on.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Denied {
    pub tool: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

impl Run {
    /// Records what a progress signal of the current attempt says the
    /// agent did (its `activity`, at `at`) and its session id: the newest
    /// item becomes `last_activity`, refused tool calls are counted into
    /// `denials`. Returns whether anything changed (resource_version is
    /// bumped once then). The caller has decided the signal applies.
    pub fn record_activity(
        &mut self,
        activity: &[Entry],
        session_id: Option<&str>,
        at: &str,
        now: DateTime<Utc>,
    ) -> bool {
        let mut changed = false;
        if let Some(id) = session_id.filter(|id| self.session_id.as_deref() != Some(id)) {
            self.session_id = Some(id.to_string());
            changed = true;
        }
        if let Some(last) = activity.last() {
            let mut last = last.clone();
            last.at = Some(at.to_string());
            self.last_activity = Some(last);
            changed = true;
        }
        for e in activity.iter().filter(|e| e.kind == EntryKind::Denied) {
            let d = self.denials.get_or_insert_with(|| Denials {
                count: 0,
                items: Vec::new(),
                since: now,
            });
            d.count += 1;
            let item = Denied {
                tool: e.tool.clone().unwrap_or_else(|| "?".into()),
                target: e.target.clone(),
            };
            if d.items.len() < DENIALS_KEPT && !d.items.contains(&item) {
                d.items.push(item);
            }
            changed = true;
        }
        if changed {
            self.meta.resource_version += 1;
        }
        changed
    }
}

/// Filter for [`Tx::list_runs`]; `None` fields do not filter.
#[derive(Debug, Clone, Default)]
pub struct RunFilter {
    pub project_id: Option<Uuid>,
    pub task_id: Option<Uuid>,
    pub host_id: Option<Uuid>,
    pub statuses: Option<Vec<RunStatus>>,
    /// Only these runs.
    pub ids: Option<Vec<Uuid>>,
}

/// A pending run as the dispatch pass reads it: what placing
/// it, stopping it and timing it out depend on, without its spec, prompt,
/// labels or usage. The pass reads a whole row ([`RunFilter::ids`]) only
/// for a run it writes, so a pass that leaves every run as it was reads
/// little more than before runs said why they wait. [`PendingRun::of`] is
/// the Rust form of the PostgreSQL store's column list; the conformance
/// suite keeps them equal.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRun {
    pub id: Uuid,
    pub project_id: Uuid,
    pub provider: String,
    /// `spec.providerVersion` ([`crate::dispatch::provider_version`]).
    pub provider_version: Option<String>,
    pub target: Target,
    pub stop_requested: bool,
    pub dispatchable_since: Option<DateTime<Utc>>,
    pub dispatch_timeout_seconds: Option<i32>,
    pub eligible_host_seen: bool,
    /// It works in a workspace ([`crate::dispatch::uses_workspace`]).
    pub uses_workspace: bool,
    /// It asks for `permissions: full` ([`crate::dispatch::asks_full`]).
    pub asks_full: bool,
    /// Its `Scheduled` condition's (reason, message) ([`scheduled_of`]).
    pub scheduled: Option<(String, String)>,
}

/// A run's stored `Scheduled` condition as (reason, message),
/// if it has one.
pub fn scheduled_of(m: &Meta) -> Option<(String, String)> {
    m.conditions.as_array()?.iter().find_map(|cond| {
        (cond["type"] == pam_manifests::conditions::SCHEDULED).then(|| {
            (
                cond["reason"].as_str().unwrap_or_default().to_string(),
                cond["message"].as_str().unwrap_or_default().to_string(),
            )
        })
    })
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
    pub failure_message: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    pub requeue_at: Option<DateTime<Utc>>,
}

/// Runs (`runs`, `processed_signals`). Part of every [`crate::Tx`].
#[async_trait]
pub trait RunTx: Send {
    /// Inserts a run as given (`session_name` included). A taken (project,
    /// name) or (host, session name) is AlreadyExists; a missing task or
    /// host is NotFound; a task outside `project_id` is Invalid. Whether the
    /// task's kind may carry runs, and whether the project is archived, is
    /// the caller's to check. `dispatchable_since` is computed: NULL when
    /// the task has a dependency that is not done, else `pending_since`.
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
    /// The runs of `project_id` whose names are in `names`, ordered by
    /// created_at, then id; names that are not stored are left out (apply
    /// reads the runs its batch names, not the project's).
    async fn runs_named(&mut self, project_id: Uuid, names: &[String]) -> StoreResult<Vec<Run>>;
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
    /// eligible_host_seen = false; pending_since = now (OQ-15);
    /// dispatchable_since = now, or NULL when the task is blocked.
    async fn requeue_run(&mut self, id: Uuid, attempt: i32, now: DateTime<Utc>)
        -> StoreResult<Run>;
    /// The spawning and running runs of these hosts, ordered as
    /// [`Tx::list_runs`] orders them: the desired sets of a heartbeat batch
    /// in one statement.
    async fn live_runs_on_hosts(&mut self, hosts: &[Uuid]) -> StoreResult<Vec<Run>>;
    /// Claims up to `limit` pending runs eligible for `host` (target Any,
    /// host name equal, or selector contained in the host's labels), oldest
    /// dispatchable_since first, skipping runs with stop_requested and
    /// blocked runs (dispatchable_since NULL, or a dependency not done now:
    /// a reopened dependency blocks before the gating pass notices), and
    /// runs of a project whose condition `BudgetExceeded` is True
    /// ([`crate::projects::over_budget`]), and runs waiting for a Secret
    /// ([`crate::SecretTx::set_run_secret_wait`]). Locks rows (`FOR UPDATE SKIP
    /// LOCKED`), so concurrent claimers never claim the same run; each claimed
    /// run becomes spawning with host_id = host. Eligibility of the host itself
    /// (online, capacity) is the caller's.
    async fn claim_runs(
        &mut self,
        host: &Host,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Run>>;
    /// Pending runs that are dispatchable or have a stop request (blocked
    /// runs and runs waiting for a Secret wait without a dispatch
    /// timeout), oldest pending_since first.
    async fn list_pending_runs(&mut self, limit: i64) -> StoreResult<Vec<PendingRun>>;
    /// Of [`RunTx::list_pending_runs`]'s runs, those whose spec reads a
    /// Secret ([`crate::secrets::reads_secrets`]): what the Secret loop
    /// re-checks each pass, read without the rest (the pass no longer reads
    /// every pending run twice).
    async fn list_pending_runs_reading_secrets(&mut self, limit: i64) -> StoreResult<Vec<Run>>;
    /// Failed runs whose requeue_at is at or before `now` and that have no
    /// stop request, oldest requeue_at first.
    async fn list_requeue_due(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>>;
    /// Marks pending runs as having seen an eligible host (OQ-15). A row
    /// another transaction holds is skipped, not waited for (a later pass
    /// sets it).
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
    /// last_progress_seq, the usage figures, updated_at, resource_version) where
    /// `resource_version = expected_rv`, in one statement. Every step that
    /// produced `run` already passed the state-machine gate. Any row that
    /// does not match is a Conflict and nothing is written.
    async fn write_run_states(&mut self, runs: &[(Run, i64)]) -> StoreResult<()>;
    /// Deletes a run (and its processed signals). Returns whether it existed.
    async fn delete_run(&mut self, id: Uuid) -> StoreResult<bool>;
    /// Number of runs in spawning or running on a host.
    async fn count_live_runs(&mut self, host_id: Uuid) -> StoreResult<i64>;
    /// Usage roll-up per project, one statement: the sum of
    /// every attempt's usage over the project's runs. Projects without
    /// runs are left out; order unspecified.
    async fn usage_by_project(&mut self, project_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, Usage)>>;
    /// Usage roll-up per work item, one statement: the sum of
    /// every attempt's usage over the runs of the item and of its
    /// descendants (the materialized path's subtree). Items without such
    /// runs are left out; order unspecified.
    async fn usage_by_work_item(&mut self, item_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, Usage)>>;
    /// How many runs are in each status (statuses with none are left out).
    async fn count_runs_by_status(&mut self) -> StoreResult<Vec<(RunStatus, i64)>>;
}

crate::named::row!(Run);

impl crate::NamedKind for Run {
    type Scope = Uuid;
    const NOUN: &'static str = "run";
    fn scope(&self) -> Uuid {
        self.project_id
    }
}
