//! Declarative apply: a batch of manifests is validated whole, then written
//! in one transaction — or, on any error, not at all.
//!
//! # Guarantees
//! - Idempotent: an object whose spec, labels and annotations equal what is
//!   stored is `unchanged` — no write, no new generation, no event.
//! - `metadata.generation` bumps on spec change only; `resourceVersion` on
//!   every write; a stale `resourceVersion` in the input is a conflict
//!   naming the object.
//! - Immutable fields (a Run's task, provider, prompt, cwd; a Task's type)
//!   refuse changes, naming the field.
//! - A Task's `spec.status` is applied when it changed from the last applied
//!   spec, through the state-machine gate; cancelling cascades `cancelled`
//!   to non-done descendants (their specs untouched); a parent never
//!   auto-completes. A changed parent reparents the subtree in this
//!   transaction and journals `work_item.reparented` once.
//! - Dry run executes everything and rolls back.
//! - Prune deletes only objects matching the selector or applyset, of the
//!   kinds present in the input, that the input does not name; never
//!   without a selector.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{self, Kind, Manifest};
use pam_manifests::load::Document;
use pam_manifests::names::{LabelSelector, Name};
use pam_manifests::state::{
    self as sm, HostStatus, ProjectStatus, RunStatus, WorkItemKind, WorkItemStatus,
};
use pam_manifests::validate::{self, InMemoryState, StoredProject, StoredTask};
use pam_manifests::ManifestError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use uuid::Uuid;

use crate::events::topic;
use crate::reconcile::{runs as run_rules, Ctx};
use crate::store::{self, Labels, Meta, StoreError, Target, Tx};

