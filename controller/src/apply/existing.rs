//! What validation and the writer need of the stored state — only what the
//! batch can touch, so that an apply's cost follows the batch, not the
//! size of its projects: the projects it names; in each, the
//! tasks it names (its Tasks, their parents, its Runs' tasks) with their
//! stored ancestors; the runs it names.
//!
//! # Why that is enough
//! `validate_batch` asks the stored state about: projects a document
//! names; whether a Task or Run of the batch is stored (is it new?); the
//! type of a Run's task; and parent links, walking up from a Task's parent
//! (OQ-6: no cycle after the batch). On that walk each step is either a
//! task of the batch (its next step is a parent the batch names) or a
//! stored task reached from a named one by stored links, i.e. one of the
//! named tasks' ancestors. Dependency links are walked from a
//! task the batch names too: the stored links reachable from the named
//! tasks are read with them ([`stored_dependencies`]). A reference that resolves nowhere in its own
//! project is looked up by name in every project, to word the error.

use std::collections::{BTreeSet, HashMap, HashSet};

use pam_manifests::kinds::{Kind, Manifest};
use pam_manifests::names::Name;
use pam_manifests::state::ProjectStatus;
use pam_manifests::validate::{InMemoryState, StoredProject, StoredTask};
use pam_store::prelude::*;
use pam_store::{Project, Run, StoreError, WorkItem};

use super::stored::{stored_one, Lookup, ObjectKey, StoredObject};
use pam_store::Meta;
use uuid::Uuid;

/// The stored state a batch can touch.
pub struct Existing {
    /// For `validate_batch`.
    pub(super) state: InMemoryState,
    /// The stored work items the batch names and their ancestors, by
    /// project id and name: the writer's rows (a name the batch uses that
    /// is not here is not stored).
    pub(super) items: HashMap<Uuid, HashMap<String, WorkItem>>,
    /// The stored projects the batch names, by slug.
    projects: HashMap<String, Project>,
    /// The stored runs the batch names, by project id and name.
    runs: HashMap<Uuid, HashMap<String, Run>>,
}

impl Existing {
    /// A stored object the batch names, from what was read (Projects,
    /// Tasks and Runs; a key the batch does not name is not here).
    pub fn find(&self, key: &ObjectKey) -> Option<(Uuid, &pam_store::Meta)> {
        let (kind, project, name) = key;
        match (kind, project) {
            (Kind::Project, _) => self.projects.get(name).map(|p| (p.id, &p.meta)),
            (Kind::Task, Some(slug)) => self.projects.get(slug).and_then(|p| {
                let w = self.items.get(&p.id)?.get(name)?;
                Some((w.id, &w.meta))
            }),
            (Kind::Run, Some(slug)) => self.projects.get(slug).and_then(|p| {
                let r = self.runs.get(&p.id)?.get(name)?;
                Some((r.id, &r.meta))
            }),
            _ => None,
        }
    }

    /// The stored objects among `keys`, from what was read: what a sync
    /// merges and owns, without reading them again.
    pub fn stored(&self, keys: &[ObjectKey]) -> HashMap<ObjectKey, StoredObject> {
        let mut out = HashMap::with_capacity(keys.len());
        for key in keys {
            if let Some((id, meta)) = self.find(key) {
                out.insert(
                    key.clone(),
                    StoredObject {
                        id,
                        meta: meta.clone(),
                    },
                );
            }
        }
        out
    }
}

/// What one project's documents name.
#[derive(Default)]
struct Named {
    /// Tasks, their parents, Runs' tasks.
    tasks: BTreeSet<String>,
    runs: BTreeSet<String>,
}

