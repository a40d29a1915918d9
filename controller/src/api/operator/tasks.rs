//! `/api/v1/projects/{p}/tasks` and `/api/v1/tasks`: list, get, delete, and
//! the status verbs (`pamctl task start|done|cancel|reopen`, the board's
//! drag).

use std::collections::HashMap;

use async_trait::async_trait;
use axum::extract::State;
use chrono::{DateTime, Utc};
use pam_manifests::state::WorkItemStatus;
use pam_store::prelude::*;
use pam_store::{Project, WorkItem};
use serde::Deserialize;
use serde_json::{json, Value};
use uuid::Uuid;

use crate::api::access::auth::Operator;
use crate::api::extract::{Json, Path};
use crate::api::operator::list::{selected, to_json, ListQuery};
use crate::api::operator::served::{one_in, scoped, At, Served};
use crate::api::{operator::lookup, operator::objects, ApiError, AppState};
use crate::rules::work_items;

type ApiResult<T> = Result<T, ApiError>;

#[async_trait]
impl Served for WorkItem {
    /// Parents' names and completion come from the whole project's list,
    /// read once (see [`Served::listed`]).
    async fn listed(
        tx: &mut dyn Tx,
        p: Option<&Project>,
        q: &ListQuery,
        _now: DateTime<Utc>,
    ) -> ApiResult<Vec<Value>> {
        let sel = q.selector()?;
        let p = scoped(p)?;
        let items = tx.list_work_items(p.id).await?;
        let names: HashMap<Uuid, &str> = items.iter().map(|w| (w.id, w.name.as_str())).collect();
        let completion = objects::completions(&items);
        let ids: Vec<Uuid> = items.iter().map(|w| w.id).collect();
        let deps = lookup::task_deps(tx, &ids).await?;
        // One roll-up query for the project's tasks.
        let usage: HashMap<Uuid, _> = tx.usage_by_work_item(&ids).await?.into_iter().collect();
        Ok(items
            .iter()
            .filter(|w| selected(&sel, &w.meta.labels))
            .map(|w| {
                let parent = w.parent_id.and_then(|id| names.get(&id).copied());
                to_json(&objects::task(
                    w,
                    &p.slug,
                    parent,
                    completion.get(&w.id).copied(),
                    deps.get(&w.id),
                    usage.get(&w.id),
                ))
            })
            .collect())
    }

    async fn print(tx: &mut dyn Tx, at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        let p = at.project;
        let p = scoped(p)?;
        let mut out = Vec::with_capacity(items.len());
        for w in items {
            out.push(task_object(tx, p, w).await?);
        }
        Ok(out)
    }
}

/// One task with its parent's name and its subtree's completion (reads
/// the subtree only, not the project).
async fn task_object(tx: &mut dyn Tx, p: &Project, w: &WorkItem) -> ApiResult<Value> {
    let parent = match w.parent_id {
        Some(id) => tx.get_work_item(id).await?.map(|p| p.name),
        None => None,
    };
    let subtree = tx.subtree(w.id).await?;
    let completion = objects::completions(&subtree).get(&w.id).copied();
    let deps = lookup::task_deps(tx, &[w.id]).await?;
    let usage = tx.usage_by_work_item(&[w.id]).await?;
    Ok(to_json(&objects::task(
        w,
        &p.slug,
        parent.as_deref(),
        completion,
        deps.get(&w.id),
        usage.first().map(|(_, u)| u),
    )))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransitionBody {
    to: WorkItemStatus,
    #[serde(default)]
    dry_run: bool,
}

/// `pamctl task start|done|cancel|reopen`, the dashboard's drag: the same
/// gate as apply ([`work_items::set_status`]).
#[tracing::instrument(skip_all, fields(project = %slug, task = %name))]
pub async fn transition_task(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Json(body): Json<TransitionBody>,
) -> ApiResult<Json<Value>> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let (p, w) = one_in::<WorkItem>(tx.as_mut(), &slug, &name).await?;
    let Some((moved, cascade)) =
        work_items::set_status(tx.as_mut(), &w, body.to, &p.slug, now).await?
    else {
        return Ok(Json(
            json!({ "task": task_object(tx.as_mut(), &p, &w).await?, "cascade": [], "changed": false }),
        ));
    };
    let obj = task_object(tx.as_mut(), &p, &moved).await?;
    if !body.dry_run {
        st.ctx.commit(tx).await?;
        // Dependents' runs may be unblocked, blocked again or fail:
        // the next loop pass now rather than at the resync
        // (latency only; the periodic pass is what makes it correct).
        st.ctx.wakeups.loops.notify_one();
    }
    Ok(Json(
        json!({ "task": obj, "cascade": cascade, "changed": true, "dryRun": body.dry_run }),
    ))
}