/// The label apply writes when `applyset` is given.
pub const APPLYSET_LABEL: &str = "applyset.pam.dev/name";

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApplyRequest {
    #[serde(default)]
    pub files: Vec<FileIn>,
    #[serde(default)]
    pub objects: Vec<Value>,
    #[serde(default)]
    pub dry_run: bool,
    #[serde(default)]
    pub prune: bool,
    #[serde(default)]
    pub selector: Option<String>,
    #[serde(default)]
    pub applyset: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct FileIn {
    pub name: String,
    pub content: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Created,
    Configured,
    Unchanged,
    Pruned,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ApplyResult {
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub name: String,
    pub action: Action,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The batch is invalid; every problem, positioned.
    #[error("{} invalid document(s)", .0.len())]
    Invalid(Vec<ManifestError>),
    /// A request-level problem (prune without selector, bad selector).
    #[error("{0}")]
    BadRequest(String),
    /// A stale resourceVersion or a lost race, naming the object.
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Parses the request's files and objects into documents, or every error.
pub fn documents(req: &ApplyRequest) -> Result<Vec<Document>, ApplyError> {
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for parsed in parse_files(&req.files) {
        match parsed {
            Ok(d) => docs.extend(d),
            Err(e) => errors.extend(e),
        }
    }
    for (i, obj) in req.objects.iter().enumerate() {
        let label = "<request>";
        if obj.get("status").is_some() {
            errors.push(plain_error(
                label,
                i,
                "status",
                "status is set by the controller; remove the status block",
            ));
            continue;
        }
        match Manifest::from_json(obj.clone()) {
            Ok(m) => docs.push(Document::from_manifest(label, i, m)),
            Err(e) => errors.push(plain_error(label, i, "", &e.to_string())),
        }
    }
    if errors.is_empty() {
        Ok(docs)
    } else {
        Err(ApplyError::Invalid(errors))
    }
}

/// Parses files, in input order; a big batch of files on as many threads
/// as there are cores (YAML parsing is apply's main CPU cost).
fn parse_files(files: &[FileIn]) -> Vec<Result<Vec<Document>, Vec<ManifestError>>> {
    let parse = |f: &FileIn| pam_manifests::load::parse_documents(&f.name, &f.content);
    let bytes: usize = files.iter().map(|f| f.content.len()).sum();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    if threads < 2 || bytes < 256 * 1024 {
        return files.iter().map(parse).collect();
    }
    // Contiguous chunks of files, one per thread, joined in order.
    let per_thread = files.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || chunk.iter().map(parse).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a parse thread panicked"))
            .collect()
    })
}

fn plain_error(file: &str, document: usize, path: &str, message: &str) -> ManifestError {
    ManifestError {
        file: file.into(),
        document,
        line: 0,
        column: 0,
        path: path.into(),
        message: message.into(),
    }
}

/// Applies a request: parse, validate whole, write in one transaction (or
/// roll back on dry run), publish events after commit.
pub async fn apply(ctx: &Ctx, req: &ApplyRequest) -> Result<Vec<ApplyResult>, ApplyError> {
    let prune_selector = prune_selector(req)?;
    let mut docs = documents(req)?;
    if let Some(set) = &req.applyset {
        let key = pam_manifests::LabelKey::parse(APPLYSET_LABEL).expect("valid key");
        let value = pam_manifests::LabelValue::parse(set)
            .map_err(|e| ApplyError::BadRequest(format!("applyset: {e}")))?;
        for d in &mut docs {
            labels_mut(&mut d.manifest).insert(key.clone(), value.clone());
        }
    }
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let existing = load_existing(tx.as_mut(), &docs).await?;
    let errors = validate::validate_batch(&docs, &existing);
    if !errors.is_empty() {
        return Err(ApplyError::Invalid(errors));
    }
    let mut w = Writer {
        tx: tx.as_mut(),
        now,
        errors: Vec::new(),
        results: Vec::new(),
        projects: HashMap::new(),
        items: HashMap::new(),
        new_items: Vec::new(),
        new_item_projects: Vec::new(),
        new_names: HashMap::new(),
        created_condition: applied_condition(now, 1),
        new_runs: false,
        offline_after: chrono::Duration::from_std(ctx.thresholds.offline_after)
            .expect("threshold in range"),
    };
    for kind in [Kind::Project, Kind::Host, Kind::Task, Kind::Run] {
        let of_kind: Vec<&Document> = docs.iter().filter(|d| d.manifest.kind() == kind).collect();
        let ordered = if kind == Kind::Task {
            parents_first(of_kind)
        } else {
            of_kind
        };
        for d in ordered {
            w.apply_one(d).await?;
        }
        w.flush_new_items().await?;
    }
    if !w.errors.is_empty() {
        return Err(ApplyError::Invalid(w.errors));
    }
    if let Some(sel) = prune_selector {
        w.prune(&docs, &sel).await?;
    }
    let results = w.results;
    let new_runs = w.new_runs;
    if req.dry_run {
        drop(tx);
    } else {
        ctx.commit(tx).await?;
        if new_runs {
            ctx.claimable.notify_waiters();
        }
        ctx.wake.notify_one();
    }
    Ok(results)
}

/// The selector prune uses: `-l`, or the applyset label. Never none.
fn prune_selector(req: &ApplyRequest) -> Result<Option<LabelSelector>, ApplyError> {
    if !req.prune {
        return Ok(None);
    }
    let text = match (&req.selector, &req.applyset) {
        (Some(s), None) if !s.trim().is_empty() => s.clone(),
        (None, Some(set)) => format!("{APPLYSET_LABEL}={set}"),
        (Some(_), Some(_)) => {
            return Err(ApplyError::BadRequest(
                "prune takes a selector or an applyset, not both".into(),
            ))
        }
        _ => {
            return Err(ApplyError::BadRequest(
                "prune needs a selector (-l) or an applyset: pam never prunes everything".into(),
            ))
        }
    };
    LabelSelector::parse(&text)
        .map(Some)
        .map_err(|e| ApplyError::BadRequest(format!("selector {text:?}: {e}")))
}

fn labels_mut(m: &mut Manifest) -> &mut pam_manifests::Labels {
    match m {
        Manifest::Project(o) => &mut o.metadata.labels,
        Manifest::Task(o) => &mut o.metadata.labels,
        Manifest::Run(o) => &mut o.metadata.labels,
        Manifest::Host(o) => &mut o.metadata.labels,
    }
}

/// Tasks ordered so that a parent in the batch comes before its children.
fn parents_first(tasks: Vec<&Document>) -> Vec<&Document> {
    let key = |d: &Document| (d.manifest.project().cloned(), d.manifest.name().clone());
    let by_key: HashMap<_, &Document> = tasks.iter().map(|d| (key(d), *d)).collect();
    let mut out = Vec::with_capacity(tasks.len());
    let mut done: HashSet<(Option<Name>, Name)> = HashSet::new();
    fn visit<'a>(
        d: &'a Document,
        by_key: &HashMap<(Option<Name>, Name), &'a Document>,
        done: &mut HashSet<(Option<Name>, Name)>,
        out: &mut Vec<&'a Document>,
        depth: usize,
    ) {
        let k = (d.manifest.project().cloned(), d.manifest.name().clone());
        if done.contains(&k) || depth > 10_000 {
            return;
        }
        done.insert(k);
        if let Manifest::Task(t) = &d.manifest {
            if let Some(parent) = &t.spec.parent {
                if let Some(p) = by_key.get(&(Some(t.metadata.project.clone()), parent.clone())) {
                    visit(p, by_key, done, out, depth + 1);
                }
            }
        }
        out.push(d);
    }
    for d in &tasks {
        visit(d, &by_key, &mut done, &mut out, 0);
    }
    out
}

/// What validation needs of the stored state: the projects the batch
/// names, their tasks and runs.
async fn load_existing(tx: &mut dyn Tx, docs: &[Document]) -> Result<InMemoryState, StoreError> {
    let mut names: Vec<Name> = docs
        .iter()
        .filter_map(|d| match &d.manifest {
            Manifest::Project(p) => Some(p.metadata.name.clone()),
            m => m.project().cloned(),
        })
        .collect();
    names.sort();
    names.dedup();
    let mut st = InMemoryState::default();
    for name in names {
        let Some(p) = tx.get_project_by_slug(name.as_str()).await? else {
            continue;
        };
        st.projects.insert(
            name.clone(),
            StoredProject {
                archived: p.status == ProjectStatus::Archived,
            },
        );
        let items = tx.list_work_items(p.id).await?;
        let by_id: HashMap<Uuid, &store::WorkItem> = items.iter().map(|w| (w.id, w)).collect();
        for w in &items {
            let parent = w
                .parent_id
                .and_then(|id| by_id.get(&id))
                .and_then(|p| Name::parse(&p.name).ok());
            if let Ok(n) = Name::parse(&w.name) {
                st.tasks.insert(
                    (name.clone(), n),
                    StoredTask {
                        kind: w.kind,
                        parent,
                    },
                );
            }
        }
        for r in tx
            .list_runs(&store::RunFilter {
                project_id: Some(p.id),
                ..Default::default()
            })
            .await?
        {
            if let Ok(n) = Name::parse(&r.name) {
                st.runs.insert((name.clone(), n));
            }
        }
    }
    other_projects_tasks(tx, docs, &mut st).await?;
    Ok(st)
}

