//! Writes a validated batch, object by object, through the rules: apply
//! decides *which* object changes (create, update, unchanged) and keeps
//! the batch cheap (the stored items it names read once, before
//! validation; new items written in bulk); the rules decide *how* (gate,
//! generation, conditions, events).

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use pam_manifests::kinds::{self, Manifest};
use pam_manifests::load::Document;
use pam_manifests::state::ProjectStatus;
use pam_manifests::ManifestError;
use pam_store::prelude::*;
use pam_store::{
    Host, Object, Project, Schedule, Secret, Source, StoreError, StoreResult, Webhook, WorkItem,
};
use serde_json::Value;
use uuid::Uuid;

use super::{Action, ApplyError, ApplyResult};
use crate::rules::hosts::{self, HostDesired};
use crate::rules::kind::Stored;
use crate::rules::meta::{self, Change, Desired};
use crate::rules::objects::{self, GenericObject, ObjectDesired};
use crate::rules::projects::{self, ProjectDesired};
use crate::rules::runs::{self, gate, RunDesired};
use crate::rules::schedules::{self, ScheduleDesired};
use crate::rules::secrets::{self, Keyring, SecretDesired};
use crate::rules::sources::{self, SourceDesired};
use crate::rules::webhooks::{self, WebhookDesired};
use crate::rules::work_items::{self, TaskDesired};
use crate::rules::RuleError;

pub(super) struct Writer<'t> {
    pub(super) tx: &'t mut dyn Tx,
    /// The keys Secrets are sealed with (None: the batch may hold none).
    ring: Option<&'t Keyring>,
    pub(super) now: DateTime<Utc>,
    pub(super) errors: Vec<ManifestError>,
    pub(super) results: Vec<ApplyResult>,
    /// The object of each written document's result (the first
    /// `ids.len()` results; prune's come after): where managed fields
    /// are recorded.
    pub(super) ids: Vec<Uuid>,
    /// Project slug → id, for tasks and runs.
    projects: HashMap<String, (Uuid, ProjectStatus)>,
    /// Work items by project id and name: every stored item the batch
    /// names (its tasks, their parents, its runs' tasks) with their
    /// ancestors, read once for validation ([`super::existing`]) — a name
    /// of the batch that is not here is not stored — and kept current by
    /// the writer. Never the whole project.
    items: HashMap<Uuid, HashMap<String, WorkItem>>,
    /// New work items not written yet (parents first), and their project
    /// slugs: [`Writer::flush_new_items`] writes them with one bulk insert
    /// and one bulk event append, not round trips per object.
    new_items: Vec<WorkItem>,
    new_item_projects: Vec<String>,
    /// The ids of the work items this batch created, written or not yet
    /// (`new_items`), by project id and name: parents, dependencies and
    /// tasks of later documents. Only ids: a big batch keeps no copy of
    /// the rows it wrote; the few places that need a row read
    /// it back.
    new_names: HashMap<(Uuid, String), Uuid>,
    /// The conditions of every object created by this batch, built once.
    created_conditions: Value,
    pub(super) new_runs: usize,
    /// Whether one of them targets a host or a selector.
    pub(super) new_targeted: bool,
    offline_after: std::time::Duration,
    /// Tasks whose `spec.dependsOn` this batch changes (new tasks with
    /// dependencies, stored ones whose list differs), by project id:
    /// written by [`Writer::write_dependencies`] once every task of the
    /// batch exists, so a link may name a task created later in the batch.
    dep_writes: Vec<(Uuid, String, Vec<String>)>,
}

/// What a kind's rules write with in [`Writer::upsert`]: the transaction
/// and the keys Secrets are sealed with.
type Rules<'a> = (&'a mut dyn Tx, Option<&'a Keyring>);

const KEYS: &str = "a batch with Secrets is written with the keyring";

/// New work items are written in bulk once this many are pending: a big
/// batch holds a bounded number of rows, COPY lines and event payloads at
/// a time, not all of them.
const FLUSH_EVERY: usize = 1_000;

/// The `dependsOn` names of a stored spec.
fn spec_depends_on(spec: &Value) -> Vec<String> {
    spec.get("dependsOn")
        .and_then(|d| serde_json::from_value(d.clone()).ok())
        .unwrap_or_default()
}

