//! A run's workspace as its worker gets it: resolved when an
//! attempt is handed out — the run's `spec.workspace`, else (a run with
//! no `cwd`) its task's; the project's repository; the branch; and for
//! attempt 2 and later where to start from, read from the previous
//! attempt's stored result.

use pam_manifests::kinds::{FromAttempt, Repository, RepositorySecretRef, Workspace};
use pam_manifests::protocol::WorkspaceOrder;
use pam_store::prelude::*;
use pam_store::{Project, Run, StoreResult};
use serde_json::Value;

fn field<T: serde::de::DeserializeOwned>(spec: &Value, name: &str) -> Option<T> {
    spec.get(name)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// Whether [`order`] may read the store for `r` (it has a workspace of its
/// own, or no `cwd` and so perhaps its task's): false means `Ok(None)`
/// without a read, so a claim of runs without one opens no transaction.
pub fn may_have(r: &Run) -> bool {
    r.meta.spec.get("workspace").is_some() || r.cwd.is_empty()
}

/// The workspace order for `r`'s current attempt, with the repository's
/// `secretRef` for the caller to open (its credentials travel in the
/// order, `api::worker`): `Ok(None)` for a run without a workspace,
/// `Ok(Some(Err(why)))` when it has one that cannot be prepared (its
/// project lost its repository since): the spawn fails with `why`, as for
/// a missing Secret.
pub async fn order(
    tx: &mut dyn Tx,
    r: &Run,
) -> StoreResult<Option<Result<(WorkspaceOrder, Option<RepositorySecretRef>), String>>> {
    let own: Option<Workspace> = field(&r.meta.spec, "workspace");
    if own.is_none() && !r.cwd.is_empty() {
        return Ok(None);
    }
    let Some(task) = tx.get_work_item(r.task_id).await? else {
        return Ok(None);
    };
    let Some(ws) = own.or_else(|| field(&task.meta.spec, "workspace")) else {
        return Ok(None);
    };
    let project = tx.get::<Project>(r.project_id).await?;
    let repo: Option<Repository> = project.and_then(|p| field(&p.meta.spec, "repository"));
    let Some(repo) = repo else {
        return Ok(Some(Err(
            "the run has a workspace, and its project no repository (spec.repository)".into(),
        )));
    };
    let branch = match &ws.branch {
        Some(b) if r.attempt == 1 => b.clone(),
        Some(b) => format!("{b}-a{}", r.attempt),
        None => format!("pam/{}/{}-a{}", task.name, r.name, r.attempt),
    };
    let mut git_ref = ws.git_ref.clone().unwrap_or(repo.default_ref);
    let (mut previous_branch, mut previous_base, mut previous_patch) = (None, None, None);
    if r.attempt > 1 {
        // The previous attempt's result, when it got as far as one (a
        // fetch that failed left none: start as attempt 1 did).
        let prev = tx.run_results(r.id, Some(r.attempt - 1)).await?.pop();
        if let Some(prev) = prev {
            match ws.from_attempt {
                // The same commit, not the ref again: the ref may have
                // moved since attempt 1.
                FromAttempt::Fresh => git_ref = prev.base_commit,
                FromAttempt::Previous => {
                    git_ref = prev.head_commit;
                    previous_branch = Some(prev.branch);
                    // For a host other than the one that ran it.
                    previous_base = Some(prev.base_commit);
                    previous_patch = (!prev.patch_truncated).then_some(prev.patch);
                }
            }
        }
    }
    let order = WorkspaceOrder {
        url: repo.url,
        git_ref,
        branch,
        previous_branch,
        previous_base,
        previous_patch,
        auto_commit: ws.auto_commit,
        run: r.name.clone(),
        push: ws.push,
        keep: ws.keep,
        credentials: None,
    };
    Ok(Some(Ok((order, repo.secret_ref))))
}