/// A parent (or a Run's task) found neither in its project (batch or
/// stored) may be stored in a project the batch does not name: those
/// tasks are added to `st` so that the error names that project (parents
/// and tasks must be in the same project). Only read when a reference does
/// not resolve, i.e. on the way to an error.
async fn other_projects_tasks(
    tx: &mut dyn Tx,
    docs: &[Document],
    st: &mut InMemoryState,
) -> Result<(), StoreError> {
    let in_batch: HashSet<(&Name, &Name)> = docs
        .iter()
        .filter_map(|d| match &d.manifest {
            Manifest::Task(t) => Some((&t.metadata.project, &t.metadata.name)),
            _ => None,
        })
        .collect();
    let mut missing: Vec<&Name> = docs
        .iter()
        .filter_map(|d| match &d.manifest {
            Manifest::Task(t) => t.spec.parent.as_ref().map(|p| (&t.metadata.project, p)),
            Manifest::Run(r) => Some((&r.metadata.project, &r.spec.task)),
            _ => None,
        })
        .filter(|&(project, task)| {
            !in_batch.contains(&(project, task))
                && !st.tasks.contains_key(&(project.clone(), task.clone()))
        })
        .map(|(_, task)| task)
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    missing.sort();
    missing.dedup();
    for p in tx.list_projects().await? {
        let Ok(project) = Name::parse(&p.slug) else {
            continue;
        };
        if st.projects.contains_key(&project) {
            continue;
        }
        for &task in &missing {
            if let Some(w) = tx.get_work_item_by_name(p.id, task.as_str()).await? {
                st.tasks.insert(
                    (project.clone(), task.clone()),
                    StoredTask {
                        kind: w.kind,
                        parent: None,
                    },
                );
            }
        }
    }
    Ok(())
}

pub fn to_store_labels(l: &pam_manifests::Labels) -> Labels {
    l.iter()
        .map(|(k, v)| (k.as_str().to_string(), v.as_str().to_string()))
        .collect()
}

pub fn to_store_annotations(a: &pam_manifests::names::Annotations) -> Labels {
    a.iter()
        .map(|(k, v)| (k.as_str().to_string(), v.clone()))
        .collect()
}

/// The condition apply sets: the spec was accepted and applied.
fn applied_condition(now: DateTime<Utc>, generation: i64) -> Value {
    json!([{
        "type": "Applied", "status": "True", "reason": "Reconciled",
        "message": format!("generation {generation} applied"),
        "lastTransitionTime": now.to_rfc3339(),
    }])
}

struct Writer<'t> {
    tx: &'t mut dyn Tx,
    now: DateTime<Utc>,
    errors: Vec<ManifestError>,
    results: Vec<ApplyResult>,
    /// Project slug → id, for tasks and runs.
    projects: HashMap<String, (Uuid, ProjectStatus)>,
    /// Work items by project id and name: loaded with one query per
    /// project instead of lookups per document, kept current by the writer.
    items: HashMap<Uuid, HashMap<String, store::WorkItem>>,
    /// New work items not written yet (parents first), and their project
    /// slugs: [`Writer::flush_new_items`] writes them with one bulk insert
    /// and one bulk event append, not round trips per object.
    new_items: Vec<store::WorkItem>,
    new_item_projects: Vec<String>,
    /// The ids of `new_items` by project id and name (parents of later
    /// documents), without copies of the rows.
    new_names: HashMap<(Uuid, String), Uuid>,
    /// `applied_condition(now, 1)`, built once for every created object.
    created_condition: Value,
    new_runs: bool,
    offline_after: chrono::Duration,
}

/// How an object's desired metadata+spec compares to what is stored.
struct Delta {
    spec_changed: bool,
    meta_changed: bool,
}

fn delta(stored: &Meta, spec: &Value, labels: &Labels, annotations: &Labels) -> Delta {
    Delta {
        spec_changed: &stored.spec != spec,
        meta_changed: &stored.labels != labels || &stored.annotations != annotations,
    }
}

