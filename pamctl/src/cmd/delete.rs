//! `delete`: by name, by manifest (`-f`), by selector (`-l`) or every
//! object of a kind (`--all`), children before their parents.
//!
//! pamd cascades a deletion (a project takes its tasks and runs, a task
//! its subtree and runs), so deleting a parent first would make its
//! children 404. pamctl deletes runs, then tasks deepest first, then
//! hosts, then projects; a child that is gone anyway because pamctl
//! deleted an ancestor in this invocation counts as deleted.

use std::collections::{HashMap, HashSet};

use pam_manifests::Kind;
use serde_json::Value;

use super::get::fail_after;
use super::targets;
use crate::cli::DeleteArgs;
use crate::client::Client;
use crate::error::{CliError, Exit, Result};
use crate::{object_path, render, term, Ctx};

/// One object to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Target {
    pub kind: Kind,
    pub project: Option<String>,
    pub name: String,
}

/// The objects named by manifest files (`delete -f`); a document without
/// `metadata.project` uses `default_project`.
pub(crate) fn targets_from_files(
    files: &[crate::files::InputFile],
    default_project: Option<&str>,
) -> Result<Vec<Target>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for f in files {
        let docs = match pam_manifests::load::parse_values(&f.name, &f.content) {
            Ok(d) => d,
            Err(es) => {
                errors.extend(es.iter().map(ToString::to_string));
                continue;
            }
        };
        for (index, v) in crate::roundtrip::expand_lists(docs) {
            let kind_text = v.get("kind").and_then(Value::as_str).unwrap_or("");
            let Some(kind) = Kind::parse(kind_text) else {
                errors.push(format!(
                    "{}: document {index}: kind: unknown kind {kind_text:?}",
                    f.name
                ));
                continue;
            };
            let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) else {
                errors.push(format!(
                    "{}: document {index}: metadata.name: missing",
                    f.name
                ));
                continue;
            };
            let project = if kind.is_project_scoped() {
                match v
                    .pointer("/metadata/project")
                    .and_then(Value::as_str)
                    .or(default_project)
                {
                    Some(p) => Some(p.to_string()),
                    None => {
                        errors.push(format!(
                            "{}: document {index}: metadata.project: missing and no -p given",
                            f.name
                        ));
                        continue;
                    }
                }
            } else {
                None
            };
            out.push(Target {
                kind,
                project,
                name: name.to_string(),
            });
        }
    }
    if !errors.is_empty() {
        return Err(CliError::usage("cannot read the objects to delete").details(errors));
    }
    Ok(out)
}

/// The objects the arguments name (not yet ordered).
fn gather(ctx: &mut Ctx, a: &DeleteArgs) -> Result<Vec<Target>> {
    if !a.files.is_empty() {
        if !a.args.is_empty() || a.selector.is_some() || a.all {
            return Err(CliError::usage(
                "-f cannot be combined with KIND NAME, -l or --all",
            ));
        }
        let inputs = crate::files::collect(&a.files, a.recursive, &mut std::io::stdin().lock())?;
        let project = ctx.resolved()?.project.clone();
        return targets_from_files(&inputs, project.as_deref());
    }
    if a.args.is_empty() {
        return Err(CliError::usage(
            "nothing to delete: pass KIND NAME…, KIND/NAME…, KIND -l SELECTOR, KIND --all, or -f FILE",
        ));
    }
    let requests = targets::parse(&a.args)?;
    let named = requests.iter().any(|r| !r.names.is_empty());
    match (named, a.selector.as_deref(), a.all) {
        (true, None, false) => {}
        (false, Some(_), false) | (false, None, true) => {}
        (true, _, _) => {
            return Err(CliError::usage(
                "pass either NAMEs, -l or --all, not several",
            ))
        }
        (false, Some(_), true) => return Err(CliError::usage("pass either -l or --all, not both")),
        (false, None, false) => {
            let kinds: Vec<&str> = requests.iter().map(|r| r.kind.plural()).collect();
            return Err(CliError::usage(format!(
                "delete {}: which? pass NAMEs, -l SELECTOR or --all",
                kinds.join(",")
            )));
        }
    }
    if let Some(sel) = &a.selector {
        super::apply::parse_selector(sel)?;
    }
    let mut out = Vec::new();
    for r in requests {
        let project = ctx.project_for(r.kind)?;
        if named {
            out.extend(r.names.iter().map(|n| Target {
                kind: r.kind,
                project: project.clone(),
                name: n.clone(),
            }));
            continue;
        }
        let client = ctx.client()?;
        let found = client.list(r.kind, project.as_deref(), a.selector.as_deref())?;
        if found.is_empty() {
            let scope = project
                .as_ref()
                .map(|p| format!(" in project {p:?}"))
                .unwrap_or_default();
            match &a.selector {
                Some(sel) => term::note(&format!("No {}{scope} match {sel:?}.", r.kind.plural())),
                None => term::note(&format!("No {}{scope}.", r.kind.plural())),
            }
        }
        out.extend(
            found
                .iter()
                .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
                .map(|n| Target {
                    kind: r.kind,
                    project: project.clone(),
                    name: n.to_string(),
                }),
        );
    }
    Ok(out)
}

