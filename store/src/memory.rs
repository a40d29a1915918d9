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
//!   usable (see [`super::postgres`]).
//!
//! [`PgStore`]: super::postgres::PgStore

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::{transition, HostStatus, RunStatus, WorkItemStatus};
use serde_json::Value;
use tokio::sync::{Mutex, OwnedMutexGuard};
use uuid::Uuid;

use super::{
    short_id, ApiToken, Event, Host, Project, Run, RunFilter, RunUpdate, SignalMarker, Store,
    StoreError, StoreResult, Target, TokenKind, Tx, WorkItem,
};

#[derive(Clone, Default)]
struct State {
    projects: HashMap<Uuid, Project>,
    work_items: HashMap<Uuid, WorkItem>,
    runs: HashMap<Uuid, Run>,
    /// (run, attempt, kind) → received_at.
    signals: BTreeMap<(Uuid, i32, String), DateTime<Utc>>,
    hosts: HashMap<Uuid, Host>,
    events: BTreeMap<i64, Event>,
    /// The last seq handed out. Lives outside the transaction copy
    /// (see `append_event`).
    last_seq: i64,
    tokens: HashMap<Uuid, ApiToken>,
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
            events: Vec::new(),
        }))
    }
}

struct MemTx {
    guard: OwnedMutexGuard<State>,
    work: State,
    events: Vec<Event>,
}

fn not_found(what: &str, id: Uuid) -> StoreError {
    StoreError::NotFound(format!("{what} {id}"))
}

/// The error for a guarded update that did not match.
fn conflict(why: String) -> StoreError {
    StoreError::Conflict(why)
}

