//! Whole-batch validation: the rules that need every document of an apply
//! at once, plus what is already stored.
//!
//! `pamctl apply` and the server call [`validate_batch`] before writing
//! anything: one error means nothing of the batch is written.
//!
//! # Rules
//! - Every document keeps the field limits of [`crate::limits`] (text
//!   sizes, label counts, no NUL in free text): YAML files and JSON objects
//!   alike, as both come through here.
//! - (kind, project, name) appears once per batch.
//! - No `status:` (the loader already refuses it; checked again for
//!   documents built without the loader).
//! - A Task or Run names a project that exists (in the batch or stored).
//! - A *new* Task or Run (not stored yet) is not created in an archived
//!   project — archived in the store, or archived by this same batch
//!   (pam-data-model.txt, "Archived semantics"). An un-archive in the same
//!   batch lifts it.
//! - A Task's parent is another Task of the *same* project, in the batch or
//!   stored; not itself; and the parent links after applying the batch on
//!   top of the stored ones have no cycle at any depth (OQ-6), including a
//!   reparent of a stored task that closes a loop.
//! - A Run's task exists and is a task or subtask, never a milestone or an
//!   epic (pam-data-model.txt, `runs.task_id`).
//! - A Task's `dependsOn` names other Tasks of the same project (batch or
//!   stored), each once, never itself or one of its ancestors, and the
//!   dependency links after the batch have no cycle ([`deps`]).
//! - A Host's labels (`metadata.labels`, `spec.labels`) have no key under
//!   `worker.pam.dev/`: that namespace is its worker's report.
//! - A `pam.dev/sync-wave` annotation is an integer in range ([`wave`]).
//!
//! Immutable fields are the server's check (it holds the old spec);
//! [`immutable_changes`] is the shared rule.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::error::ManifestError;
use crate::kinds::{Kind, Manifest, RunSpec, TaskSpec};
use crate::load::{Document, Segment};
use crate::names::Name;
use crate::state::WorkItemKind;

mod deps;
pub mod limits;
pub mod wave;
mod workspace;

/// A stored project, as validation needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredProject {
    /// Whether it is archived now.
    pub archived: bool,
}

/// A stored task, as validation needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTask {
    /// Its type.
    pub kind: WorkItemKind,
    /// Its parent's name (same project), if any.
    pub parent: Option<Name>,
    /// The tasks it depends on (same project), as stored.
    pub depends_on: Vec<Name>,
}

/// What is already stored; the server implements it over its store so that
/// batch rules see stored objects too.
pub trait ExistingState {
    /// The project with this name (slug).
    fn project(&self, name: &Name) -> Option<StoredProject>;
    /// The task `name` of `project`.
    fn task(&self, project: &Name, name: &Name) -> Option<StoredTask>;
    /// Whether run `name` of `project` exists.
    fn run_exists(&self, project: &Name, name: &Name) -> bool;
    /// Projects holding a task of this name. Only used to word the error
    /// for a cross-project parent; the default finds none.
    fn projects_with_task(&self, _name: &Name) -> Vec<Name> {
        Vec::new()
    }
    /// Whether the stored project has a `spec.repository`.
    fn has_repository(&self, _project: &Name) -> bool {
        false
    }
    /// Whether the stored task has a default `spec.workspace`.
    fn task_workspace(&self, _project: &Name, _task: &Name) -> bool {
        false
    }
}

/// An in-memory [`ExistingState`]: empty by default (validating a tree on
/// its own, `pamctl validate`), or filled by tests and tools.
#[derive(Debug, Clone, Default)]
pub struct InMemoryState {
    /// Projects by name.
    pub projects: BTreeMap<Name, StoredProject>,
    /// Tasks by (project, name).
    pub tasks: BTreeMap<(Name, Name), StoredTask>,
    /// Runs by (project, name).
    pub runs: BTreeSet<(Name, Name)>,
    /// Projects with a repository.
    pub repositories: BTreeSet<Name>,
    /// Tasks with a default workspace, by (project, name).
    pub task_workspaces: BTreeSet<(Name, Name)>,
}