/// `--all` asks first, as `task cancel` does: on a terminal it shows what
/// goes and waits for a yes; without one it needs `--yes`.
fn confirm_all(targets: &[Target], yes: bool) -> Result<bool> {
    if yes || targets.is_empty() {
        return Ok(true);
    }
    let names: Vec<String> = targets
        .iter()
        .map(|t| render::qualified_in(t.project.as_deref(), t.kind, &t.name))
        .collect();
    let cascade = if targets
        .iter()
        .any(|t| matches!(t.kind, Kind::Project | Kind::Task))
    {
        " (and, by cascade, everything in or below them)"
    } else {
        ""
    };
    let what = format!(
        "--all deletes {} object(s){cascade}: {}",
        names.len(),
        names.join(", ")
    );
    if !term::stdin_is_terminal() {
        return Err(
            CliError::usage(what).hint("pass --yes to confirm when stdin is not a terminal")
        );
    }
    term::note(&what);
    Ok(term::confirm("Delete them?"))
}

/// Task depths (`status.path` segments) by (project, name), one listing
/// per project with tasks among the targets.
fn task_paths(client: &Client, targets: &[Target]) -> HashMap<(String, String), String> {
    let mut out = HashMap::new();
    let projects: HashSet<&str> = targets
        .iter()
        .filter(|t| t.kind == Kind::Task)
        .filter_map(|t| t.project.as_deref())
        .collect();
    for p in projects {
        // A project that is not there has no tasks to order.
        let Ok(tasks) = client.list(Kind::Task, Some(p), None) else {
            continue;
        };
        for t in tasks {
            let name = t.pointer("/metadata/name").and_then(Value::as_str);
            let path = t.pointer("/status/path").and_then(Value::as_str);
            if let (Some(n), Some(path)) = (name, path) {
                out.insert((p.to_string(), n.to_string()), path.to_string());
            }
        }
    }
    out
}

/// Deletion order: the registry's prune order (runs, tasks deepest first,
/// Secrets and Schedules, Webhooks, Sources, hosts, projects); stable
/// otherwise.
fn order(targets: &mut [Target], paths: &HashMap<(String, String), String>) {
    let depth = |t: &Target| {
        t.project
            .as_ref()
            .and_then(|p| paths.get(&(p.clone(), t.name.clone())))
            .map_or(0, |path| path.matches('/').count())
    };
    targets.sort_by_key(|t| {
        // The one order of deletion (the registry's, which the server's
        // prune follows): children before what their deletion cascades from.
        let rank = t.kind.info().prune_order;
        (rank, std::cmp::Reverse(depth(t)))
    });
}

/// What this invocation has deleted so far, to recognise a child that a
/// cascade already took.
#[derive(Default)]
struct Deleted {
    projects: HashSet<String>,
    /// (project, task path).
    task_paths: Vec<(String, String)>,
}

impl Deleted {
    fn covers(&self, t: &Target, paths: &HashMap<(String, String), String>) -> bool {
        let Some(p) = &t.project else { return false };
        if self.projects.contains(p) {
            return true;
        }
        let Some(path) = paths.get(&(p.clone(), t.name.clone())) else {
            return false;
        };
        self.task_paths
            .iter()
            .any(|(dp, dpath)| dp == p && path.starts_with(&format!("{dpath}/")))
    }
}

