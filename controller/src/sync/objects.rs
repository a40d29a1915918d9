//! Each owned object's own sync and health (Argo CD's resource
//! tree), computed when a Source is read — so they follow the objects
//! level-triggered, without waiting for a sync.

use pam_manifests::kinds::Drift;
use pam_store::OwnedObject;

use crate::apply::ownership::owned_drift;

/// Each owned object's own sync and health: the first
/// `shown` by kind, project and name, and how many more there are.
pub fn object_states(
    owned: &[OwnedObject],
    departed: &[pam_manifests::kinds::OwnedState],
    shown: usize,
) -> (Vec<pam_manifests::kinds::OwnedState>, usize) {
    let drift: std::collections::HashMap<(String, Option<String>, String), Vec<String>> =
        drift_of(owned)
            .into_iter()
            .map(|d| ((d.kind, d.project, d.name), d.fields))
            .collect();
    let mut all: Vec<pam_manifests::kinds::OwnedState> = owned
        .iter()
        .map(|o| {
            let key = (
                o.owner.kind.clone(),
                o.owner.project.clone(),
                o.owner.name.clone(),
            );
            let fields = drift.get(&key);
            let (sync, health, message) = match &o.meta {
                None => ("Missing", "Missing", String::new()),
                Some(_) => {
                    let sync = if fields.is_some() {
                        "OutOfSync"
                    } else {
                        "Synced"
                    };
                    let (health, said) = health(o);
                    let message = match (fields, said) {
                        (Some(f), _) => f.join(", "),
                        (None, Some(s)) => s.to_string(),
                        (None, None) => String::new(),
                    };
                    (sync, health, message)
                }
            };
            state(o, sync, health, message)
        })
        .collect();
    // The objects that left the tree at the last sync that wrote
    // (`Pruned`, `Held`), unless the tree has taken them back since.
    let owned_now: std::collections::HashSet<(&str, Option<&str>, &str)> = owned
        .iter()
        .map(|o| {
            let k = &o.owner;
            (k.kind.as_str(), k.project.as_deref(), k.name.as_str())
        })
        .collect();
    all.extend(
        departed
            .iter()
            .filter(|d| {
                !owned_now.contains(&(d.kind.as_str(), d.project.as_deref(), d.name.as_str()))
            })
            .cloned(),
    );
    bounded(all, shown)
}

/// Sorted by kind, project and name; the first `shown`, and how many more.
pub fn bounded(
    mut all: Vec<pam_manifests::kinds::OwnedState>,
    shown: usize,
) -> (Vec<pam_manifests::kinds::OwnedState>, usize) {
    all.sort_by(|a, b| (&a.kind, &a.project, &a.name).cmp(&(&b.kind, &b.project, &b.name)));
    let omitted = all.len().saturating_sub(shown);
    all.truncate(shown);
    (all, omitted)
}

/// An owned object's health: a run by its phase, a task by its status
/// (doing: Progressing), anything else Healthy while it exists; with the
/// phase or status it was read from.
fn health(o: &OwnedObject) -> (&'static str, Option<&'static str>) {
    use pam_manifests::kinds::HealthState;
    use pam_manifests::state::WorkItemStatus as T;
    let health = match (o.run_status, o.task_status) {
        (Some(status), _) => super::health::run_health(status),
        (None, Some(T::Doing)) => HealthState::Progressing,
        _ => HealthState::Healthy,
    }
    .as_str();
    let said = o
        .run_status
        .map(|s| s.as_str())
        .or(o.task_status.map(|t| t.as_str()));
    (health, said)
}

fn state(
    o: &OwnedObject,
    sync: &str,
    health: &str,
    message: String,
) -> pam_manifests::kinds::OwnedState {
    pam_manifests::kinds::OwnedState {
        kind: o.owner.kind.clone(),
        project: o.owner.project.clone(),
        name: o.owner.name.clone(),
        sync: sync.into(),
        health: health.into(),
        message,
    }
}

/// An object that left the tree at this sync: `Pruned` (gone;
/// health `Missing`), or `Held` — kept, with why — and its health as it
/// was when it left.
pub fn departed(o: &OwnedObject, pruned: bool, why: String) -> pam_manifests::kinds::OwnedState {
    if pruned {
        state(o, "Pruned", "Missing", why)
    } else {
        state(o, "Held", health(o).0, why)
    }
}

/// The drift of the owned objects: owned fields changed by another path,
/// and owned objects deleted behind the Source's back.
pub fn drift_of(owned: &[OwnedObject]) -> Vec<Drift> {
    owned
        .iter()
        .filter_map(|o| {
            let fields = match &o.meta {
                None => vec!["(deleted)".to_string()],
                Some(meta) => owned_drift(&o.owner, meta),
            };
            (!fields.is_empty()).then(|| Drift {
                kind: o.owner.kind.clone(),
                project: o.owner.project.clone(),
                name: o.owner.name.clone(),
                fields,
            })
        })
        .collect()
}
