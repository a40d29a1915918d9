//! What printing objects reads besides their rows: the Sources that own
//! projects, tasks' dependency links. (Finding the object a URL names is
//! [`crate::api::operator::served::one`].)

use pam_store::prelude::*;
use pam_store::Source;

use crate::api::ApiError;

type ApiResult<T> = Result<T, ApiError>;

/// The name of the Source that owns each of these projects (GitOps), for
/// `status.source`: one read of the owners, one of the Sources when any.
pub async fn project_owners(
    tx: &mut dyn Tx,
    ids: &[uuid::Uuid],
) -> ApiResult<std::collections::HashMap<uuid::Uuid, String>> {
    let keys: Vec<(String, uuid::Uuid)> = ids.iter().map(|id| ("Project".into(), *id)).collect();
    let owners = tx.owners_of(&keys).await?;
    if owners.is_empty() {
        return Ok(Default::default());
    }
    let names: std::collections::HashMap<_, _> = tx
        .list::<Source>(())
        .await?
        .into_iter()
        .map(|s| (s.id, s.name))
        .collect();
    Ok(owners
        .into_iter()
        .filter_map(|o| Some((o.object_id, names.get(&o.source_id)?.clone())))
        .collect())
}

/// A task's dependency links as the API shows them.
#[derive(Debug, Default, Clone)]
pub struct TaskDeps {
    /// The tasks it depends on that are not done (names, sorted).
    pub blocked_by: Vec<String>,
    /// The tasks that depend on it (names, sorted).
    pub dependents: Vec<String>,
}

/// [`TaskDeps`] of these tasks, in two queries; tasks without links are
/// left out.
pub async fn task_deps(
    tx: &mut dyn Tx,
    ids: &[uuid::Uuid],
) -> Result<std::collections::HashMap<uuid::Uuid, TaskDeps>, pam_store::StoreError> {
    let mut out: std::collections::HashMap<uuid::Uuid, TaskDeps> = Default::default();
    for l in tx.dependencies_of(ids).await? {
        if l.other.status != pam_manifests::state::WorkItemStatus::Done {
            out.entry(l.task_id)
                .or_default()
                .blocked_by
                .push(l.other.name);
        }
    }
    for l in tx.dependents_of(ids).await? {
        out.entry(l.task_id)
            .or_default()
            .dependents
            .push(l.other.name);
    }
    Ok(out)
}
