//! Prune: deletes the objects of the input's kinds that match the
//! selector (or applyset) and that the input does not name — never
//! without a selector. Tasks and Runs are pruned only in the projects the
//! batch names (a Project it declares, or a Task's or Run's project):
//! `apply --prune -l team=web -f web/` never reaches into another
//! project whose objects happen to carry the label (issue 14).

use std::collections::{HashMap, HashSet};

use pam_manifests::kinds::Kind;
use pam_manifests::load::Document;
use pam_manifests::names::LabelSelector;
use pam_store::{Labels, RunFilter, WorkItem};
use uuid::Uuid;

use super::writer::Writer;
use super::{Action, ApplyError, ApplyResult};
use crate::rules::{hosts, meta, projects, runs, work_items};

impl Writer<'_> {
    /// Deletes the objects of the input's kinds (and projects) that match
    /// the selector and are not in the input.
    pub(super) async fn prune(
        &mut self,
        docs: &[Document],
        sel: &LabelSelector,
    ) -> Result<(), ApplyError> {
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
        let matches = |l: &Labels| sel.matches(&meta::manifest_labels(l));
        let in_batch: HashSet<String> = docs
            .iter()
            .filter_map(|d| match d.manifest.kind() {
                Kind::Project => Some(d.manifest.name().to_string()),
                _ => d.manifest.project().map(|p| p.to_string()),
            })
            .collect();
        let projects = self.tx.list_projects().await?;
        let batch_projects: Vec<&pam_store::Project> = projects
            .iter()
            .filter(|p| in_batch.contains(&p.slug))
            .collect();
        let now = self.now;
        // Runs and tasks first (children before parents), then hosts and
        // projects.
        if kinds.contains(&Kind::Run) {
            for p in &batch_projects {
                for r in self
                    .tx
                    .list_runs(&RunFilter {
                        project_id: Some(p.id),
                        ..Default::default()
                    })
                    .await?
                {
                    if matches(&r.meta.labels)
                        && !named.contains(&(Kind::Run, Some(p.slug.clone()), r.name.clone()))
                        && runs::delete(self.tx, &r).await?
                    {
                        self.pruned("Run", Some(&p.slug), &r.name);
                    }
                }
            }
        }
        if kinds.contains(&Kind::Task) {
            for p in &batch_projects {
                let items = self.tx.list_work_items(p.id).await?;
                let by_id: HashMap<Uuid, &WorkItem> = items.iter().map(|w| (w.id, w)).collect();
                let doomed = |w: &WorkItem| {
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
                let mut gone: Vec<&WorkItem> = items
                    .iter()
                    .filter(|w| doomed(w) && !keep.contains(&w.id))
                    .collect();
                gone.sort_by_key(|w| w.path.len());
                for w in gone {
                    work_items::delete(self.tx, w, &p.slug, now).await?;
                    self.pruned("Task", Some(&p.slug), &w.name);
                }
            }
        }
        if kinds.contains(&Kind::Host) {
            for h in self.tx.list_hosts().await? {
                if matches(&h.meta.labels)
                    && !named.contains(&(Kind::Host, None, h.name.clone()))
                    && hosts::delete(self.tx, &h).await?
                {
                    self.pruned("Host", None, &h.name);
                }
            }
        }
        if kinds.contains(&Kind::Project) {
            for p in projects {
                if matches(&p.meta.labels)
                    && !named.contains(&(Kind::Project, None, p.slug.clone()))
                    && projects::delete(self.tx, &p).await?
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