fn target_matches(t: &Target, host: &Host) -> bool {
    match t {
        Target::Any => true,
        Target::Host(name) => *name == host.name,
        Target::Selector(sel) => sel
            .iter()
            .all(|(k, v)| host.dispatch_labels.get(k) == Some(v)),
    }
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
    /// UNIQUE (host_id, session_name) for `r` as it would be stored.
    fn check_session_unique(&self, r: &Run) -> StoreResult<()> {
        if let Some(h) = r.host_id {
            if !self.hosts.contains_key(&h) {
                return Err(StoreError::NotFound(format!("referenced row (host {h})")));
            }
            if self
                .runs
                .values()
                .any(|o| o.id != r.id && o.host_id == Some(h) && o.session_name == r.session_name)
            {
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

    fn remove_runs(&mut self, ids: &BTreeSet<Uuid>) {
        self.runs.retain(|id, _| !ids.contains(id));
        self.signals.retain(|(run, _, _), _| !ids.contains(run));
    }

    fn remove_work_items(&mut self, ids: &BTreeSet<Uuid>) {
        self.work_items.retain(|id, _| !ids.contains(id));
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
    async fn commit(self: Box<Self>) -> StoreResult<Vec<Event>> {
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

    // ---- projects ----------------------------------------------------------

    async fn insert_project(&mut self, p: &Project) -> StoreResult<()> {
        let s = &mut self.work;
        if s.projects.contains_key(&p.id) {
            return Err(StoreError::AlreadyExists("projects_pkey".into()));
        }
        if s.projects.values().any(|o| o.slug == p.slug) {
            return Err(StoreError::AlreadyExists("projects_slug_key".into()));
        }
        s.projects.insert(p.id, p.clone());
        Ok(())
    }

    async fn get_project(&mut self, id: Uuid) -> StoreResult<Option<Project>> {
        Ok(self.work.projects.get(&id).cloned())
    }

    async fn get_project_by_slug(&mut self, slug: &str) -> StoreResult<Option<Project>> {
        Ok(self
            .work
            .projects
            .values()
            .find(|p| p.slug == slug)
            .cloned())
    }

    async fn list_projects(&mut self) -> StoreResult<Vec<Project>> {
        let mut v: Vec<Project> = self.work.projects.values().cloned().collect();
        v.sort_by(|a, b| a.slug.cmp(&b.slug));
        Ok(v)
    }

    async fn update_project(&mut self, p: &Project, expected_rv: i64) -> StoreResult<Project> {
        let cur = self
            .work
            .projects
            .get_mut(&p.id)
            .ok_or_else(|| not_found("projects", p.id))?;
        if cur.meta.resource_version != expected_rv {
            return Err(conflict(format!(
                "project {} is not at resource version {expected_rv}",
                p.id
            )));
        }
        cur.name = p.name.clone();
        cur.description = p.description.clone();
        cur.status = p.status;
        let rv = cur.meta.resource_version + 1;
        cur.meta = p.meta.clone();
        cur.meta.resource_version = rv;
        cur.updated_at = p.updated_at;
        Ok(cur.clone())
    }

    async fn delete_project(&mut self, id: Uuid) -> StoreResult<bool> {
        let s = &mut self.work;
        if s.projects.remove(&id).is_none() {
            return Ok(false);
        }
        let items: BTreeSet<Uuid> = s
            .work_items
            .values()
            .filter(|w| w.project_id == id)
            .map(|w| w.id)
            .collect();
        s.remove_work_items(&items);
        let runs: BTreeSet<Uuid> = s
            .runs
            .values()
            .filter(|r| r.project_id == id)
            .map(|r| r.id)
            .collect();
        s.remove_runs(&runs);
        Ok(true)
    }

    // ---- work items ---------------------------------------------------------

    async fn insert_work_item(&mut self, w: &WorkItem) -> StoreResult<WorkItem> {
        let s = &mut self.work;
        let path = match w.parent_id {
            None => short_id(w.id),
            Some(parent) => {
                let p = s.work_items.get(&parent).ok_or_else(|| {
                    StoreError::Invalid(format!("parent work item {parent} does not exist"))
                })?;
                if p.project_id != w.project_id {
                    return Err(StoreError::Invalid(format!(
                        "parent work item {parent} is in another project"
                    )));
                }
                format!("{}/{}", p.path, short_id(w.id))
            }
        };
        if s.work_items.contains_key(&w.id) {
            return Err(StoreError::AlreadyExists("work_items_pkey".into()));
        }
        if !s.projects.contains_key(&w.project_id) {
            return Err(StoreError::NotFound(format!(
                "referenced row (project {})",
                w.project_id
            )));
        }
        if s.work_items
            .values()
            .any(|o| o.project_id == w.project_id && o.name == w.name)
        {
            return Err(StoreError::AlreadyExists("work_items_project_name".into()));
        }
        let mut stored = w.clone();
        stored.path = path;
        s.work_items.insert(w.id, stored.clone());
        Ok(stored)
    }

    async fn get_work_item(&mut self, id: Uuid) -> StoreResult<Option<WorkItem>> {
        Ok(self.work.work_items.get(&id).cloned())
    }

    async fn get_work_item_by_name(
        &mut self,
        project_id: Uuid,
        name: &str,
    ) -> StoreResult<Option<WorkItem>> {
        Ok(self
            .work
            .work_items
            .values()
            .find(|w| w.project_id == project_id && w.name == name)
            .cloned())
    }

    async fn list_work_items(&mut self, project_id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let items = self
            .work
            .work_items
            .values()
            .filter(|w| w.project_id == project_id)
            .cloned()
            .collect();
        Ok(self.work.work_items_sorted(items))
    }

    async fn subtree(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let root = self
            .work
            .work_items
            .get(&id)
            .ok_or_else(|| not_found("work item", id))?;
        let prefix = format!("{}/", root.path);
        let items = self
            .work
            .work_items
            .values()
            .filter(|w| {
                w.project_id == root.project_id
                    && (w.path == root.path || w.path.starts_with(&prefix))
            })
            .cloned()
            .collect();
        Ok(self.work.work_items_sorted(items))
    }

    async fn subtree_recursive(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>> {
        if !self.work.work_items.contains_key(&id) {
            return Err(not_found("work item", id));
        }
        let ids = self.work.descendants(id);
        let items = ids
            .iter()
            .map(|i| self.work.work_items[i].clone())
            .collect();
        Ok(self.work.work_items_sorted(items))
    }

    async fn update_work_item(&mut self, w: &WorkItem, expected_rv: i64) -> StoreResult<WorkItem> {
        let cur = self
            .work
            .work_items
            .get_mut(&w.id)
            .ok_or_else(|| not_found("work_items", w.id))?;
        if cur.meta.resource_version != expected_rv {
            return Err(conflict(format!(
                "work item {} is not at resource version {expected_rv}",
                w.id
            )));
        }
        cur.title = w.title.clone();
        cur.description = w.description.clone();
        cur.assignee = w.assignee.clone();
        cur.sort_order = w.sort_order;
        let rv = cur.meta.resource_version + 1;
        cur.meta = w.meta.clone();
        cur.meta.resource_version = rv;
        cur.updated_at = w.updated_at;
        Ok(cur.clone())
    }

    async fn set_work_item_status(
        &mut self,
        id: Uuid,
        from: WorkItemStatus,
        to: WorkItemStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem> {
        transition(from, to)?;
        let cur = self
            .work
            .work_items
            .get_mut(&id)
            .ok_or_else(|| not_found("work_items", id))?;
        if cur.status != from {
            return Err(conflict(format!("work item {id} is not {from}")));
        }
        cur.status = to;
        cur.updated_at = now;
        cur.meta.resource_version += 1;
        Ok(cur.clone())
    }

    async fn reparent_work_item(
        &mut self,
        id: Uuid,
        new_parent: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem> {
        let s = &mut self.work;
        let item = s
            .work_items
            .get(&id)
            .ok_or_else(|| not_found("work item", id))?;
        let (project, old_path) = (item.project_id, item.path.clone());
        let new_path = match new_parent {
            None => short_id(id),
            Some(parent) => {
                if parent == id {
                    return Err(StoreError::Invalid(format!(
                        "work item {id} cannot be its own parent"
                    )));
                }
                let p = s.work_items.get(&parent).ok_or_else(|| {
                    StoreError::Invalid(format!("parent work item {parent} does not exist"))
                })?;
                if p.project_id != project {
                    return Err(StoreError::Invalid(format!(
                        "parent work item {parent} is in another project"
                    )));
                }
                // OQ-6: the new parent must not be a descendant.
                if s.descendants(id).contains(&parent) {
                    return Err(StoreError::Invalid(format!(
                        "work item {parent} is a descendant of {id}: moving would make a cycle"
                    )));
                }
                format!("{}/{}", p.path, short_id(id))
            }
        };
        let prefix = format!("{old_path}/");
        for w in s.work_items.values_mut() {
            if w.project_id == project && (w.path == old_path || w.path.starts_with(&prefix)) {
                w.path = format!("{new_path}{}", &w.path[old_path.len()..]);
            }
        }
        let item = s.work_items.get_mut(&id).expect("checked above");
        item.parent_id = new_parent;
        item.updated_at = now;
        item.meta.resource_version += 1;
        Ok(item.clone())
    }

    async fn delete_work_item(&mut self, id: Uuid) -> StoreResult<bool> {
        if !self.work.work_items.contains_key(&id) {
            return Ok(false);
        }
        let ids = self.work.descendants(id);
        self.work.remove_work_items(&ids);
        Ok(true)
    }

    // ---- runs ---------------------------------------------------------------

    async fn insert_run(&mut self, r: &Run) -> StoreResult<()> {
        let s = &mut self.work;
        match s.work_items.get(&r.task_id) {
            None => return Err(StoreError::NotFound(format!("task {}", r.task_id))),
            Some(t) if t.project_id != r.project_id => {
                return Err(StoreError::Invalid(format!(
                    "task {} is not in project {}",
                    r.task_id, r.project_id
                )))
            }
            Some(_) => {}
        }
        check_run(r)?;
        if s.runs.contains_key(&r.id) {
            return Err(StoreError::AlreadyExists("runs_pkey".into()));
        }
        if s.runs
            .values()
            .any(|o| o.project_id == r.project_id && o.name == r.name)
        {
            return Err(StoreError::AlreadyExists("runs_project_name".into()));
        }
        s.check_session_unique(r)?;
        s.runs.insert(r.id, r.clone());
        Ok(())
    }

    async fn get_run(&mut self, id: Uuid) -> StoreResult<Option<Run>> {
        Ok(self.work.runs.get(&id).cloned())
    }

    async fn get_run_by_session(
        &mut self,
        host_id: Uuid,
        session_name: &str,
    ) -> StoreResult<Option<Run>> {
        Ok(self
            .work
            .runs
            .values()
            .find(|r| r.host_id == Some(host_id) && r.session_name == session_name)
            .cloned())
    }

    async fn get_run_by_name(&mut self, project_id: Uuid, name: &str) -> StoreResult<Option<Run>> {
        Ok(self
            .work
            .runs
            .values()
            .find(|r| r.project_id == project_id && r.name == name)
            .cloned())
    }

    async fn list_runs(&mut self, f: &RunFilter) -> StoreResult<Vec<Run>> {
        let runs = self
            .work
            .runs
            .values()
            .filter(|r| f.project_id.is_none_or(|p| r.project_id == p))
            .filter(|r| f.task_id.is_none_or(|t| r.task_id == t))
            .filter(|r| f.host_id.is_none_or(|h| r.host_id == Some(h)))
            .filter(|r| f.statuses.as_ref().is_none_or(|s| s.contains(&r.status)))
            .cloned()
            .collect();
        Ok(sorted_runs(runs, |r| (r.created_at, r.id)))
    }

    async fn update_run_spec(&mut self, r: &Run, expected_rv: i64) -> StoreResult<Run> {
        let cur = self
            .work
            .runs
            .get_mut(&r.id)
            .ok_or_else(|| not_found("runs", r.id))?;
        if cur.meta.resource_version != expected_rv {
            return Err(conflict(format!(
                "run {} is not at resource version {expected_rv}",
                r.id
            )));
        }
        let mut next = cur.clone();
        next.target = r.target.clone();
        next.max_attempts = r.max_attempts;
        next.backoff_seconds = r.backoff_seconds;
        next.backoff_max_seconds = r.backoff_max_seconds;
        next.dispatch_timeout_seconds = r.dispatch_timeout_seconds;
        next.stop_requested = r.stop_requested;
        next.meta = r.meta.clone();
        next.meta.resource_version = cur.meta.resource_version + 1;
        next.updated_at = r.updated_at;
        check_run(&next)?;
        *cur = next;
        Ok(cur.clone())
    }

    async fn transition_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        let s = &mut self.work;
        let mut next = s
            .runs
            .get(&id)
            .ok_or_else(|| not_found("runs", id))?
            .clone();
        next.apply_transition(attempt, from, to, update, now)?;
        s.check_session_unique(&next)?;
        s.runs.insert(id, next.clone());
        Ok(next)
    }

    async fn requeue_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        transition(RunStatus::Failed, RunStatus::Pending)?;
        let cur = self
            .work
            .runs
            .get_mut(&id)
            .ok_or_else(|| not_found("runs", id))?;
        if cur.status != RunStatus::Failed || cur.attempt != attempt {
            return Err(conflict(format!(
                "run {id} is not failed at attempt {attempt}"
            )));
        }
        cur.status = RunStatus::Pending;
        cur.attempt += 1;
        cur.host_id = None;
        cur.started_at = None;
        cur.finished_at = None;
        cur.exit_code = None;
        cur.last_progress_seq = None;
        cur.failure_reason = None;
        cur.requeue_at = None;
        cur.eligible_host_seen = false;
        cur.pending_since = now;
        cur.updated_at = now;
        cur.meta.resource_version += 1;
        Ok(cur.clone())
    }

    async fn claim_runs(
        &mut self,
        host: &Host,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Run>> {
        transition(RunStatus::Pending, RunStatus::Spawning)?;
        let s = &mut self.work;
        let candidates: Vec<Run> = s
            .runs
            .values()
            .filter(|r| {
                r.status == RunStatus::Pending
                    && !r.stop_requested
                    && target_matches(&r.target, host)
            })
            .cloned()
            .collect();
        let mut claimed = Vec::new();
        for mut r in sorted_runs(candidates, |r| (r.pending_since, r.id))
            .into_iter()
            .take(take(limit))
        {
            r.status = RunStatus::Spawning;
            r.host_id = Some(host.id);
            r.updated_at = now;
            r.meta.resource_version += 1;
            s.check_session_unique(&r)?;
            s.runs.insert(r.id, r.clone());
            claimed.push(r);
        }
        Ok(claimed)
    }

    async fn list_pending_runs(&mut self, limit: i64) -> StoreResult<Vec<Run>> {
        let runs = self
            .work
            .runs
            .values()
            .filter(|r| r.status == RunStatus::Pending)
            .cloned()
            .collect();
        let mut v = sorted_runs(runs, |r| (r.pending_since, r.id));
        v.truncate(take(limit));
        Ok(v)
    }

    async fn list_requeue_due(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        let runs = self
            .work
            .runs
            .values()
            .filter(|r| {
                r.status == RunStatus::Failed
                    && !r.stop_requested
                    && r.requeue_at.is_some_and(|t| t <= now)
            })
            .cloned()
            .collect();
        let mut v = sorted_runs(runs, |r| (r.requeue_at.expect("filtered"), r.id));
        v.truncate(take(limit));
        Ok(v)
    }

    async fn mark_eligible_host_seen(&mut self, ids: &[Uuid]) -> StoreResult<()> {
        for id in ids {
            if let Some(r) = self.work.runs.get_mut(id) {
                if r.status == RunStatus::Pending && !r.eligible_host_seen {
                    r.eligible_host_seen = true;
                    r.meta.resource_version += 1;
                }
            }
        }
        Ok(())
    }

    async fn advance_progress(&mut self, id: Uuid, attempt: i32, seq: i64) -> StoreResult<bool> {
        let r = self
            .work
            .runs
            .get_mut(&id)
            .ok_or_else(|| not_found("run", id))?;
        if r.attempt != attempt || r.last_progress_seq.is_some_and(|last| last >= seq) {
            return Ok(false);
        }
        r.last_progress_seq = Some(seq);
        r.meta.resource_version += 1;
        Ok(true)
    }

    async fn lock_runs_with_signals(
        &mut self,
        ids: &[Uuid],
    ) -> StoreResult<(Vec<Run>, Vec<SignalMarker>)> {
        // The whole store is locked by this transaction already.
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let runs = ids
            .iter()
            .filter_map(|id| self.work.runs.get(id).cloned())
            .collect();
        let markers = ids
            .iter()
            .flat_map(|id| {
                self.work
                    .signals
                    .range((*id, i32::MIN, String::new())..)
                    .take_while(move |((r, _, _), _)| r == id)
                    .map(|((run_id, attempt, kind), _)| SignalMarker {
                        run_id: *run_id,
                        attempt: *attempt,
                        kind: kind.clone(),
                    })
            })
            .collect();
        Ok((runs, markers))
    }

    async fn insert_signal_markers(
        &mut self,
        markers: &[SignalMarker],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let s = &mut self.work;
        if let Some(m) = markers.iter().find(|m| !s.runs.contains_key(&m.run_id)) {
            return Err(StoreError::NotFound(format!(
                "referenced row (run {})",
                m.run_id
            )));
        }
        let mut new = 0;
        for m in markers {
            let key = (m.run_id, m.attempt, m.kind.clone());
            if let std::collections::btree_map::Entry::Vacant(e) = s.signals.entry(key) {
                e.insert(now);
                new += 1;
            }
        }
        Ok(new)
    }

    async fn write_run_states(&mut self, runs: &[(Run, i64)]) -> StoreResult<()> {
        let s = &mut self.work;
        for (r, expected) in runs {
            let cur = s.runs.get(&r.id).ok_or_else(|| not_found("runs", r.id))?;
            if cur.meta.resource_version != *expected {
                return Err(conflict(format!(
                    "run {} changed since it was read (resourceVersion {} ≠ {expected})",
                    r.id, cur.meta.resource_version
                )));
            }
        }
        for (r, _) in runs {
            let cur = s.runs.get_mut(&r.id).expect("checked above");
            cur.status = r.status;
            cur.host_id = r.host_id;
            cur.exit_code = r.exit_code;
            cur.failure_reason = r.failure_reason;
            cur.started_at = r.started_at;
            cur.finished_at = r.finished_at;
            cur.requeue_at = r.requeue_at;
            cur.last_progress_seq = r.last_progress_seq;
            cur.updated_at = r.updated_at;
            cur.meta.resource_version = r.meta.resource_version;
        }
        Ok(())
    }

    async fn delete_run(&mut self, id: Uuid) -> StoreResult<bool> {
        if !self.work.runs.contains_key(&id) {
            return Ok(false);
        }
        self.work.remove_runs(&BTreeSet::from([id]));
        Ok(true)
    }

    async fn count_live_runs(&mut self, host_id: Uuid) -> StoreResult<i64> {
        Ok(self
            .work
            .runs
            .values()
            .filter(|r| {
                r.host_id == Some(host_id)
                    && matches!(r.status, RunStatus::Spawning | RunStatus::Running)
            })
            .count() as i64)
    }

    // ---- hosts --------------------------------------------------------------

    async fn insert_host(&mut self, h: &Host) -> StoreResult<()> {
        check_host(h)?;
        let s = &mut self.work;
        if s.hosts.contains_key(&h.id) {
            return Err(StoreError::AlreadyExists("hosts_pkey".into()));
        }
        if s.hosts.values().any(|o| o.name == h.name) {
            return Err(StoreError::AlreadyExists("hosts_name_key".into()));
        }
        s.hosts.insert(h.id, h.clone());
        Ok(())
    }

    async fn get_host(&mut self, id: Uuid) -> StoreResult<Option<Host>> {
        Ok(self.work.hosts.get(&id).cloned())
    }

    async fn get_host_by_name(&mut self, name: &str) -> StoreResult<Option<Host>> {
        Ok(self.work.hosts.values().find(|h| h.name == name).cloned())
    }

    async fn list_hosts(&mut self) -> StoreResult<Vec<Host>> {
        let mut v: Vec<Host> = self.work.hosts.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(v)
    }

    async fn update_host(&mut self, h: &Host, expected_rv: i64) -> StoreResult<Host> {
        let cur = self
            .work
            .hosts
            .get_mut(&h.id)
            .ok_or_else(|| not_found("hosts", h.id))?;
        if cur.meta.resource_version != expected_rv {
            return Err(conflict(format!(
                "host {} is not at resource version {expected_rv}",
                h.id
            )));
        }
        check_host(h)?;
        cur.platform = h.platform;
        cur.token_fingerprint = h.token_fingerprint.clone();
        cur.instance_id = h.instance_id;
        cur.instance_suspect = h.instance_suspect;
        cur.instance_flagged_at = h.instance_flagged_at;
        cur.presented_instance_id = h.presented_instance_id;
        cur.dispatch_labels = h.dispatch_labels.clone();
        cur.last_seen_at = h.last_seen_at;
        cur.capacity = h.capacity;
        cur.disabled = h.disabled;
        let rv = cur.meta.resource_version + 1;
        cur.meta = h.meta.clone();
        cur.meta.resource_version = rv;
        cur.updated_at = h.updated_at;
        Ok(cur.clone())
    }

    async fn set_host_status(
        &mut self,
        id: Uuid,
        from: HostStatus,
        to: HostStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<Host> {
        transition(from, to)?;
        let cur = self
            .work
            .hosts
            .get_mut(&id)
            .ok_or_else(|| not_found("hosts", id))?;
        if cur.status != from {
            return Err(conflict(format!("host {id} is not {from}")));
        }
        cur.status = to;
        cur.updated_at = now;
        cur.meta.resource_version += 1;
        Ok(cur.clone())
    }

    async fn list_silent_hosts(&mut self, cutoff: DateTime<Utc>) -> StoreResult<Vec<Host>> {
        let mut v: Vec<Host> = self
            .work
            .hosts
            .values()
            .filter(|h| {
                h.status == HostStatus::Online && h.last_seen_at.is_some_and(|t| t < cutoff)
            })
            .cloned()
            .collect();
        v.sort_by(|a, b| (a.last_seen_at, &a.name).cmp(&(b.last_seen_at, &b.name)));
        Ok(v)
    }

    async fn delete_host(&mut self, id: Uuid) -> StoreResult<bool> {
        let s = &mut self.work;
        if !s.hosts.contains_key(&id) {
            return Ok(false);
        }
        if s.runs.values().any(|r| r.host_id == Some(id)) {
            return Err(StoreError::Invalid(
                "still referenced (runs_host_id_fkey)".into(),
            ));
        }
        s.hosts.remove(&id);
        Ok(true)
    }

    // ---- events -------------------------------------------------------------

    async fn append_event(
        &mut self,
        topic: &str,
        payload: Value,
        now: DateTime<Utc>,
    ) -> StoreResult<Event> {
        // Drawn from the shared state at once, like PostgreSQL's identity:
        // a rolled-back transaction leaves a gap, a seq is never reused.
        self.guard.last_seq += 1;
        let s = &mut self.work;
        let ev = Event {
            seq: self.guard.last_seq,
            topic: topic.to_string(),
            payload,
            created_at: now,
        };
        s.events.insert(ev.seq, ev.clone());
        self.events.push(ev.clone());
        Ok(ev)
    }

    async fn events_after(&mut self, after: i64, limit: i64) -> StoreResult<Vec<Event>> {
        Ok(self
            .work
            .events
            .range(after.saturating_add(1)..)
            .take(take(limit))
            .map(|(_, e)| e.clone())
            .collect())
    }

    async fn run_events_of_topic(&mut self, topic: &str, runs: &[Uuid]) -> StoreResult<Vec<Event>> {
        let ids: Vec<Value> = runs
            .iter()
            .map(|r| serde_json::json!(r.to_string()))
            .collect();
        Ok(self
            .work
            .events
            .values()
            .filter(|e| e.topic == topic && ids.contains(&e.payload["run_id"]))
            .cloned()
            .collect())
    }

    async fn purge_events_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let before = self.work.events.len();
        self.work.events.retain(|_, e| e.created_at >= cutoff);
        Ok((before - self.work.events.len()) as u64)
    }

    async fn event_bounds(&mut self) -> StoreResult<Option<(i64, i64)>> {
        let ev = &self.work.events;
        Ok(ev
            .first_key_value()
            .zip(ev.last_key_value())
            .map(|((lo, _), (hi, _))| (*lo, *hi)))
    }

    async fn event_high_water(&mut self) -> StoreResult<i64> {
        // A transaction holds the whole state: nothing else is in flight.
        Ok(self.guard.last_seq)
    }

    // ---- tokens -------------------------------------------------------------

    async fn insert_token(&mut self, t: &ApiToken) -> StoreResult<()> {
        if (t.kind == TokenKind::Worker) != t.host_name.is_some() {
            return Err(StoreError::Invalid("check api_tokens_check failed".into()));
        }
        let s = &mut self.work;
        if s.tokens.contains_key(&t.id) {
            return Err(StoreError::AlreadyExists("api_tokens_pkey".into()));
        }
        if s.tokens.values().any(|o| o.fingerprint == t.fingerprint) {
            return Err(StoreError::AlreadyExists(
                "api_tokens_fingerprint_key".into(),
            ));
        }
        let live_operator = |o: &ApiToken| o.kind == TokenKind::Operator && o.revoked_at.is_none();
        if live_operator(t)
            && s.tokens
                .values()
                .any(|o| live_operator(o) && o.name == t.name)
        {
            return Err(StoreError::AlreadyExists("api_tokens_operator_name".into()));
        }
        s.tokens.insert(t.id, t.clone());
        Ok(())
    }

    async fn get_token_by_fingerprint(&mut self, fp: &str) -> StoreResult<Option<ApiToken>> {
        Ok(self
            .work
            .tokens
            .values()
            .find(|t| t.fingerprint == fp)
            .cloned())
    }

    async fn list_tokens(&mut self) -> StoreResult<Vec<ApiToken>> {
        let mut v: Vec<ApiToken> = self.work.tokens.values().cloned().collect();
        v.sort_by_key(|t| (t.created_at, t.id));
        Ok(v)
    }

    async fn revoke_token(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<bool> {
        match self.work.tokens.get_mut(&id) {
            Some(t) if t.revoked_at.is_none() => {
                t.revoked_at = Some(now);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