impl ExistingState for InMemoryState {
    fn project(&self, name: &Name) -> Option<StoredProject> {
        self.projects.get(name).copied()
    }
    fn task(&self, project: &Name, name: &Name) -> Option<StoredTask> {
        self.tasks.get(&(project.clone(), name.clone())).cloned()
    }
    fn run_exists(&self, project: &Name, name: &Name) -> bool {
        self.runs.contains(&(project.clone(), name.clone()))
    }
    fn projects_with_task(&self, name: &Name) -> Vec<Name> {
        self.tasks
            .keys()
            .filter(|(_, n)| n == name)
            .map(|(p, _)| p.clone())
            .collect()
    }
    fn has_repository(&self, project: &Name) -> bool {
        self.repositories.contains(project)
    }
    fn task_workspace(&self, project: &Name, task: &Name) -> bool {
        self.task_workspaces
            .contains(&(project.clone(), task.clone()))
    }
}

/// The batch, indexed.
struct Batch<'a> {
    docs: &'a [Document],
    existing: &'a dyn ExistingState,
    /// Project name → its document.
    projects: HashMap<&'a Name, &'a Document>,
    /// (project, task name) → its document (first occurrence).
    tasks: HashMap<(&'a Name, &'a Name), &'a Document>,
    /// The same, by project then name: lookups by a borrowed name of any
    /// lifetime (the parent walk), in O(1) instead of a scan of `tasks`.
    by_project: HashMap<&'a Name, HashMap<&'a Name, &'a Document>>,
}

impl<'a> Batch<'a> {
    fn new(docs: &'a [Document], existing: &'a dyn ExistingState) -> Batch<'a> {
        let mut projects = HashMap::new();
        let mut tasks = HashMap::new();
        let mut by_project: HashMap<&Name, HashMap<&Name, &Document>> = HashMap::new();
        for doc in docs {
            match &doc.manifest {
                Manifest::Project(p) => {
                    projects.entry(&p.metadata.name).or_insert(doc);
                }
                Manifest::Task(t) => {
                    tasks
                        .entry((&t.metadata.project, &t.metadata.name))
                        .or_insert(doc);
                    by_project
                        .entry(&t.metadata.project)
                        .or_default()
                        .entry(&t.metadata.name)
                        .or_insert(doc);
                }
                _ => {}
            }
        }
        Batch {
            docs,
            existing,
            projects,
            tasks,
            by_project,
        }
    }

    /// Whether the project exists, in the batch or stored.
    fn projects_known(&self, project: &Name) -> bool {
        self.archived(project).is_some()
    }

    /// Archived after the batch: `None` when the project exists nowhere.
    fn archived(&self, project: &Name) -> Option<bool> {
        match self.projects.get(project).map(|d| &d.manifest) {
            Some(Manifest::Project(p)) => Some(p.spec.archived),
            _ => self.existing.project(project).map(|p| p.archived),
        }
    }

    fn batch_task(&self, project: &'a Name, name: &'a Name) -> Option<&'a TaskSpec> {
        match self.tasks.get(&(project, name)).map(|d| &d.manifest) {
            Some(Manifest::Task(t)) => Some(&t.spec),
            _ => None,
        }
    }

    /// The task's type after the batch.
    fn task_kind(&self, project: &'a Name, name: &'a Name) -> Option<WorkItemKind> {
        match self.batch_task(project, name) {
            Some(spec) => Some(spec.type_),
            None => self.existing.task(project, name).map(|t| t.kind),
        }
    }

    /// The task's dependencies after the batch; `None` when the task
    /// exists nowhere.
    fn depends_on_of(&self, project: &'a Name, name: &Name) -> Option<Vec<Name>> {
        let in_batch = self
            .by_project
            .get(project)
            .and_then(|m| m.get(name))
            .map(|d| &d.manifest);
        match in_batch {
            Some(Manifest::Task(t)) => Some(t.spec.depends_on.clone()),
            _ => self.existing.task(project, name).map(|t| t.depends_on),
        }
    }

    /// The document of task `name` of `project` in the batch, if any.
    fn task_doc(&self, project: &Name, name: &Name) -> Option<&'a Document> {
        self.by_project
            .get(project)
            .and_then(|m| m.get(name))
            .copied()
    }

    /// The task's parent after the batch; `Err` when the task exists
    /// nowhere.
    fn parent_of(&self, project: &'a Name, name: &Name) -> Result<Option<Name>, ()> {
        let in_batch = self
            .by_project
            .get(project)
            .and_then(|m| m.get(name))
            .map(|d| &d.manifest);
        match in_batch {
            Some(Manifest::Task(t)) => Ok(t.spec.parent.clone()),
            _ => self
                .existing
                .task(project, name)
                .map(|t| t.parent)
                .ok_or(()),
        }
    }

    /// Why `name`, referred to from `project`, is not a task there: it is
    /// in another project, or nowhere (`why` is added to the first, e.g.
    /// "(dependencies stay within a project)").
    fn missing_task(&self, project: &Name, name: &Name, why: &str) -> String {
        match self.other_projects_with_task(project, name).first() {
            Some(other) => format!(
                "task {:?} is in project {:?}, expected a task in project {:?}{why}",
                name.as_str(),
                other.as_str(),
                project.as_str()
            ),
            None => format!(
                "no task {:?} in project {:?}, expected the name of a Task in this batch or already stored in project {:?}",
                name.as_str(),
                project.as_str(),
                project.as_str()
            ),
        }
    }

    /// Other projects that hold a task called `name`.
    fn other_projects_with_task(&self, project: &Name, name: &Name) -> Vec<Name> {
        let mut found: BTreeSet<Name> = self
            .tasks
            .keys()
            .filter(|(p, n)| *n == name && *p != project)
            .map(|(p, _)| (*p).clone())
            .collect();
        found.extend(
            self.existing
                .projects_with_task(name)
                .into_iter()
                .filter(|p| p != project),
        );
        found.into_iter().collect()
    }
}

