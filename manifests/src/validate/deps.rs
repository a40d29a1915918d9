//! `spec.dependsOn` of a Task, validated with the whole batch
//! like parents (OQ-6) and through the same batch index ([`Batch`]): the
//! links are the batch's on top of the stored ones.
//!
//! # Rules
//! - Each name is another Task of the *same* project, in the batch or
//!   stored, listed once.
//! - Not the task itself, and not one of its ancestors: an ancestor is
//!   done only after its children, so a run waiting for it would wait for
//!   itself. A descendant is allowed (a task's run may wait for its
//!   subtasks).
//! - No cycle at any length. The error prints the whole cycle and where
//!   each link is declared (file:line, or "stored"); it is reported once,
//!   on the batch task of the cycle with the smallest name.

use std::collections::{HashMap, HashSet, VecDeque};

use super::Batch;
use crate::error::ManifestError;
use crate::kinds::TaskSpec;
use crate::load::Document;
use crate::names::Name;

pub(super) fn check<'a>(
    batch: &Batch<'a>,
    doc: &Document,
    project: &'a Name,
    name: &'a Name,
    spec: &TaskSpec,
    errors: &mut Vec<ManifestError>,
) {
    let mut listed: HashSet<&Name> = HashSet::new();
    for (i, dep) in spec.depends_on.iter().enumerate() {
        let field = format!("spec.dependsOn[{i}]");
        if dep == name {
            errors.push(doc.error_at(
                &field,
                format!(
                    "task {:?} depends on itself, expected the name of another task",
                    name.as_str()
                ),
            ));
            continue;
        }
        if !listed.insert(dep) {
            errors.push(doc.error_at(
                &field,
                format!(
                    "task {:?} is listed twice, expected each dependency once",
                    dep.as_str()
                ),
            ));
            continue;
        }
        if batch.depends_on_of(project, dep).is_none() {
            let message = batch.missing_task(project, dep, " (dependencies stay within a project)");
            errors.push(doc.error_at(&field, message));
            continue;
        }
        if is_ancestor(batch, project, name, dep) {
            errors.push(doc.error_at(
                &field,
                format!(
                    "task {:?} is an ancestor of {:?} and is done only after it, expected a task that is not {:?}'s parent or above",
                    dep.as_str(),
                    name.as_str(),
                    name.as_str()
                ),
            ));
            continue;
        }
        if let Some(cycle) = cycle_through(batch, project, name, dep) {
            // One error per cycle: on its batch task with the smallest name.
            let reporter = cycle
                .iter()
                .filter(|n| batch.task_doc(project, n).is_some())
                .min();
            if reporter == Some(name) {
                errors.push(doc.error_at(&field, cycle_message(batch, project, &cycle)));
            }
        }
    }
}

/// Whether `candidate` is a parent, grandparent, … of `name` after the batch.
fn is_ancestor<'a>(batch: &Batch<'a>, project: &'a Name, name: &Name, candidate: &Name) -> bool {
    let mut seen: HashSet<Name> = HashSet::new();
    let mut current = batch.parent_of(project, name).unwrap_or(None);
    while let Some(cur) = current {
        if &cur == candidate {
            return true;
        }
        if !seen.insert(cur.clone()) {
            return false; // a parent cycle: reported by the parent check
        }
        current = batch.parent_of(project, &cur).unwrap_or(None);
    }
    false
}

/// The shortest cycle `name → dep → … → name` over the links after the
/// batch, as the list of its tasks (`name` first, not repeated at the end).
fn cycle_through<'a>(
    batch: &Batch<'a>,
    project: &'a Name,
    name: &Name,
    dep: &Name,
) -> Option<Vec<Name>> {
    let mut came_from: HashMap<Name, Name> = HashMap::new();
    let mut queue: VecDeque<Name> = VecDeque::from([dep.clone()]);
    came_from.insert(dep.clone(), name.clone());
    while let Some(cur) = queue.pop_front() {
        for next in batch.depends_on_of(project, &cur).unwrap_or_default() {
            if &next == name {
                let mut path = vec![cur.clone()];
                let mut at = cur;
                while let Some(prev) = came_from.get(&at) {
                    if prev == name {
                        break;
                    }
                    path.push(prev.clone());
                    at = prev.clone();
                }
                path.push(name.clone());
                path.reverse();
                return Some(path);
            }
            if !came_from.contains_key(&next) {
                came_from.insert(next.clone(), cur.clone());
                queue.push_back(next);
            }
        }
    }
    None
}

/// `dependsOn makes a cycle a → b → a, expected …: a → b (f.yaml:7), …`.
fn cycle_message<'a>(batch: &Batch<'a>, project: &'a Name, cycle: &[Name]) -> String {
    let mut shown: Vec<&str> = cycle.iter().map(Name::as_str).collect();
    shown.push(cycle[0].as_str());
    let links: Vec<String> = (0..cycle.len())
        .map(|i| {
            let (from, to) = (&cycle[i], &cycle[(i + 1) % cycle.len()]);
            format!(
                "{} → {} ({})",
                from.as_str(),
                to.as_str(),
                link_at(batch, project, from, to)
            )
        })
        .collect();
    format!(
        "dependsOn makes a cycle {}, expected dependencies without a cycle; links: {}",
        shown.join(" → "),
        links.join(", ")
    )
}

/// Where the link `from → to` is declared: `file:line` of the list entry
/// in the batch, or "stored".
fn link_at<'a>(batch: &Batch<'a>, project: &'a Name, from: &Name, to: &Name) -> String {
    let Some(doc) = batch.task_doc(project, from) else {
        return "stored".to_string();
    };
    let index = match &doc.manifest {
        crate::kinds::Manifest::Task(t) => t.spec.depends_on.iter().position(|d| d == to),
        _ => None,
    };
    let path = index.map_or("spec.dependsOn".to_string(), |i| {
        format!("spec.dependsOn[{i}]")
    });
    let at = doc.locate(&path);
    if at.line == 0 {
        format!("{} document {}", doc.file, doc.index)
    } else {
        format!("{}:{}", doc.file, at.line)
    }
}