/// Reads the stored state the batch can touch (module doc).
pub async fn load_existing(tx: &mut dyn Tx, docs: &[&Manifest]) -> Result<Existing, StoreError> {
    let mut named: HashMap<Name, Named> = HashMap::new();
    for m in docs {
        match m {
            Manifest::Project(p) => {
                named.entry(p.metadata.name.clone()).or_default();
            }
            Manifest::Task(t) => {
                let n = named.entry(t.metadata.project.clone()).or_default();
                n.tasks.insert(t.metadata.name.to_string());
                n.tasks
                    .extend(t.spec.parent.as_ref().map(|p| p.to_string()));
                n.tasks
                    .extend(t.spec.depends_on.iter().map(|d| d.to_string()));
            }
            Manifest::Run(r) => {
                let n = named.entry(r.metadata.project.clone()).or_default();
                n.runs.insert(r.metadata.name.to_string());
                n.tasks.insert(r.spec.task.to_string());
            }
            Manifest::Schedule(s) => {
                let n = named.entry(s.metadata.project.clone()).or_default();
                n.tasks.insert(s.spec.run_template.task.to_string());
            }
            // Any other kind: the project it lives in, if any (a kind
            // that names no other object needs no arm here).
            other => {
                if let Some(p) = other.project() {
                    named.entry(p.clone()).or_default();
                }
            }
        }
    }
    let mut projects: Vec<(Name, Named)> = named.into_iter().collect();
    projects.sort_by(|a, b| a.0.cmp(&b.0));
    let mut st = InMemoryState::default();
    let mut items = HashMap::new();
    let mut stored_projects = HashMap::new();
    let mut runs = HashMap::new();
    for (name, named) in projects {
        let Some(p) = tx.by_name::<Project>((), name.as_str()).await? else {
            continue;
        };
        st.projects.insert(
            name.clone(),
            StoredProject {
                archived: p.status == ProjectStatus::Archived,
            },
        );
        if p.meta.spec.get("repository").is_some() {
            st.repositories.insert(name.clone());
        }
        let task_names: Vec<String> = named.tasks.into_iter().collect();
        let chains = tx.work_items_with_ancestors(p.id, &task_names).await?;
        let name_of: HashMap<Uuid, &str> = chains.iter().map(|w| (w.id, w.name.as_str())).collect();
        for w in &chains {
            // The result holds every ancestor of its items: a parent is
            // always found (the store's contract, in its conformance suite).
            let parent = w
                .parent_id
                .and_then(|id| name_of.get(&id))
                .and_then(|n| Name::parse(n).ok());
            if let Ok(n) = Name::parse(&w.name) {
                if w.meta.spec.get("workspace").is_some() {
                    st.task_workspaces.insert((name.clone(), n.clone()));
                }
                st.tasks.insert(
                    (name.clone(), n),
                    StoredTask {
                        kind: w.kind,
                        parent,
                        depends_on: vec![],
                    },
                );
            }
        }
        stored_dependencies(tx, &name, &chains, &mut st).await?;
        let run_names: Vec<String> = named.runs.into_iter().collect();
        let mut named_runs = HashMap::new();
        if !run_names.is_empty() {
            for r in tx.runs_named(p.id, &run_names).await? {
                if let Ok(n) = Name::parse(&r.name) {
                    st.runs.insert((name.clone(), n));
                }
                named_runs.insert(r.name.clone(), r);
            }
        }
        runs.insert(p.id, named_runs);
        items.insert(
            p.id,
            chains.into_iter().map(|w| (w.name.clone(), w)).collect(),
        );
        stored_projects.insert(name.to_string(), p);
    }
    other_projects_tasks(tx, docs, &mut st).await?;
    Ok(Existing {
        state: st,
        items,
        projects: stored_projects,
        runs,
    })
}

