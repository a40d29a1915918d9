use super::*;

#[async_trait]
impl WorkItemTx for MemTx {
    async fn insert_work_item(&mut self, w: &WorkItem) -> StoreResult<WorkItem> {
        let s = &mut self.work;
        let path = match w.parent_id {
            None => short_id(w.id),
            Some(parent) => {
                let p = s.work_items.get(&parent).ok_or_else(|| {
                    StoreError::Invalid(format!("parent work item {parent} does not exist"))
                })?;
                if p.project_id != w.project_id {
                    return Err(StoreError::Invalid(format!(
                        "parent work item {parent} is in another project"
                    )));
                }
                format!("{}/{}", p.path, short_id(w.id))
            }
        };
        if s.work_items.contains_key(&w.id) {
            return Err(StoreError::AlreadyExists("work_items_pkey".into()));
        }
        if !s.projects.contains_key(&w.project_id) {
            return Err(StoreError::NotFound(format!(
                "referenced row (project {})",
                w.project_id
            )));
        }
        if s.work_items
            .values()
            .any(|o| o.project_id == w.project_id && o.name == w.name)
        {
            return Err(StoreError::AlreadyExists("work_items_project_name".into()));
        }
        let mut stored = w.clone();
        stored.path = path;
        s.work_items.insert(w.id, stored.clone());
        Ok(stored)
    }

    async fn get_work_item(&mut self, id: Uuid) -> StoreResult<Option<WorkItem>> {
        Ok(self.work.by_id(id))
    }

    async fn get_work_item_by_name(
        &mut self,
        project_id: Uuid,
        name: &str,
    ) -> StoreResult<Option<WorkItem>> {
        Ok(self.work.named(project_id, name))
    }

    async fn list_work_items(&mut self, project_id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let items = self
            .work
            .work_items
            .values()
            .filter(|w| w.project_id == project_id)
            .cloned()
            .collect();
        Ok(self.work.work_items_sorted(items))
    }

    async fn work_items_with_ancestors(
        &mut self,
        project_id: Uuid,
        names: &[String],
    ) -> StoreResult<Vec<WorkItem>> {
        let s = &self.work;
        let mut found: HashMap<Uuid, &WorkItem> = HashMap::new();
        let mut up: Vec<&WorkItem> = s
            .work_items
            .values()
            .filter(|w| w.project_id == project_id && names.contains(&w.name))
            .collect();
        while let Some(w) = up.pop() {
            if found.insert(w.id, w).is_none() {
                up.extend(w.parent_id.and_then(|p| s.work_items.get(&p)));
            }
        }
        let items = found.into_values().cloned().collect();
        Ok(s.work_items_sorted(items))
    }

    async fn work_items_named(&mut self, names: &[String]) -> StoreResult<Vec<WorkItem>> {
        let mut items: Vec<WorkItem> = self
            .work
            .work_items
            .values()
            .filter(|w| names.contains(&w.name))
            .cloned()
            .collect();
        items.sort_by(|a, b| (&a.name, a.project_id).cmp(&(&b.name, b.project_id)));
        Ok(items)
    }

    async fn subtree(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let root = self
            .work
            .work_items
            .get(&id)
            .ok_or_else(|| not_found("work item", id))?;
        let prefix = format!("{}/", root.path);
        let items = self
            .work
            .work_items
            .values()
            .filter(|w| {
                w.project_id == root.project_id
                    && (w.path == root.path || w.path.starts_with(&prefix))
            })
            .cloned()
            .collect();
        Ok(self.work.work_items_sorted(items))
    }

    async fn subtree_recursive(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>> {
        if !self.work.work_items.contains_key(&id) {
            return Err(not_found("work item", id));
        }
        let ids = self.work.descendants(id);
        let items = ids
            .iter()
            .map(|i| self.work.work_items[i].clone())
            .collect();
        Ok(self.work.work_items_sorted(items))
    }

    async fn update_work_item(&mut self, w: &WorkItem, expected_rv: i64) -> StoreResult<WorkItem> {
        self.work
            .update_named(w, expected_rv, |cur: &mut WorkItem, w| {
                cur.title = w.title.clone();
                cur.description = w.description.clone();
                cur.assignee = w.assignee.clone();
                cur.sort_order = w.sort_order;
                Ok(())
            })
    }

    async fn set_work_item_status(
        &mut self,
        id: Uuid,
        from: WorkItemStatus,
        to: WorkItemStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem> {
        transition(from, to)?;
        self.work.set_named_status(
            id,
            |w: &mut WorkItem| &mut w.status,
            (from, to),
            now,
            "work item",
        )
    }

    async fn reparent_work_item(
        &mut self,
        id: Uuid,
        new_parent: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem> {
        let s = &mut self.work;
        let item = s
            .work_items
            .get(&id)
            .ok_or_else(|| not_found("work item", id))?;
        let (project, old_path) = (item.project_id, item.path.clone());
        let new_path = match new_parent {
            None => short_id(id),
            Some(parent) => {
                if parent == id {
                    return Err(StoreError::Invalid(format!(
                        "work item {id} cannot be its own parent"
                    )));
                }
                let p = s.work_items.get(&parent).ok_or_else(|| {
                    StoreError::Invalid(format!("parent work item {parent} does not exist"))
                })?;
                if p.project_id != project {
                    return Err(StoreError::Invalid(format!(
                        "parent work item {parent} is in another project"
                    )));
                }
                // OQ-6: the new parent must not be a descendant.
                if s.descendants(id).contains(&parent) {
                    return Err(StoreError::Invalid(format!(
                        "work item {parent} is a descendant of {id}: moving would make a cycle"
                    )));
                }
                format!("{}/{}", p.path, short_id(id))
            }
        };
        let prefix = format!("{old_path}/");
        for w in s.work_items.values_mut() {
            if w.project_id == project && (w.path == old_path || w.path.starts_with(&prefix)) {
                w.path = format!("{new_path}{}", &w.path[old_path.len()..]);
            }
        }
        let item = s.work_items.get_mut(&id).expect("checked above");
        item.parent_id = new_parent;
        item.updated_at = now;
        item.meta.resource_version += 1;
        Ok(item.clone())
    }

    async fn delete_work_item(&mut self, id: Uuid) -> StoreResult<bool> {
        if !self.work.work_items.contains_key(&id) {
            return Ok(false);
        }
        let ids = self.work.descendants(id);
        self.work.remove_work_items(&ids);
        Ok(true)
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(
    WorkItem,
    work_items,
    "work_items",
    "work_items_project_id_name_key",
    name,
    |x| Some(x.project_id)
);