impl Writer<'_> {
    fn result(&mut self, m: &Manifest, action: Action, generation: Option<i64>) {
        self.results.push(ApplyResult {
            kind: m.kind().as_str(),
            project: m.project().map(|p| p.to_string()),
            name: m.name().to_string(),
            action,
            generation,
        });
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
            .get_project_by_slug(slug)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("project {slug:?}")))?;
        self.projects.insert(slug.into(), (p.id, p.status));
        Ok((p.id, p.status))
    }

    /// The project's work items by name (loaded on first use).
    async fn items_of(
        &mut self,
        project_id: Uuid,
    ) -> Result<&mut HashMap<String, store::WorkItem>, ApplyError> {
        if !self.items.contains_key(&project_id) {
            let all = self.tx.list_work_items(project_id).await?;
            self.items.insert(
                project_id,
                all.into_iter().map(|w| (w.name.clone(), w)).collect(),
            );
        }
        Ok(self.items.get_mut(&project_id).expect("loaded above"))
    }

    /// Writes the pending new work items and their `work_item.created`
    /// events in bulk. Called before any write that may depend on them.
    async fn flush_new_items(&mut self) -> Result<(), ApplyError> {
        if self.new_items.is_empty() {
            return Ok(());
        }
        let items = std::mem::take(&mut self.new_items);
        let slugs = std::mem::take(&mut self.new_item_projects);
        self.new_names.clear();
        let rows = self.tx.insert_work_items(items).await?;
        let events = rows
            .iter()
            .zip(&slugs)
            .map(|(w, slug)| (topic::WORK_ITEM_CREATED, work_item_payload(w, slug)))
            .collect();
        self.tx.append_events(events, self.now).await?;
        for w in rows {
            if let Some(m) = self.items.get_mut(&w.project_id) {
                m.insert(w.name.clone(), w);
            }
        }
        Ok(())
    }

    async fn fresh_item(&mut self, id: Uuid) -> Result<store::WorkItem, ApplyError> {
        Ok(self
            .tx
            .get_work_item(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("work item {id}")))?)
    }

    async fn apply_one(&mut self, d: &Document) -> Result<(), ApplyError> {
        match &d.manifest {
            Manifest::Project(p) => self.project(d, p).await,
            Manifest::Host(h) => self.host(d, h).await,
            Manifest::Task(t) => self.task(d, t).await,
            Manifest::Run(r) => self.run(d, r).await,
        }
    }

    async fn project(&mut self, d: &Document, p: &kinds::Project) -> Result<(), ApplyError> {
        let spec = d.manifest.spec_json();
        let labels = to_store_labels(&p.metadata.labels);
        let annotations = to_store_annotations(&p.metadata.annotations);
        let slug = p.metadata.name.to_string();
        let status = if p.spec.archived {
            ProjectStatus::Archived
        } else {
            ProjectStatus::Active
        };
        let name = p.spec.display_name.clone().unwrap_or_else(|| slug.clone());
        let now = self.now;
        match self.tx.get_project_by_slug(&slug).await? {
            None => {
                let row = store::Project {
                    id: Uuid::new_v4(),
                    name,
                    slug: slug.clone(),
                    description: p.spec.description.clone(),
                    status,
                    meta: Meta {
                        spec,
                        labels,
                        annotations,
                        observed_generation: 1,
                        conditions: applied_condition(now, 1),
                        ..Meta::default()
                    },
                    created_at: now,
                    updated_at: now,
                };
                self.tx.insert_project(&row).await?;
                let payload = json!({ "project_id": row.id, "project": slug, "name": row.name });
                self.tx
                    .append_event(topic::PROJECT_CREATED, payload.clone(), now)
                    .await?;
                if status == ProjectStatus::Archived {
                    self.tx
                        .append_event(topic::PROJECT_ARCHIVED, payload, now)
                        .await?;
                }
                self.projects.insert(slug, (row.id, status));
                self.result(&d.manifest, Action::Created, Some(1));
            }
            Some(mut row) => {
                self.check_rv(d, row.meta.resource_version)?;
                let dl = delta(&row.meta, &spec, &labels, &annotations);
                if !dl.spec_changed && !dl.meta_changed {
                    self.projects.insert(slug, (row.id, row.status));
                    self.result(&d.manifest, Action::Unchanged, Some(row.meta.generation));
                    return Ok(());
                }
                let rv = row.meta.resource_version;
                let was = row.status;
                if dl.spec_changed {
                    row.meta.generation += 1;
                    row.meta.observed_generation = row.meta.generation;
                    row.meta.conditions = applied_condition(now, row.meta.generation);
                }
                row.name = name;
                row.description = p.spec.description.clone();
                row.status = status;
                row.meta.spec = spec;
                row.meta.labels = labels;
                row.meta.annotations = annotations;
                row.updated_at = now;
                let row = self
                    .tx
                    .update_project(&row, rv)
                    .await
                    .map_err(|e| conflict_named(e, &d.manifest))?;
                let payload = json!({ "project_id": row.id, "project": slug, "name": row.name });
                let t = if was != ProjectStatus::Archived && status == ProjectStatus::Archived {
                    topic::PROJECT_ARCHIVED
                } else {
                    topic::PROJECT_UPDATED
                };
                self.tx.append_event(t, payload, now).await?;
                self.projects.insert(slug, (row.id, row.status));
                self.result(&d.manifest, Action::Configured, Some(row.meta.generation));
            }
        }
        Ok(())
    }

    async fn host(&mut self, d: &Document, h: &kinds::Host) -> Result<(), ApplyError> {
        let spec = d.manifest.spec_json();
        let labels = to_store_labels(&h.metadata.labels);
        let annotations = to_store_annotations(&h.metadata.annotations);
        let now = self.now;
        let capacity = i32::try_from(h.spec.capacity).unwrap_or(i32::MAX);
        let dispatch_labels = to_store_labels(&h.spec.labels);
        match self.tx.get_host_by_name(h.metadata.name.as_str()).await? {
            None => {
                let row = store::Host {
                    id: Uuid::new_v4(),
                    name: h.metadata.name.to_string(),
                    platform: h.spec.platform,
                    token_fingerprint: None,
                    status: if h.spec.disabled {
                        HostStatus::Disabled
                    } else {
                        HostStatus::Registered
                    },
                    instance_id: None,
                    instance_suspect: false,
                    instance_flagged_at: None,
                    presented_instance_id: None,
                    last_seen_at: None,
                    capacity,
                    disabled: h.spec.disabled,
                    dispatch_labels,
                    meta: Meta {
                        spec,
                        labels,
                        annotations,
                        observed_generation: 1,
                        conditions: applied_condition(now, 1),
                        ..Meta::default()
                    },
                    created_at: now,
                    updated_at: now,
                };
                self.tx.insert_host(&row).await?;
                self.result(&d.manifest, Action::Created, Some(1));
            }
            Some(mut row) => {
                self.check_rv(d, row.meta.resource_version)?;
                let dl = delta(&row.meta, &spec, &labels, &annotations);
                if !dl.spec_changed && !dl.meta_changed {
                    self.result(&d.manifest, Action::Unchanged, Some(row.meta.generation));
                    return Ok(());
                }
                let rv = row.meta.resource_version;
                if dl.spec_changed {
                    row.meta.generation += 1;
                    row.meta.observed_generation = row.meta.generation;
                    row.meta.conditions = applied_condition(now, row.meta.generation);
                }
                row.platform = h.spec.platform;
                row.capacity = capacity;
                row.dispatch_labels = dispatch_labels;
                row.disabled = h.spec.disabled;
                row.meta.spec = spec;
                row.meta.labels = labels;
                row.meta.annotations = annotations;
                let row = self
                    .tx
                    .update_host(&row, rv)
                    .await
                    .map_err(|e| conflict_named(e, &d.manifest))?;
                set_host_disabled(self.tx, &row, h.spec.disabled, self.offline_after, now).await?;
                self.result(&d.manifest, Action::Configured, Some(row.meta.generation));
            }
        }
        Ok(())
    }

    async fn task(&mut self, d: &Document, t: &kinds::Task) -> Result<(), ApplyError> {
        let spec = d.manifest.spec_json();
        let labels = to_store_labels(&t.metadata.labels);
        let annotations = to_store_annotations(&t.metadata.annotations);
        let now = self.now;
        let project_slug = t.metadata.project.to_string();
        let (project_id, _) = self.project_id(&project_slug).await?;
        let name = t.metadata.name.to_string();
        if self.new_names.contains_key(&(project_id, name)) {
            // Not reached (validation refuses duplicates): the rows below
            // are read from the store.
            self.flush_new_items().await?;
        }
        let new_names = std::mem::take(&mut self.new_names);
        let items = self.items_of(project_id).await?;
        let parent_id = match &t.spec.parent {
            None => None,
            Some(p) => Some(
                match items.get(p.as_str()) {
                    Some(w) => Some(w.id),
                    None => new_names.get(&(project_id, p.to_string())).copied(),
                }
                .ok_or_else(|| StoreError::NotFound(format!("task {p}")))?,
            ),
        };
        let existing = items.get(t.metadata.name.as_str()).cloned();
        self.new_names = new_names;
        let Some(cached) = existing else {
            let row = store::WorkItem {
                id: Uuid::new_v4(),
                project_id,
                parent_id,
                name: t.metadata.name.to_string(),
                kind: t.spec.type_,
                title: t.spec.title.clone(),
                description: t.spec.description.clone(),
                // [*] → todo → X is legal for every X, so a new item may be
                // created in its desired status.
                status: t.spec.status,
                assignee: t.spec.assignee.clone(),
                path: String::new(),
                sort_order: t.spec.sort_order,
                meta: Meta {
                    spec,
                    labels,
                    annotations,
                    observed_generation: 1,
                    conditions: self.created_condition.clone(),
                    ..Meta::default()
                },
                created_at: now,
                updated_at: now,
            };
            // Written in bulk by flush_new_items; known to later
            // documents (children, runs) from now on.
            self.new_names
                .insert((project_id, row.name.clone()), row.id);
            self.new_items.push(row);
            self.new_item_projects.push(project_slug);
            self.result(&d.manifest, Action::Created, Some(1));
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
        let immutable = validate::immutable_changes(Kind::Task, &row.meta.spec, &spec);
        if !immutable.is_empty() {
            for field in immutable {
                self.errors.push(d.error_at(
                    field,
                    format!(
                        "is immutable (stored: {}); delete and recreate the task to change it",
                        row.kind
                    ),
                ));
            }
            return Ok(());
        }
        let dl = delta(&row.meta, &spec, &labels, &annotations);
        if !dl.spec_changed && !dl.meta_changed {
            self.result(&d.manifest, Action::Unchanged, Some(row.meta.generation));
            return Ok(());
        }
        // The writes below may refer to new items (a new parent).
        self.flush_new_items().await?;
        let mut row = self.fresh_item(row.id).await?;
        let old_spec_status = row
            .meta
            .spec
            .get("status")
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<WorkItemStatus>().ok());
        // Reparent first (it rewrites paths), then status, then the rest.
        if row.parent_id != parent_id {
            let moved = self
                .tx
                .reparent_work_item(row.id, parent_id, now)
                .await
                .map_err(|e| match e {
                    StoreError::Invalid(msg) => {
                        ApplyError::Invalid(vec![d.error_at("spec.parent", msg)])
                    }
                    e => e.into(),
                })?;
            let mut p = work_item_payload(&moved, &project_slug);
            p["old_parent_id"] = json!(row.parent_id);
            p["old_path"] = json!(row.path);
            self.tx
                .append_event(topic::WORK_ITEM_REPARENTED, p, now)
                .await?;
            row = moved;
        }
        if old_spec_status != Some(t.spec.status) && row.status != t.spec.status {
            if let Err(e) = sm::transition(row.status, t.spec.status) {
                self.errors.push(d.error_at("spec.status", e.to_string()));
                return Ok(());
            }
            let (moved, _) =
                set_task_status(self.tx, &row, t.spec.status, &project_slug, now).await?;
            row = moved;
        }
        let rv = row.meta.resource_version;
        if dl.spec_changed {
            row.meta.generation += 1;
            row.meta.observed_generation = row.meta.generation;
            row.meta.conditions = applied_condition(now, row.meta.generation);
        }
        row.title = t.spec.title.clone();
        row.description = t.spec.description.clone();
        row.assignee = t.spec.assignee.clone();
        row.sort_order = t.spec.sort_order;
        row.meta.spec = spec;
        row.meta.labels = labels;
        row.meta.annotations = annotations;
        let row = self
            .tx
            .update_work_item(&row, rv)
            .await
            .map_err(|e| conflict_named(e, &d.manifest))?;
        self.tx
            .append_event(
                topic::WORK_ITEM_UPDATED,
                work_item_payload(&row, &project_slug),
                now,
            )
            .await?;
        if let Some(m) = self.items.get_mut(&project_id) {
            m.insert(row.name.clone(), row.clone());
        }
        self.result(&d.manifest, Action::Configured, Some(row.meta.generation));
        Ok(())
    }

    async fn run(&mut self, d: &Document, r: &kinds::Run) -> Result<(), ApplyError> {
        let spec = d.manifest.spec_json();
        let labels = to_store_labels(&r.metadata.labels);
        let annotations = to_store_annotations(&r.metadata.annotations);
        let now = self.now;
        let project_slug = r.metadata.project.to_string();
        let (project_id, _) = self.project_id(&project_slug).await?;
        let target = match &r.spec.target {
            None => Target::Any,
            Some(kinds::Target::Host(h)) => Target::Host(h.to_string()),
            Some(kinds::Target::Selector(s)) => Target::Selector(to_store_labels(s)),
        };
        let rp = &r.spec.restart_policy;
        let max_attempts = i32::try_from(rp.max_attempts.get()).unwrap_or(i32::MAX);
        let backoff = i32::try_from(rp.backoff_seconds).unwrap_or(i32::MAX);
        let backoff_max = i32::try_from(rp.backoff_max_seconds).unwrap_or(i32::MAX);
        let dispatch_timeout = r
            .spec
            .dispatch_timeout_seconds
            .map(|s| i32::try_from(s.get()).unwrap_or(i32::MAX));
        match self
            .tx
            .get_run_by_name(project_id, r.metadata.name.as_str())
            .await?
        {
            None => {
                let task = self
                    .items_of(project_id)
                    .await?
                    .get(r.spec.task.as_str())
                    .cloned()
                    .ok_or_else(|| StoreError::NotFound(format!("task {}", r.spec.task)))?;
                if !matches!(task.kind, WorkItemKind::Task | WorkItemKind::Subtask) {
                    self.errors.push(d.error_at(
                        "spec.task",
                        format!(
                            "{} is a {}, expected a task or subtask",
                            task.name, task.kind
                        ),
                    ));
                    return Ok(());
                }
                let id = Uuid::new_v4();
                let row = store::Run {
                    id,
                    project_id,
                    task_id: task.id,
                    name: r.metadata.name.to_string(),
                    host_id: None,
                    provider: r.spec.provider.as_str().to_string(),
                    prompt: r.spec.prompt.clone(),
                    cwd: r.spec.cwd.clone(),
                    session_name: store::Run::session_name_for(id),
                    status: RunStatus::Pending,
                    attempt: 1,
                    last_progress_seq: None,
                    failure_reason: None,
                    // OQ-15: the dispatch-timeout anchor starts at creation.
                    pending_since: now,
                    exit_code: None,
                    started_at: None,
                    finished_at: None,
                    target,
                    max_attempts,
                    backoff_seconds: backoff,
                    backoff_max_seconds: backoff_max,
                    dispatch_timeout_seconds: dispatch_timeout,
                    stop_requested: r.spec.stopped,
                    requeue_at: None,
                    eligible_host_seen: false,
                    meta: Meta {
                        spec,
                        labels,
                        annotations,
                        observed_generation: 1,
                        conditions: applied_condition(now, 1),
                        ..Meta::default()
                    },
                    created_at: now,
                    updated_at: now,
                };
                self.tx.insert_run(&row).await?;
                let p = run_rules::payload(
                    &row,
                    json!({ "project": project_slug, "task": task.name, "provider": row.provider }),
                );
                self.tx.append_event(topic::RUN_CREATED, p, now).await?;
                self.new_runs = true;
                self.result(&d.manifest, Action::Created, Some(1));
            }
            Some(mut row) => {
                self.check_rv(d, row.meta.resource_version)?;
                let immutable = validate::immutable_changes(Kind::Run, &row.meta.spec, &spec);
                if !immutable.is_empty() {
                    for field in immutable {
                        self.errors.push(d.error_at(
                            field,
                            "is immutable; create a new run to change it".to_string(),
                        ));
                    }
                    return Ok(());
                }
                let dl = delta(&row.meta, &spec, &labels, &annotations);
                if !dl.spec_changed && !dl.meta_changed {
                    self.result(&d.manifest, Action::Unchanged, Some(row.meta.generation));
                    return Ok(());
                }
                let rv = row.meta.resource_version;
                if dl.spec_changed {
                    row.meta.generation += 1;
                    row.meta.observed_generation = row.meta.generation;
                    row.meta.conditions = applied_condition(now, row.meta.generation);
                }
                row.target = target;
                row.max_attempts = max_attempts;
                row.backoff_seconds = backoff;
                row.backoff_max_seconds = backoff_max;
                row.dispatch_timeout_seconds = dispatch_timeout;
                // A stop, once asked, is not withdrawn by a later apply.
                row.stop_requested |= r.spec.stopped;
                row.meta.spec = spec;
                row.meta.labels = labels;
                row.meta.annotations = annotations;
                let row = self
                    .tx
                    .update_run_spec(&row, rv)
                    .await
                    .map_err(|e| conflict_named(e, &d.manifest))?;
                self.result(&d.manifest, Action::Configured, Some(row.meta.generation));
            }
        }
        Ok(())
    }

    /// Deletes the objects of the input's kinds (and projects) that match
    /// the selector and are not in the input.
    async fn prune(&mut self, docs: &[Document], sel: &LabelSelector) -> Result<(), ApplyError> {
        let kinds: HashSet<Kind> = docs.iter().map(|d| d.manifest.kind()).collect();
        let named: HashSet<(Kind, Option<String>, String)> = docs
            .iter()
            .map(|d| {
                (
                    d.manifest.kind(),
                    d.manifest.project().map(|p| p.to_string()),
                    d.manifest.name().to_string(),
                )
            })
            .collect();
        let matches = |l: &Labels| sel.matches(&to_manifest_labels(l));
        let projects = self.tx.list_projects().await?;
        let now = self.now;
        // Runs and tasks first (children before parents), then hosts and
        // projects.
        if kinds.contains(&Kind::Run) {
            for p in &projects {
                for r in self
                    .tx
                    .list_runs(&store::RunFilter {
                        project_id: Some(p.id),
                        ..Default::default()
                    })
                    .await?
                {
                    if matches(&r.meta.labels)
                        && !named.contains(&(Kind::Run, Some(p.slug.clone()), r.name.clone()))
                        && self.tx.delete_run(r.id).await?
                    {
                        self.pruned("Run", Some(&p.slug), &r.name);
                    }
                }
            }
        }
        if kinds.contains(&Kind::Task) {
            for p in &projects {
                let items = self.tx.list_work_items(p.id).await?;
                let by_id: HashMap<Uuid, &store::WorkItem> =
                    items.iter().map(|w| (w.id, w)).collect();
                let doomed = |w: &store::WorkItem| {
                    matches(&w.meta.labels)
                        && !named.contains(&(Kind::Task, Some(p.slug.clone()), w.name.clone()))
                };
                // Deleting a task deletes its subtree (FK cascade), so a task
                // with a kept descendant is kept too.
                let mut keep: HashSet<Uuid> = HashSet::new();
                for w in items.iter().filter(|w| !doomed(w)) {
                    let mut cur = w.parent_id;
                    while let Some(id) = cur {
                        if !keep.insert(id) {
                            break;
                        }
                        cur = by_id.get(&id).and_then(|p| p.parent_id);
                    }
                }
                // Shallowest first: a deleted parent takes its doomed
                // children with it; report each.
                let mut gone: Vec<&store::WorkItem> = items
                    .iter()
                    .filter(|w| doomed(w) && !keep.contains(&w.id))
                    .collect();
                gone.sort_by_key(|w| w.path.len());
                for w in gone {
                    self.tx.delete_work_item(w.id).await?;
                    self.tx
                        .append_event(topic::WORK_ITEM_DELETED, work_item_payload(w, &p.slug), now)
                        .await?;
                    self.pruned("Task", Some(&p.slug), &w.name);
                }
            }
        }
        if kinds.contains(&Kind::Host) {
            for h in self.tx.list_hosts().await? {
                if matches(&h.meta.labels)
                    && !named.contains(&(Kind::Host, None, h.name.clone()))
                    && self.tx.delete_host(h.id).await?
                {
                    self.pruned("Host", None, &h.name);
                }
            }
        }
        if kinds.contains(&Kind::Project) {
            for p in projects {
                if matches(&p.meta.labels)
                    && !named.contains(&(Kind::Project, None, p.slug.clone()))
                    && self.tx.delete_project(p.id).await?
                {
                    self.pruned("Project", None, &p.slug);
                }
            }
        }
        Ok(())
    }

    fn pruned(&mut self, kind: &'static str, project: Option<&str>, name: &str) {
        self.results.push(ApplyResult {
            kind,
            project: project.map(str::to_string),
            name: name.to_string(),
            action: Action::Pruned,
            generation: None,
        });
    }
}

