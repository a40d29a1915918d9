//! Work-item rules (tasks of every type): create, update (reparent, desired
//! status, fields), the status transitions of the verbs and the board, and
//! delete.
//!
//! # Rules (pam-data-model.txt, "Work Item Status")
//! - Every status change passes the gate ([`pam_manifests::state`]).
//! - Cancelling cascades `cancelled` to every non-done descendant (done
//!   ones keep their history); their specs are left as they are.
//! - A parent never auto-completes.
//! - A reparent rewrites the subtree's paths in the same transaction and
//!   journals `work_item.reparented` once, for the moved item. Parents stay
//!   in the item's project and never below the item itself (OQ-6).
//! - `spec.status` is the desired status: apply moves the stored status
//!   only when the declared one changed (so a status moved by a verb or a
//!   cascade is not reverted by re-applying an unchanged manifest); a verb
//!   records its target as the desired status (a spec change, so a new
//!   generation).

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{self, Kind};
use pam_manifests::state::{self as sm, WorkItemKind, WorkItemStatus};
use pam_store::prelude::*;
use pam_store::{StoreError, StoreResult, WorkItem};
use serde_json::{json, Value};
use uuid::Uuid;

use super::meta::{self, Change, Desired};
use super::{check_immutable, RuleError, RuleResult};
use crate::events::{payload, topic};

/// A task as declared, its parent resolved to an id.
#[derive(Debug, Clone)]
pub struct TaskDesired {
    pub name: String,
    pub kind: WorkItemKind,
    pub title: String,
    pub description: String,
    pub status: WorkItemStatus,
    pub assignee: Option<String>,
    pub sort_order: i32,
    pub parent_id: Option<Uuid>,
    pub desired: Desired,
}

impl TaskDesired {
    pub fn of(t: &kinds::Task, parent_id: Option<Uuid>, desired: Desired) -> TaskDesired {
        TaskDesired {
            name: t.metadata.name.to_string(),
            kind: t.spec.type_,
            title: t.spec.title.clone(),
            description: t.spec.description.clone(),
            status: t.spec.status,
            assignee: t.spec.assignee.clone(),
            sort_order: t.spec.sort_order,
            parent_id,
            desired,
        }
    }
}

/// A new work item's row (not written yet: [`create_many`] writes rows in
/// bulk). `[*] → todo → X` is legal for every X, so a new item may be born
/// in its desired status. The store computes `path`. `conditions`:
/// [`meta::created_conditions`] of `now`, built once per batch.
pub fn new_row(
    project_id: Uuid,
    d: TaskDesired,
    conditions: &Value,
    now: DateTime<Utc>,
) -> WorkItem {
    WorkItem {
        id: Uuid::new_v4(),
        project_id,
        parent_id: d.parent_id,
        name: d.name,
        kind: d.kind,
        title: d.title,
        description: d.description,
        status: d.status,
        assignee: d.assignee,
        path: String::new(),
        sort_order: d.sort_order,
        meta: meta::new_meta_with(d.desired, conditions.clone()),
        created_at: now,
        updated_at: now,
    }
}

/// Writes new work items (each parent stored already or earlier in
/// `rows`) with one bulk insert, and their `work_item.created` events with
/// one bulk append. `rows` pairs each row with its project's slug.
pub async fn create_many(
    tx: &mut dyn Tx,
    rows: Vec<WorkItem>,
    slugs: &[String],
    now: DateTime<Utc>,
) -> StoreResult<Vec<WorkItem>> {
    let stored = tx.insert_work_items(rows).await?;
    let events = stored
        .iter()
        .zip(slugs)
        .map(|(w, slug)| (topic::WORK_ITEM_CREATED, payload::work_item(w, slug)))
        .collect();
    tx.append_events(events, now).await?;
    Ok(stored)
}

fn desired_status(spec: &Value) -> Option<WorkItemStatus> {
    spec.get("status")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
}

/// Updates a stored item to its declared state: refuses a changed
/// immutable field (its type); reparents first (it rewrites paths), then
/// moves the status when the declared status changed, then writes the
/// fields and the desired state, journaling `work_item.updated`. The same
/// desired state writes nothing.
pub async fn update(
    tx: &mut dyn Tx,
    row: WorkItem,
    d: TaskDesired,
    project_slug: &str,
    now: DateTime<Utc>,
) -> RuleResult<(WorkItem, Change)> {
    check_immutable(
        Kind::Task,
        &row.meta.spec,
        &d.desired.spec,
        &format!(
            "is immutable (stored: {}); delete and recreate the task to change it",
            row.kind
        ),
    )?;
    if Desired::stored(&row.meta) == d.desired {
        return Ok((row, Change::Unchanged));
    }
    let mut row = row;
    let old_desired = desired_status(&row.meta.spec);
    if row.parent_id != d.parent_id {
        row = reparent(tx, &row, d.parent_id, project_slug, now).await?;
    }
    if old_desired != Some(d.status) && row.status != d.status {
        sm::transition(row.status, d.status)
            .map_err(|e| RuleError::field("spec.status", e.to_string()))?;
        row = transition(tx, &row, d.status, project_slug, now).await?.0;
    }
    let rv = row.meta.resource_version;
    let change = meta::set_desired(&mut row.meta, d.desired, now);
    row.title = d.title;
    row.description = d.description;
    row.assignee = d.assignee;
    row.sort_order = d.sort_order;
    let row = tx.update_work_item(&row, rv).await?;
    tx.append_event(
        topic::WORK_ITEM_UPDATED,
        payload::work_item(&row, project_slug),
        now,
    )
    .await?;
    Ok((row, change))
}

