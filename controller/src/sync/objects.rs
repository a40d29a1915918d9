//! Each owned object's own sync and health (issue 35; Argo CD's resource
//! tree), computed when a Source is read — so they follow the objects
//! level-triggered, without waiting for a sync.

use pam_store::OwnedObject;

use super::runner::drift_of;

/// Each owned object's own sync and health (issue 35): the first
/// `shown` by kind, project and name, and how many more there are.
pub fn object_states(
    owned: &[OwnedObject],
    shown: usize,
) -> (Vec<pam_manifests::kinds::OwnedState>, usize) {
    use pam_manifests::state::{RunStatus as R, WorkItemStatus as T};
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
            let (sync, health, message) = match (&o.meta, o.run_status) {
                (None, _) => ("Missing", "Missing", String::new()),
                (Some(_), status) => {
                    let sync = if fields.is_some() {
                        "OutOfSync"
                    } else {
                        "Synced"
                    };
                    // A run by its phase; a task by its status (doing:
                    // Progressing); anything else Healthy while it exists.
                    let health = match (status, o.task_status) {
                        (Some(R::Failed), _) => "Degraded",
                        (Some(R::Pending | R::Spawning | R::Running), _) => "Progressing",
                        (_, Some(T::Doing)) => "Progressing",
                        _ => "Healthy",
                    };
                    let said = status
                        .map(|s| s.as_str())
                        .or(o.task_status.map(|t| t.as_str()));
                    let message = match (fields, said) {
                        (Some(f), _) => f.join(", "),
                        (None, Some(s)) => s.to_string(),
                        (None, None) => String::new(),
                    };
                    (sync, health, message)
                }
            };
            pam_manifests::kinds::OwnedState {
                kind: o.owner.kind.clone(),
                project: o.owner.project.clone(),
                name: o.owner.name.clone(),
                sync: sync.into(),
                health: health.into(),
                message,
            }
        })
        .collect();
    all.sort_by(|a, b| (&a.kind, &a.project, &a.name).cmp(&(&b.kind, &b.project, &b.name)));
    let omitted = all.len().saturating_sub(shown);
    all.truncate(shown);
    (all, omitted)
}
