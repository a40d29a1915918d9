//! The work-item aggregate: [`WorkItem`] rows (tasks of every type) and the
//! [`WorkItemTx`] calls, including the materialized-path rules.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::{WorkItemKind, WorkItemStatus};
use uuid::Uuid;

use crate::{Meta, StoreResult};

#[derive(Debug, Clone, PartialEq)]
pub struct WorkItem {
    pub id: Uuid,
    pub project_id: Uuid,
    pub parent_id: Option<Uuid>,
    /// Operator name, unique per project.
    pub name: String,
    pub kind: WorkItemKind,
    pub title: String,
    pub description: String,
    pub status: WorkItemStatus,
    pub assignee: Option<String>,
    /// Materialized path `<root short>/…/<own short>`; computed by the store.
    pub path: String,
    pub sort_order: i32,
    pub meta: Meta,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Work items (`work_items`): tasks of every type and their hierarchy. Part of every [`crate::Tx`].
#[async_trait]
pub trait WorkItemTx: Send {
    /// Inserts a work item, computing `path` from its parent
    /// (`<parent path>/<short id>`, or `<short id>` at the root). The parent
    /// must exist and be in the same project ([`StoreError::Invalid`]); a
    /// missing project is [`StoreError::NotFound`]. The given `path` is
    /// ignored. Returns the stored item.
    async fn insert_work_item(&mut self, w: &WorkItem) -> StoreResult<WorkItem>;
    /// Inserts many work items at once (apply's bulk path); same checks
    /// and path computation as [`Tx::insert_work_item`]. Each item's parent
    /// is stored already or earlier in `items`. Returns the stored rows in
    /// input order. After an error, rows of the batch may remain in the
    /// transaction: callers roll back (apply does).
    async fn insert_work_items(&mut self, items: Vec<WorkItem>) -> StoreResult<Vec<WorkItem>> {
        let mut out = Vec::with_capacity(items.len());
        for w in &items {
            out.push(self.insert_work_item(w).await?);
        }
        Ok(out)
    }
    async fn get_work_item(&mut self, id: Uuid) -> StoreResult<Option<WorkItem>>;
    async fn get_work_item_by_name(
        &mut self,
        project_id: Uuid,
        name: &str,
    ) -> StoreResult<Option<WorkItem>>;
    /// A project's items ordered by path, then sort_order.
    async fn list_work_items(&mut self, project_id: Uuid) -> StoreResult<Vec<WorkItem>>;
    /// The items of `project_id` whose names are in `names`, together with
    /// every ancestor of each (by live parent links), each once, ordered
    /// like [`WorkItemTx::list_work_items`]. Names that are not stored are
    /// left out. The result is closed under "parent of": apply validates
    /// parent chains (OQ-6, same project) from it without reading the
    /// whole project, so its cost follows the batch, not the project.
    async fn work_items_with_ancestors(
        &mut self,
        project_id: Uuid,
        names: &[String],
    ) -> StoreResult<Vec<WorkItem>>;
    /// The items whose names are in `names`, in every project, ordered by
    /// name, then project_id. Apply reads it only on the way to an error,
    /// to name the project a parent or task that is missing from its own
    /// project lives in.
    async fn work_items_named(&mut self, names: &[String]) -> StoreResult<Vec<WorkItem>>;
    /// The item and its descendants, by path prefix
    /// (`path = $p OR path LIKE $p || '/%'`, within the item's project:
    /// short ids are not identities), ordered by path (byte order),
    /// sort_order. An unknown id is NotFound.
    async fn subtree(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>>;
    /// The same set through live parent links (recursive CTE), same order.
    async fn subtree_recursive(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>>;
    /// Writes title, description, assignee, sort_order, meta (except
    /// resource_version) and updated_at where `resource_version =
    /// expected_rv`, bumping it. Never changes kind, status, parent or path.
    async fn update_work_item(&mut self, w: &WorkItem, expected_rv: i64) -> StoreResult<WorkItem>;
    /// Guarded status write: passes the gate (`from → to`), then updates
    /// only `WHERE status = from`, bumping resource_version.
    async fn set_work_item_status(
        &mut self,
        id: Uuid,
        from: WorkItemStatus,
        to: WorkItemStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem>;
    /// Moves an item under `new_parent` (or to the root), rewriting the
    /// path of the item and every descendant in this transaction (located by
    /// the old path prefix). Refuses a parent in another project, the item
    /// itself, or one of its descendants (a cycle, OQ-6) with
    /// [`StoreError::Invalid`]. Bumps the item's resource_version.
    async fn reparent_work_item(
        &mut self,
        id: Uuid,
        new_parent: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem>;
    /// Deletes an item and (cascade) its descendants and their runs.
    async fn delete_work_item(&mut self, id: Uuid) -> StoreResult<bool>;
}

crate::named::row!(WorkItem);

impl crate::NamedKind for WorkItem {
    type Scope = Uuid;
    const NOUN: &'static str = "work item";
    fn scope(&self) -> Uuid {
        self.project_id
    }
}