pub fn to_manifest_labels(l: &Labels) -> pam_manifests::Labels {
    l.iter()
        .filter_map(|(k, v)| {
            Some((
                pam_manifests::LabelKey::parse(k).ok()?,
                pam_manifests::LabelValue::parse(v).ok()?,
            ))
        })
        .collect()
}

fn object_ref(m: &Manifest) -> String {
    match m.project() {
        Some(p) => format!("{p}/{}", m.name()),
        None => m.name().to_string(),
    }
}

/// A guarded-update conflict during apply names the object.
fn conflict_named(e: StoreError, m: &Manifest) -> ApplyError {
    match e {
        StoreError::Conflict(_) => ApplyError::Conflict(format!(
            "{} {} was changed concurrently; reapply",
            m.kind(),
            object_ref(m)
        )),
        e => e.into(),
    }
}

pub fn work_item_payload(w: &store::WorkItem, project_slug: &str) -> Value {
    json!({
        "work_item_id": w.id, "project_id": w.project_id, "project": project_slug,
        "name": w.name, "kind": w.kind.as_str(), "status": w.status.as_str(),
        "parent_id": w.parent_id, "path": w.path,
    })
}

/// Moves a task to `to` through the gate; cancelling cascades `cancelled`
/// to its non-done descendants (done ones keep their history). Returns the
/// task and the names of the descendants cancelled with it. Journals
/// `work_item.status_changed` for each.
pub async fn set_task_status(
    tx: &mut dyn Tx,
    item: &store::WorkItem,
    to: WorkItemStatus,
    project_slug: &str,
    now: DateTime<Utc>,
) -> Result<(store::WorkItem, Vec<String>), StoreError> {
    let from = item.status;
    let moved = tx.set_work_item_status(item.id, from, to, now).await?;
    let mut p = work_item_payload(&moved, project_slug);
    p["from"] = json!(from.as_str());
    tx.append_event(topic::WORK_ITEM_STATUS_CHANGED, p, now)
        .await?;
    let mut cascaded = Vec::new();
    if to == WorkItemStatus::Cancelled {
        for child in tx.subtree(item.id).await? {
            if child.id == item.id
                || matches!(
                    child.status,
                    WorkItemStatus::Done | WorkItemStatus::Cancelled
                )
            {
                continue;
            }
            let c = tx
                .set_work_item_status(child.id, child.status, WorkItemStatus::Cancelled, now)
                .await?;
            let mut p = work_item_payload(&c, project_slug);
            p["from"] = json!(child.status.as_str());
            p["cascade_from"] = json!(item.id);
            tx.append_event(topic::WORK_ITEM_STATUS_CHANGED, p, now)
                .await?;
            cascaded.push(c.name);
        }
    }
    Ok((moved, cascaded))
}