/// Checks the batch as a whole against itself and `existing`; returns every
/// problem, in document order. Empty = the batch may be written.
pub fn validate_batch(docs: &[Document], existing: &dyn ExistingState) -> Vec<ManifestError> {
    let batch = Batch::new(docs, existing);
    let mut errors = Vec::new();
    let mut seen: HashMap<(Kind, Option<&Name>, &Name), &Document> = HashMap::new();
    for doc in batch.docs {
        errors.extend(limits::check_document(doc));
        let m = &doc.manifest;
        let key = (m.kind(), m.project(), m.name());
        if let Some(first) = seen.get(&key) {
            let scope = m
                .project()
                .map(|p| format!(" in project {:?}", p.as_str()))
                .unwrap_or_default();
            errors.push(doc.error_at(
                "metadata.name",
                format!(
                    "duplicate {} {:?}{scope} (first in {} document {}), expected each (kind, project, name) once per batch",
                    m.kind(),
                    m.name().as_str(),
                    first.file,
                    first.index
                ),
            ));
            continue;
        }
        seen.insert(key, doc);
        wave::check(doc, &mut errors);
        if m.has_status() {
            errors.push(doc.error_at(
                "status",
                "status is observed state, set by the controller; expected no status in a manifest (remove the block)",
            ));
        }
        match m {
            Manifest::Task(t) => {
                let project = &t.metadata.project;
                let is_new = existing.task(project, &t.metadata.name).is_none();
                check_project(&batch, doc, project, is_new, &mut errors);
                check_parent(&batch, doc, project, &t.metadata.name, &t.spec, &mut errors);
                deps::check(&batch, doc, project, &t.metadata.name, &t.spec, &mut errors);
                let ws = t.spec.workspace.is_some();
                workspace::check_task(&batch, doc, project, ws, &mut errors);
            }
            Manifest::Run(r) => {
                let project = &r.metadata.project;
                let is_new = !existing.run_exists(project, &r.metadata.name);
                check_project(&batch, doc, project, is_new, &mut errors);
                check_run_task(&batch, doc, project, &r.spec, "spec.task", &mut errors);
                workspace::check_run(&batch, doc, project, &r.spec, "spec", &mut errors);
            }
            Manifest::Schedule(s) => {
                let project = &s.metadata.project;
                check_project(&batch, doc, project, false, &mut errors);
                check_run_task(
                    &batch,
                    doc,
                    project,
                    &s.spec.run_template,
                    "spec.runTemplate.task",
                    &mut errors,
                );
                let template = &s.spec.run_template;
                let at = "spec.runTemplate";
                workspace::check_run(&batch, doc, project, template, at, &mut errors);
            }
            Manifest::Secret(s) => {
                // A Secret may be updated in an archived project (keys
                // rotate while runs go on); created there, too.
                check_project(&batch, doc, &s.metadata.project, false, &mut errors);
            }
            Manifest::Host(h) => check_host_labels(doc, h, &mut errors),
            // Kinds that name no project or no other object (and every
            // kind stored generically: its rules are per document).
            _ => {}
        }
    }
    errors
}

