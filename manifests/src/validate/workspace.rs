//! The workspace batch rules: a workspace (a run's own, its task's default,
//! a Schedule's template's) needs a project with a repository; a run
//! needs a `cwd` or a workspace.

use super::{Batch, Document, ManifestError};
use crate::kinds::{Manifest, RunSpec};
use crate::names::Name;

impl Batch<'_> {
    /// Whether `project` has a repository after the batch.
    fn has_repository(&self, project: &Name) -> bool {
        match self.projects.get(project).map(|d| &d.manifest) {
            Some(Manifest::Project(p)) => p.spec.repository.is_some(),
            _ => self.existing.has_repository(project),
        }
    }

    /// Whether task `name` of `project` has a default workspace after the
    /// batch.
    fn task_workspace(&self, project: &Name, name: &Name) -> bool {
        match self.task_doc(project, name).map(|d| &d.manifest) {
            Some(Manifest::Task(t)) => t.spec.workspace.is_some(),
            _ => self.existing.task_workspace(project, name),
        }
    }
}

/// A Task's default workspace: its project needs a repository.
pub(super) fn check_task(
    batch: &Batch<'_>,
    doc: &Document,
    project: &Name,
    has_workspace: bool,
    errors: &mut Vec<ManifestError>,
) {
    if has_workspace && batch.projects_known(project) && !batch.has_repository(project) {
        errors.push(doc.error_at("spec.workspace", no_repository(project)));
    }
}

/// A Run's (or a Schedule's template's, under `at`) cwd and workspace.
pub(super) fn check_run(
    batch: &Batch<'_>,
    doc: &Document,
    project: &Name,
    spec: &RunSpec,
    at: &str,
    errors: &mut Vec<ManifestError>,
) {
    if !batch.projects_known(project) {
        return; // said by check_project
    }
    let field = if spec.workspace.is_some() {
        "workspace"
    } else if !spec.cwd.is_empty() {
        return;
    } else if batch.task_workspace(project, &spec.task) {
        "task"
    } else {
        errors.push(doc.error_at(
            &format!("{at}.cwd"),
            format!(
                "missing: the run has no cwd, no workspace, and its task {:?} no default workspace; expected spec.cwd or spec.workspace",
                spec.task.as_str()
            ),
        ));
        return;
    };
    if !batch.has_repository(project) {
        errors.push(doc.error_at(&format!("{at}.{field}"), no_repository(project)));
    }
}

fn no_repository(project: &Name) -> String {
    format!(
        "a workspace is a worktree of the project's repository, and project {:?} has none; expected spec.repository on the Project",
        project.as_str()
    )
}