pub(crate) fn delete(ctx: &mut Ctx, a: DeleteArgs) -> Result<Exit> {
    let mut targets = gather(ctx, &a)?;
    if a.all && !confirm_all(&targets, a.yes)? {
        term::note("Nothing was deleted.");
        return Ok(Exit::Failed);
    }
    if targets.is_empty() {
        return Ok(Exit::Ok);
    }
    let client = ctx.client()?;
    let paths = task_paths(&client, &targets);
    order(&mut targets, &paths);
    let mut deleted = Deleted::default();
    let mut errors = Vec::new();
    for t in targets {
        let done = format!(
            "{} deleted",
            render::qualified_in(t.project.as_deref(), t.kind, &t.name)
        );
        match client.delete(&object_path(t.kind, t.project.as_deref(), &t.name)) {
            Ok(_) => {
                term::outln(&done);
                match (t.kind, &t.project) {
                    (Kind::Project, _) => {
                        deleted.projects.insert(t.name.clone());
                    }
                    (Kind::Task, Some(p)) => {
                        if let Some(path) = paths.get(&(p.clone(), t.name.clone())) {
                            deleted.task_paths.push((p.clone(), path.clone()));
                        }
                    }
                    _ => {}
                }
            }
            Err(e) if e.status == Some(404) && deleted.covers(&t, &paths) => term::outln(&done),
            Err(e) if e.status == Some(404) && a.ignore_not_found => {}
            Err(e) => errors.push(e),
        }
    }
    fail_after(errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::InputFile;
    use std::collections::HashMap;

    #[test]
    fn delete_targets_from_manifests() {
        let f = InputFile {
            name: "web.yaml".into(),
            content: "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\n---\n\
                      apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: build}\nspec: {title: B}\n---\n\
                      apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: api}\n"
                .into(),
        };
        let t = targets_from_files(std::slice::from_ref(&f), Some("web")).unwrap();
        assert_eq!(
            t,
            [
                Target {
                    kind: Kind::Project,
                    project: None,
                    name: "web".into()
                },
                Target {
                    kind: Kind::Task,
                    project: Some("web".into()),
                    name: "build".into()
                },
                Target {
                    kind: Kind::Run,
                    project: Some("api".into()),
                    name: "r1".into()
                },
            ]
        );
        let e = targets_from_files(&[f], None).unwrap_err();
        assert_eq!(
            e.details,
            ["web.yaml: document 1: metadata.project: missing and no -p given"]
        );
    }

    #[test]
    fn children_go_first() {
        let t = |kind, name: &str| Target {
            kind,
            project: kind.is_project_scoped().then(|| "web".to_string()),
            name: name.into(),
        };
        let mut targets = vec![
            t(Kind::Project, "web"),
            t(Kind::Task, "release-1"),
            t(Kind::Host, "alpha"),
            t(Kind::Task, "build"),
            t(Kind::Task, "unknown"),
            t(Kind::Run, "r1"),
            t(Kind::Task, "ui"),
        ];
        let paths: HashMap<(String, String), String> = [
            ("release-1", "release-1"),
            ("build", "release-1/build"),
            ("ui", "release-1/build/ui"),
        ]
        .into_iter()
        .map(|(n, p)| (("web".to_string(), n.to_string()), p.to_string()))
        .collect();
        order(&mut targets, &paths);
        let names: Vec<&str> = targets.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            ["r1", "ui", "build", "release-1", "unknown", "alpha", "web"]
        );
        let mut d = Deleted::default();
        d.task_paths.push(("web".into(), "release-1".into()));
        assert!(d.covers(&t(Kind::Task, "ui"), &paths));
        assert!(!d.covers(&t(Kind::Task, "release-1"), &paths));
        assert!(!d.covers(&t(Kind::Task, "unknown"), &paths));
        d.projects.insert("web".into());
        assert!(d.covers(&t(Kind::Run, "r1"), &paths));
        assert!(!d.covers(&t(Kind::Host, "alpha"), &paths));
    }
}