/// A Host's labels are set by operators; the `worker.pam.dev/` namespace
/// holds what its worker reports for itself, so an operator
/// label there would let a selector on self-reported labels and one on
/// operator labels meet.
fn check_host_labels(doc: &Document, h: &crate::kinds::Host, errors: &mut Vec<ManifestError>) {
    let sets = [("metadata", &h.metadata.labels), ("spec", &h.spec.labels)];
    for (part, labels) in sets {
        for key in labels.keys().filter(|k| k.is_worker_reported()) {
            // Segments, not a dotted path: the key itself has dots.
            let path = [part, "labels", key.as_str()].map(|k| Segment::Key(k.to_string()));
            errors.push(doc.error_at_segments(
                &path,
                format!(
                    "the prefix {} is reserved for the labels a host's worker reports; expected an operator label without it",
                    crate::names::WORKER_LABEL_PREFIX
                ),
            ));
        }
    }
}

fn check_project(
    batch: &Batch<'_>,
    doc: &Document,
    project: &Name,
    is_new: bool,
    errors: &mut Vec<ManifestError>,
) {
    let kind = doc.manifest.kind();
    match batch.archived(project) {
        None => errors.push(doc.error_at(
            "metadata.project",
            format!(
                "project {:?} does not exist, expected a Project in this batch or already stored",
                project.as_str()
            ),
        )),
        Some(true) if is_new => errors.push(doc.error_at(
            "metadata.project",
            format!(
                "project {:?} is archived and takes no new {kind}, expected an active project (set spec.archived: false on the Project first)",
                project.as_str()
            ),
        )),
        Some(_) => {}
    }
}

fn check_parent<'a>(
    batch: &Batch<'a>,
    doc: &Document,
    project: &'a Name,
    name: &'a Name,
    spec: &TaskSpec,
    errors: &mut Vec<ManifestError>,
) {
    let Some(parent) = &spec.parent else { return };
    if parent == name {
        errors.push(doc.error_at(
            "spec.parent",
            format!(
                "task {:?} is its own parent, expected another task's name or no parent",
                name.as_str()
            ),
        ));
        return;
    }
    if batch.parent_of(project, parent).is_err() {
        errors.push(doc.error_at("spec.parent", batch.missing_task(project, parent, "")));
        return;
    }
    // OQ-6: walk up the parent links as they will be after the batch.
    let mut chain: Vec<Name> = vec![name.clone()];
    let mut visited: HashSet<Name> = HashSet::from([name.clone()]);
    let mut current = Some(parent.clone());
    while let Some(cur) = current {
        chain.push(cur.clone());
        if &cur == name {
            let shown: Vec<&str> = chain.iter().map(Name::as_str).collect();
            errors.push(doc.error_at(
                "spec.parent",
                format!(
                    "parent {:?} makes a cycle {}, expected a parent that is not {:?} or one of its descendants",
                    parent.as_str(),
                    shown.join(" → "),
                    name.as_str()
                ),
            ));
            return;
        }
        if !visited.insert(cur.clone()) {
            // A loop above us that does not pass through this task: the
            // documents on it report it themselves.
            return;
        }
        current = batch.parent_of(project, &cur).unwrap_or(None);
    }
}