/// The stored dependency links validation can walk from the tasks the
/// batch names: every link reachable from them, so a cycle the
/// batch would close through stored links is seen. Tasks reached only by
/// links are added with their kind and links (their parents are not
/// walked: the ancestor check starts from a task of the batch).
async fn stored_dependencies(
    tx: &mut dyn Tx,
    project: &Name,
    chains: &[WorkItem],
    st: &mut InMemoryState,
) -> Result<(), StoreError> {
    let ids: Vec<Uuid> = chains.iter().map(|w| w.id).collect();
    let links = tx.dependency_closure(&ids).await?;
    if links.is_empty() {
        return Ok(());
    }
    let mut rows: HashMap<Uuid, &WorkItem> = chains.iter().map(|w| (w.id, w)).collect();
    for l in &links {
        rows.entry(l.other.id).or_insert(&l.other);
    }
    let mut out: HashMap<Uuid, Vec<Name>> = HashMap::new();
    for l in &links {
        if let Ok(n) = Name::parse(&l.other.name) {
            out.entry(l.task_id).or_default().push(n);
        }
    }
    for (id, w) in rows {
        let Ok(n) = Name::parse(&w.name) else {
            continue;
        };
        let entry = st
            .tasks
            .entry((project.clone(), n))
            .or_insert_with(|| StoredTask {
                kind: w.kind,
                parent: None,
                depends_on: vec![],
            });
        entry.depends_on = out.remove(&id).unwrap_or_default();
    }
    Ok(())
}

/// A parent (or a Run's task) found neither in its project (batch or
/// stored) may be stored in another project: those tasks are added to
/// `st` so that the error names that project (parents and tasks must be
/// in the same project). Only read when a reference does not resolve,
/// i.e. on the way to an error.
async fn other_projects_tasks(
    tx: &mut dyn Tx,
    docs: &[&Manifest],
    st: &mut InMemoryState,
) -> Result<(), StoreError> {
    let in_batch: HashSet<(&Name, &Name)> = docs
        .iter()
        .filter_map(|m| match m {
            Manifest::Task(t) => Some((&t.metadata.project, &t.metadata.name)),
            _ => None,
        })
        .collect();
    let missing: BTreeSet<String> = docs
        .iter()
        .filter_map(|m| match m {
            Manifest::Task(t) => t.spec.parent.as_ref().map(|p| (&t.metadata.project, p)),
            Manifest::Run(r) => Some((&r.metadata.project, &r.spec.task)),
            _ => None,
        })
        .filter(|&(project, task)| {
            !in_batch.contains(&(project, task))
                && !st.tasks.contains_key(&(project.clone(), task.clone()))
        })
        .map(|(_, task)| task.to_string())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let found = tx
        .work_items_named(&missing.into_iter().collect::<Vec<_>>())
        .await?;
    if found.is_empty() {
        return Ok(());
    }
    let slugs: HashMap<Uuid, String> = tx
        .list::<Project>(())
        .await?
        .into_iter()
        .map(|p| (p.id, p.slug))
        .collect();
    for w in found {
        let (Some(Ok(project)), Ok(task)) = (
            slugs.get(&w.project_id).map(|s| Name::parse(s)),
            Name::parse(&w.name),
        ) else {
            continue;
        };
        // Never over a task read above (with its parent): those are the
        // ones validation walks.
        st.tasks.entry((project, task)).or_insert(StoredTask {
            kind: w.kind,
            parent: None,
            depends_on: vec![],
        });
    }
    Ok(())
}

/// The stored objects a batch names, of every kind: Projects, Tasks and
/// Runs from what apply read already (`existing`), the other kinds read
/// here.
pub struct StoredAny<'a> {
    existing: &'a Existing,
    others: HashMap<ObjectKey, StoredObject>,
}

impl Lookup for StoredAny<'_> {
    fn find(&self, key: &ObjectKey) -> Option<(Uuid, &Meta)> {
        self.existing.find(key).or_else(|| self.others.find(key))
    }
}

/// [`StoredAny`] of `keys`: the kinds `existing` does not hold (a batch
/// has few) one read each.
pub async fn stored_any<'a>(
    tx: &mut dyn Tx,
    existing: &'a Existing,
    keys: &[ObjectKey],
) -> Result<StoredAny<'a>, StoreError> {
    let mut others = HashMap::new();
    for key in keys {
        let (kind, project, name) = key;
        if matches!(kind, Kind::Project | Kind::Task | Kind::Run) {
            continue;
        }
        if let Some(o) = stored_one(tx, *kind, project.as_deref(), name).await? {
            others.insert(key.clone(), o);
        }
    }
    Ok(StoredAny { existing, others })
}