/// Disables or enables a host through the gate: enabling returns it to
/// online, offline or registered by what its heartbeat says.
pub async fn set_host_disabled(
    tx: &mut dyn Tx,
    h: &store::Host,
    disabled: bool,
    offline_after: chrono::Duration,
    now: DateTime<Utc>,
) -> Result<store::Host, StoreError> {
    let to = if disabled {
        HostStatus::Disabled
    } else if h.status != HostStatus::Disabled {
        return Ok(h.clone());
    } else {
        match h.last_seen_at {
            None => HostStatus::Registered,
            Some(seen) if now - seen <= offline_after => HostStatus::Online,
            Some(_) => HostStatus::Offline,
        }
    };
    if h.status == to {
        return Ok(h.clone());
    }
    tx.set_host_status(h.id, h.status, to, now).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_needs_a_selector() {
        let req = ApplyRequest {
            prune: true,
            ..Default::default()
        };
        assert!(
            matches!(prune_selector(&req), Err(ApplyError::BadRequest(m)) if m.contains("never prunes"))
        );
        let req = ApplyRequest {
            prune: true,
            applyset: Some("web".into()),
            ..Default::default()
        };
        let sel = prune_selector(&req).unwrap().unwrap();
        let mut l = Labels::new();
        l.insert(APPLYSET_LABEL.into(), "web".into());
        assert!(sel.matches(&to_manifest_labels(&l)));
    }

    #[test]
    fn bad_objects_are_positioned_errors() {
        let req = ApplyRequest {
            objects: vec![
                json!({"apiVersion": "pam.dev/v1", "kind": "Project", "metadata": {"name": "x"}, "spec": {}, "status": {}}),
            ],
            ..Default::default()
        };
        let Err(ApplyError::Invalid(errs)) = documents(&req) else {
            panic!("expected invalid")
        };
        assert_eq!(errs[0].path, "status");
    }
}