fn check_run_task<'a>(
    batch: &Batch<'a>,
    doc: &Document,
    project: &'a Name,
    spec: &'a RunSpec,
    path: &str,
    errors: &mut Vec<ManifestError>,
) {
    let task = &spec.task;
    match batch.task_kind(project, task) {
        None => {
            let elsewhere = batch.other_projects_with_task(project, task);
            let message = match elsewhere.first() {
                Some(other) => format!(
                    "task {:?} is in project {:?}, expected a task in project {:?}",
                    task.as_str(),
                    other.as_str(),
                    project.as_str()
                ),
                None => format!(
                    "no task {:?} in project {:?}, expected the name of a task or subtask in this batch or already stored",
                    task.as_str(),
                    project.as_str()
                ),
            };
            errors.push(doc.error_at(path, message));
        }
        Some(kind @ (WorkItemKind::Milestone | WorkItemKind::Epic)) => errors.push(doc.error_at(
            path,
            format!(
                "task {:?} is {} {kind}, expected a task or subtask (runs execute tasks and subtasks only)",
                task.as_str(),
                if kind == WorkItemKind::Epic { "an" } else { "a" }
            ),
        )),
        Some(_) => {}
    }
}

/// The immutable spec fields that differ between a stored spec and a new
/// one, as field paths (`spec.task`): a Run's `task`, `provider`, `prompt`,
/// `cwd`; a Task's `type`. Other kinds have none.
///
/// Specs are compared after defaults are applied (a Task spec without
/// `type` is a `task`); a spec that does not parse is compared field by
/// field as raw JSON.
pub fn immutable_changes(
    kind: Kind,
    old_spec: &serde_json::Value,
    new_spec: &serde_json::Value,
) -> Vec<&'static str> {
    let fields: &[(&str, &'static str)] = match kind {
        Kind::Run => &[
            ("task", "spec.task"),
            ("provider", "spec.provider"),
            ("prompt", "spec.prompt"),
            ("cwd", "spec.cwd"),
            ("workspace", "spec.workspace"),
            ("permissions", "spec.permissions"),
        ],
        Kind::Task => &[("type", "spec.type")],
        // No immutable field (nor any in a generically stored kind).
        _ => &[],
    };
    let normalize = |spec: &serde_json::Value| -> serde_json::Value {
        let typed = match kind {
            Kind::Run => serde_json::from_value::<RunSpec>(spec.clone())
                .ok()
                .and_then(|s| serde_json::to_value(s).ok()),
            Kind::Task => serde_json::from_value::<TaskSpec>(spec.clone())
                .ok()
                .and_then(|s| serde_json::to_value(s).ok()),
            _ => None,
        };
        typed.unwrap_or_else(|| spec.clone())
    };
    let (old, new) = (normalize(old_spec), normalize(new_spec));
    fields
        .iter()
        .filter(|(field, _)| old.get(field) != new.get(field))
        .map(|(_, path)| *path)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn immutable_fields() {
        let old = json!({"task": "a", "provider": "claude", "prompt": "p", "cwd": "/x"});
        let same =
            json!({"task": "a", "provider": "claude", "prompt": "p", "cwd": "/x", "stopped": true});
        assert!(immutable_changes(Kind::Run, &old, &same).is_empty());
        let changed = json!({"task": "b", "provider": "codex", "prompt": "p", "cwd": "/y"});
        assert_eq!(
            immutable_changes(Kind::Run, &old, &changed),
            vec!["spec.task", "spec.provider", "spec.cwd"]
        );
        // Defaults apply: no type = task.
        let t_old = json!({"title": "x"});
        assert!(
            immutable_changes(Kind::Task, &t_old, &json!({"title": "y", "type": "task"}))
                .is_empty()
        );
        assert_eq!(
            immutable_changes(Kind::Task, &t_old, &json!({"title": "x", "type": "epic"})),
            vec!["spec.type"]
        );
        assert!(immutable_changes(Kind::Host, &json!({}), &json!({"capacity": 9})).is_empty());
    }
}