/// Moves `item` under `parent` (or to the root): paths of the subtree
/// rewritten, `work_item.reparented` journaled once. A parent in another
/// project, the item itself or one of its descendants is refused at
/// `spec.parent`.
async fn reparent(
    tx: &mut dyn Tx,
    item: &WorkItem,
    parent: Option<Uuid>,
    project_slug: &str,
    now: DateTime<Utc>,
) -> RuleResult<WorkItem> {
    let moved = tx
        .reparent_work_item(item.id, parent, now)
        .await
        .map_err(|e| match e {
            StoreError::Invalid(msg) => RuleError::field("spec.parent", msg),
            e => e.into(),
        })?;
    let mut p = payload::work_item(&moved, project_slug);
    p["old_parent_id"] = json!(item.parent_id);
    p["old_path"] = json!(item.path);
    tx.append_event(topic::WORK_ITEM_REPARENTED, p, now).await?;
    Ok(moved)
}

/// Moves the stored status of `item` to `to` through the gate; cancelling
/// cascades `cancelled` to its non-done descendants. Journals
/// `work_item.status_changed` for each item moved. Returns the item and
/// the names of the descendants cancelled with it. Specs are not touched
/// (a cascade does not change what operators declared).
pub async fn transition(
    tx: &mut dyn Tx,
    item: &WorkItem,
    to: WorkItemStatus,
    project_slug: &str,
    now: DateTime<Utc>,
) -> StoreResult<(WorkItem, Vec<String>)> {
    let from = item.status;
    let moved = tx.set_work_item_status(item.id, from, to, now).await?;
    let mut p = payload::work_item(&moved, project_slug);
    p["from"] = json!(from.as_str());
    tx.append_event(topic::WORK_ITEM_STATUS_CHANGED, p, now)
        .await?;
    let mut cascaded = Vec::new();
    if to == WorkItemStatus::Cancelled {
        for child in tx.subtree(item.id).await? {
            if child.id == item.id
                || matches!(
                    child.status,
                    WorkItemStatus::Done | WorkItemStatus::Cancelled
                )
            {
                continue;
            }
            let c = tx
                .set_work_item_status(child.id, child.status, WorkItemStatus::Cancelled, now)
                .await?;
            let mut p = payload::work_item(&c, project_slug);
            p["from"] = json!(child.status.as_str());
            p["cascade_from"] = json!(item.id);
            tx.append_event(topic::WORK_ITEM_STATUS_CHANGED, p, now)
                .await?;
            cascaded.push(c.name);
        }
    }
    Ok((moved, cascaded))
}

/// The verbs (`pamctl task start|done|cancel|reopen`) and the board's drag:
/// moves the status through the gate (cascading a cancel) and records `to`
/// as the desired status — a spec change, so a new generation. An item
/// already in `to` is returned unchanged (`None`).
pub async fn set_status(
    tx: &mut dyn Tx,
    item: &WorkItem,
    to: WorkItemStatus,
    project_slug: &str,
    now: DateTime<Utc>,
) -> StoreResult<Option<(WorkItem, Vec<String>)>> {
    if item.status == to {
        return Ok(None);
    }
    sm::transition(item.status, to)?;
    let (mut moved, cascade) = transition(tx, item, to, project_slug, now).await?;
    let rv = moved.meta.resource_version;
    let d = Desired::stored(&moved.meta).with_spec_field("status", json!(to.as_str()));
    if meta::set_desired(&mut moved.meta, d, now).changed() {
        moved = tx.update_work_item(&moved, rv).await?;
    }
    Ok(Some((moved, cascade)))
}

/// Deletes an item with (by cascade) its subtree and their runs; journals
/// `work_item.deleted` for it.
pub async fn delete(
    tx: &mut dyn Tx,
    item: &WorkItem,
    project_slug: &str,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let gone = tx.delete_work_item(item.id).await?;
    if gone {
        tx.append_event(
            topic::WORK_ITEM_DELETED,
            payload::work_item(item, project_slug),
            now,
        )
        .await?;
    }
    Ok(gone)
}