/// The result action of a change.
fn action(change: Change) -> Action {
    match change {
        Change::Unchanged => Action::Unchanged,
        Change::Metadata | Change::Spec => Action::Configured,
    }
}

pub(super) fn object_ref(m: &Manifest) -> String {
    match m.project() {
        Some(p) => format!("{p}/{}", m.name()),
        None => m.name().to_string(),
    }
}

/// A guarded-update conflict during apply names the object.
pub(super) fn conflict_named(e: StoreError, m: &Manifest) -> ApplyError {
    match e {
        StoreError::Conflict(_) => ApplyError::Conflict(format!(
            "{} {} was changed concurrently; reapply",
            m.kind(),
            object_ref(m)
        )),
        e => e.into(),
    }
}

impl<'t> Writer<'t> {
    pub(super) fn new(
        tx: &'t mut dyn Tx,
        ring: Option<&'t Keyring>,
        now: DateTime<Utc>,
        offline_after: std::time::Duration,
        items: HashMap<Uuid, HashMap<String, WorkItem>>,
    ) -> Writer<'t> {
        Writer {
            tx,
            ring,
            now,
            errors: Vec::new(),
            results: Vec::new(),
            ids: Vec::new(),
            projects: HashMap::new(),
            items,
            new_items: Vec::new(),
            new_item_projects: Vec::new(),
            new_names: HashMap::new(),
            created_conditions: meta::created_conditions(now),
            new_runs: 0,
            new_targeted: false,
            offline_after,
            dep_writes: Vec::new(),
        }
    }

    fn result(&mut self, m: &Manifest, id: Uuid, action: Action, generation: Option<i64>) {
        self.ids.push(id);
        self.results.push(ApplyResult {
            kind: m.kind().as_str(),
            project: m.project().map(|p| p.to_string()),
            name: m.name().to_string(),
            action,
            generation,
            message: None,
        });
    }

    /// A rule refused the document: per-field refusals become positioned
    /// errors (the batch goes on, to report every problem); anything else
    /// ends the batch.
    fn refused(&mut self, d: &Document, e: RuleError) -> Result<(), ApplyError> {
        match e {
            RuleError::Fields(fields) => {
                for (path, message) in fields {
                    self.errors.push(d.error_at(&path, message));
                }
                Ok(())
            }
            RuleError::Store(e) => Err(conflict_named(e, &d.manifest)),
        }
    }

    /// Apply's one get-or-create-or-update, for the kinds whose
    /// rules create and update them whole: `found` is the stored object of
    /// the document's name; none is created, else the document's
    /// resourceVersion is checked and the object updated.
    async fn upsert<T: Stored, D>(
        &mut self,
        (d, found, desired): (&Document, Option<T>, D),
        create: impl for<'a> FnOnce(Rules<'a>, D) -> BoxFuture<'a, StoreResult<T>>,
        update: impl for<'a> FnOnce(Rules<'a>, T, D) -> BoxFuture<'a, StoreResult<(T, Change)>>,
    ) -> Result<T, ApplyError> {
        let Some(row) = found else {
            let row = create((&mut *self.tx, self.ring), desired).await?;
            self.result(&d.manifest, row.id(), Action::Created, Some(1));
            return Ok(row);
        };
        self.check_rv(d, row.meta().resource_version)?;
        let (row, change) = update((&mut *self.tx, self.ring), row, desired)
            .await
            .map_err(|e| conflict_named(e, &d.manifest))?;
        let generation = Some(row.meta().generation);
        self.result(&d.manifest, row.id(), action(change), generation);
        Ok(row)
    }

    /// Checks `metadata.resourceVersion` against the stored one.
    fn check_rv(&self, d: &Document, stored_rv: i64) -> Result<(), ApplyError> {
        match d.manifest.resource_version() {
            Some(rv) if rv != stored_rv.to_string() => Err(ApplyError::Conflict(format!(
                "{} {}: resourceVersion {rv} is stale (the object is at {stored_rv}); get it again and reapply",
                d.manifest.kind(),
                object_ref(&d.manifest),
            ))),
            _ => Ok(()),
        }
    }

    async fn project_id(&mut self, slug: &str) -> Result<(Uuid, ProjectStatus), ApplyError> {
        if let Some(p) = self.projects.get(slug) {
            return Ok(*p);
        }
        let p = self
            .tx
            .by_name::<Project>((), slug)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("project {slug:?}")))?;
        self.projects.insert(slug.into(), (p.id, p.status));
        Ok((p.id, p.status))
    }

    /// The stored items of the project that the batch names, by name
    /// (none for a project this batch creates).
    fn items_of(&mut self, project_id: Uuid) -> &mut HashMap<String, WorkItem> {
        self.items.entry(project_id).or_default()
    }

    /// Writes the pending new work items and their `work_item.created`
    /// events in bulk. Called before any write that may depend on them.
    pub(super) async fn flush_new_items(&mut self) -> Result<(), ApplyError> {
        if self.new_items.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(&mut self.new_items);
        let slugs = std::mem::take(&mut self.new_item_projects);
        work_items::create_many(self.tx, items, &slugs, self.now).await?;
        Ok(())
    }

    /// The id of the task `name` of the project: stored, or created by
    /// this batch.
    fn task_id(&mut self, project_id: Uuid, name: &str) -> Option<Uuid> {
        match self.items_of(project_id).get(name) {
            Some(w) => Some(w.id),
            None => self.new_names.get(&(project_id, name.to_string())).copied(),
        }
    }

    /// The stored row of the task `name` of the project (one this batch
    /// created is read back: only its id is kept).
    async fn task_row(
        &mut self,
        project_id: Uuid,
        name: &str,
    ) -> Result<Option<WorkItem>, ApplyError> {
        if let Some(w) = self.items_of(project_id).get(name) {
            return Ok(Some(w.clone()));
        }
        match self.new_names.get(&(project_id, name.to_string())).copied() {
            Some(id) => {
                self.flush_new_items().await?;
                Ok(Some(self.fresh_item(id).await?))
            }
            None => Ok(None),
        }
    }

    async fn fresh_item(&mut self, id: Uuid) -> Result<WorkItem, ApplyError> {
        Ok(self
            .tx
            .get_work_item(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("work item {id}")))?)
    }

    pub(super) async fn apply_one(&mut self, d: &Document) -> Result<(), ApplyError> {
        match &d.manifest {
            Manifest::Project(p) => self.project(d, p).await,
            Manifest::Host(h) => self.host(d, h).await,
            Manifest::Task(t) => self.task(d, t).await,
            Manifest::Run(r) => self.run(d, r).await,
            Manifest::Source(s) => self.source(d, s).await,
            Manifest::Webhook(w) => self.webhook(d, w).await,
            Manifest::Secret(s) => self.secret(d, s).await,
            Manifest::Schedule(s) => self.schedule(d, s).await,
            // Every kind stored generically: no arm of its own.
            m => pam_manifests::for_generic_kind!(m.kind(), M => self.object::<M>(d).await),
        }
    }

    /// An object of a generically stored kind: its desired state as the
    /// document declares it (its spec's rules were checked on load).
    async fn object<M: kinds::Generic>(&mut self, d: &Document) -> Result<(), ApplyError> {
        let m = &d.manifest;
        let project_id = match m.project() {
            Some(p) => Some(self.project_id(p.as_str()).await?.0),
            None => None,
        };
        let desired = ObjectDesired {
            project_id,
            name: m.name().to_string(),
            desired: Desired::of(m),
        };
        let found = self
            .tx
            .by_name::<Object>((m.kind().as_str().into(), project_id), m.name().as_str())
            .await?
            .map(GenericObject::<M>::new);
        let now = self.now;
        self.upsert(
            (d, found, desired),
            |(tx, _), d| Box::pin(objects::create::<M>(tx, d, now)),
            |(tx, _), row, d| Box::pin(objects::update(tx, row, d, now)),
        )
        .await?;
        Ok(())
    }

    /// A Schedule: validation checked its timetable and its
    /// template's task.
    async fn schedule(&mut self, d: &Document, s: &kinds::Schedule) -> Result<(), ApplyError> {
        let (project_id, _) = self.project_id(s.metadata.project.as_str()).await?;
        let desired = ScheduleDesired::of(s, Desired::of(&d.manifest));
        let found = self
            .tx
            .by_name::<Schedule>(project_id, &desired.name)
            .await?;
        let now = self.now;
        self.upsert(
            (d, found, desired),
            |(tx, _), d| Box::pin(schedules::create(tx, project_id, d, now)),
            |(tx, _), row, d| Box::pin(schedules::update(tx, row, d, now)),
        )
        .await?;
        Ok(())
    }

    /// A Secret: sealed by the rule; the same values again are
    /// `unchanged` (their digests under the stored salt match).
    async fn secret(&mut self, d: &Document, s: &kinds::Secret) -> Result<(), ApplyError> {
        if self.ring.is_none() {
            return Err(ApplyError::BadRequest(
                "Secrets are applied through the API, not from a Source".into(),
            ));
        }
        let (project_id, _) = self.project_id(s.metadata.project.as_str()).await?;
        let values = match s.spec.values() {
            Ok(v) => v,
            Err(problems) => {
                // Validation refused these already; kept for callers
                // that skip it.
                for (path, message) in problems {
                    self.errors.push(d.error_at(&path, message));
                }
                return Ok(());
            }
        };
        let desired = SecretDesired::of(s, Desired::of(&d.manifest), values);
        let found = self.tx.by_name::<Secret>(project_id, &desired.name).await?;
        let now = self.now;
        self.upsert(
            (d, found, desired),
            // The keyring is there: checked above.
            |(tx, ring), d| Box::pin(secrets::create(tx, ring.expect(KEYS), project_id, d, now)),
            |(tx, ring), row, d| Box::pin(secrets::update(tx, ring.expect(KEYS), row, d, now)),
        )
        .await?;
        Ok(())
    }

    /// A Webhook; its topics and secret were checked before
    /// the batch was written ([`super::webhooks::check`]).
    async fn webhook(&mut self, d: &Document, w: &kinds::Webhook) -> Result<(), ApplyError> {
        let desired = WebhookDesired::of(w, Desired::of(&d.manifest));
        let found = self.tx.by_name::<Webhook>((), &desired.name).await?;
        let now = self.now;
        self.upsert(
            (d, found, desired),
            |(tx, _), d| Box::pin(webhooks::create(tx, d, now)),
            |(tx, _), row, d| Box::pin(webhooks::update(tx, row, d, now)),
        )
        .await?;
        Ok(())
    }

    async fn source(&mut self, d: &Document, s: &kinds::Source) -> Result<(), ApplyError> {
        let desired = SourceDesired::of(s, Desired::of(&d.manifest));
        let found = self.tx.by_name::<Source>((), &desired.name).await?;
        let now = self.now;
        self.upsert(
            (d, found, desired),
            |(tx, _), d| Box::pin(sources::create(tx, d, now)),
            |(tx, _), row, d| Box::pin(sources::update(tx, row, d, now)),
        )
        .await?;
        Ok(())
    }

    async fn project(&mut self, d: &Document, p: &kinds::Project) -> Result<(), ApplyError> {
        let desired = ProjectDesired::of(p, Desired::of(&d.manifest));
        let slug = desired.slug.clone();
        let found = self.tx.by_name::<Project>((), &slug).await?;
        let now = self.now;
        let row = self
            .upsert(
                (d, found, desired),
                |(tx, _), d| Box::pin(projects::create(tx, d, now)),
                |(tx, _), row, d| Box::pin(projects::update(tx, row, d, now)),
            )
            .await?;
        self.projects.insert(slug, (row.id, row.status));
        Ok(())
    }

    async fn host(&mut self, d: &Document, h: &kinds::Host) -> Result<(), ApplyError> {
        let desired = HostDesired::of(h, Desired::of(&d.manifest));
        let found = self.tx.by_name::<Host>((), &desired.name).await?;
        let (now, offline_after) = (self.now, self.offline_after);
        self.upsert(
            (d, found, desired),
            |(tx, _), d| Box::pin(hosts::create(tx, d, now)),
            |(tx, _), row, d| Box::pin(hosts::update(tx, row, d, offline_after, now)),
        )
        .await?;
        Ok(())
    }

    async fn task(&mut self, d: &Document, t: &kinds::Task) -> Result<(), ApplyError> {
        let now = self.now;
        let project_slug = t.metadata.project.to_string();
        let (project_id, _) = self.project_id(&project_slug).await?;
        let parent_id = match &t.spec.parent {
            None => None,
            Some(p) => Some(
                self.task_id(project_id, p.as_str())
                    .ok_or_else(|| StoreError::NotFound(format!("task {p}")))?,
            ),
        };
        // One created earlier in this batch is not reached (validation
        // refuses duplicates): it would be read back from the store.
        let existing = self.task_row(project_id, t.metadata.name.as_str()).await?;
        let deps: Vec<String> = t.spec.depends_on.iter().map(|n| n.to_string()).collect();
        let stored_deps = existing
            .as_ref()
            .map(|w| spec_depends_on(&w.meta.spec))
            .unwrap_or_default();
        if deps != stored_deps {
            self.dep_writes
                .push((project_id, t.metadata.name.to_string(), deps));
        }
        let desired = TaskDesired::of(t, parent_id, Desired::of(&d.manifest));
        let Some(cached) = existing else {
            let row = work_items::new_row(project_id, desired, &self.created_conditions, now);
            // Written in bulk by flush_new_items; known to later
            // documents (children, runs) from now on.
            let id = row.id;
            self.new_names.insert((project_id, row.name.clone()), id);
            self.new_items.push(row);
            self.new_item_projects.push(project_slug);
            self.result(&d.manifest, id, Action::Created, Some(1));
            if self.new_items.len() >= FLUSH_EVERY {
                self.flush_new_items().await?;
            }
            return Ok(());
        };
        // A cascade or reparent earlier in this batch may have moved the
        // stored row past the cache: read it again where that matters.
        let row = if d.manifest.resource_version().is_some() {
            self.fresh_item(cached.id).await?
        } else {
            cached
        };
        self.check_rv(d, row.meta.resource_version)?;
        if Desired::stored(&row.meta) == desired.desired {
            self.result(
                &d.manifest,
                row.id,
                Action::Unchanged,
                Some(row.meta.generation),
            );
            return Ok(());
        }
        // The writes below may refer to new items (a new parent).
        self.flush_new_items().await?;
        let row = self.fresh_item(row.id).await?;
        match work_items::update(self.tx, row, desired, &project_slug, now).await {
            Ok((row, change)) => {
                let (id, generation) = (row.id, row.meta.generation);
                self.items_of(project_id).insert(row.name.clone(), row);
                self.result(&d.manifest, id, action(change), Some(generation));
                Ok(())
            }
            Err(e) => self.refused(d, e),
        }
    }

    /// Writes the dependency links the batch changes, after
    /// every task of the batch is stored and before any run is created, so
    /// a new run of a blocked task is created blocked.
    pub(super) async fn write_dependencies(&mut self) -> Result<(), ApplyError> {
        self.flush_new_items().await?;
        for (project_id, name, deps) in std::mem::take(&mut self.dep_writes) {
            let mut find = |n: &str| {
                self.task_id(project_id, n)
                    .ok_or_else(|| StoreError::NotFound(format!("task {n}")))
            };
            let task = find(&name)?;
            let on = deps
                .iter()
                .map(|n| find(n))
                .collect::<Result<Vec<Uuid>, StoreError>>()?;
            gate::set_dependencies(self.tx, task, &on).await?;
        }
        Ok(())
    }

    async fn run(&mut self, d: &Document, r: &kinds::Run) -> Result<(), ApplyError> {
        let project_slug = r.metadata.project.to_string();
        let (project_id, _) = self.project_id(&project_slug).await?;
        let desired = RunDesired::of(r, Desired::of(&d.manifest));
        match self
            .tx
            .get_run_by_name(project_id, r.metadata.name.as_str())
            .await?
        {
            None => {
                // Validation checked the task exists and may carry runs.
                let task = self
                    .task_row(project_id, r.spec.task.as_str())
                    .await?
                    .ok_or_else(|| StoreError::NotFound(format!("task {}", r.spec.task)))?;
                let created =
                    runs::create(self.tx, project_id, &project_slug, &task, desired, self.now)
                        .await?;
                self.new_runs += 1;
                self.new_targeted |= r.spec.target.is_some();
                self.result(&d.manifest, created.id, Action::Created, Some(1));
            }
            Some(row) => {
                self.check_rv(d, row.meta.resource_version)?;
                match runs::update(self.tx, row, desired, self.now).await {
                    Ok((row, change)) => self.result(
                        &d.manifest,
                        row.id,
                        action(change),
                        Some(row.meta.generation),
                    ),
                    Err(e) => return self.refused(d, e),
                }
            }
        }
        Ok(())
    }
}
