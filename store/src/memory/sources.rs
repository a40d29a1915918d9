use super::named::Table;
use super::*;

fn object_order(o: &SourceObject) -> (String, Option<String>, String) {
    (o.kind.clone(), o.project.clone(), o.name.clone())
}

#[async_trait]
impl SourceTx for MemTx {
    async fn write_source_status(
        &mut self,
        s: &Source,
        clear_request: bool,
    ) -> StoreResult<Source> {
        let row = self.work.named_mut::<Source>(s.id)?;
        let requested = row.status.sync_requested_at;
        row.status = s.status.clone();
        row.status.sync_requested_at = match (clear_request, requested, s.status.sync_requested_at)
        {
            (true, Some(r), Some(seen)) if r <= seen => None,
            _ => requested,
        };
        row.meta.conditions = s.meta.conditions.clone();
        row.meta.observed_generation = s.meta.observed_generation;
        row.meta.resource_version += 1;
        row.updated_at = s.updated_at;
        Ok(row.clone())
    }

    async fn request_source_sync(&mut self, id: Uuid, at: DateTime<Utc>) -> StoreResult<Source> {
        let row = self.work.named_mut::<Source>(id)?;
        row.status.sync_requested_at = Some(at);
        row.meta.resource_version += 1;
        Ok(row.clone())
    }

    async fn list_source_objects(&mut self, source_id: Uuid) -> StoreResult<Vec<SourceObject>> {
        let mut v: Vec<SourceObject> = self
            .work
            .source_objects
            .values()
            .filter(|o| o.source_id == source_id)
            .cloned()
            .collect();
        v.sort_by_key(object_order);
        Ok(v)
    }

    async fn count_source_objects(
        &mut self,
        source_ids: &[Uuid],
    ) -> StoreResult<std::collections::HashMap<Uuid, u64>> {
        let mut counts = std::collections::HashMap::new();
        for o in self
            .work
            .source_objects
            .values()
            .filter(|o| source_ids.contains(&o.source_id))
        {
            *counts.entry(o.source_id).or_insert(0) += 1;
        }
        Ok(counts)
    }

    async fn owners_of(&mut self, objects: &[(String, Uuid)]) -> StoreResult<Vec<SourceObject>> {
        Ok(objects
            .iter()
            .filter_map(|k| self.work.source_objects.get(k).cloned())
            .collect())
    }

    async fn put_source_objects(&mut self, rows: &[SourceObject]) -> StoreResult<u64> {
        let st = &mut self.work;
        let mut n = 0;
        for r in rows {
            if !st.sources.contains_key(&r.source_id) {
                return Err(StoreError::NotFound(format!(
                    "referenced row (source {})",
                    r.source_id
                )));
            }
            if !["Project", "Task", "Run"].contains(&r.kind.as_str()) {
                return Err(StoreError::Invalid(
                    "check source_objects_kind_check failed".into(),
                ));
            }
            let key = (r.kind.clone(), r.object_id);
            match st.source_objects.get(&key) {
                Some(o) if o.source_id != r.source_id => {}
                _ => {
                    st.source_objects.insert(key, r.clone());
                    n += 1;
                }
            }
        }
        Ok(n)
    }

    async fn delete_source_objects(
        &mut self,
        source_id: Uuid,
        objects: &[(String, Uuid)],
    ) -> StoreResult<()> {
        for k in objects {
            if self
                .work
                .source_objects
                .get(k)
                .is_some_and(|o| o.source_id == source_id)
            {
                self.work.source_objects.remove(k);
            }
        }
        Ok(())
    }

    async fn owned_objects(&mut self, source_id: Uuid) -> StoreResult<Vec<OwnedObject>> {
        let owned = self.list_source_objects(source_id).await?;
        let st = &self.work;
        Ok(owned
            .into_iter()
            .map(|owner| {
                let (meta, run_status, task_status) = match owner.kind.as_str() {
                    "Project" => (
                        st.projects.get(&owner.object_id).map(|p| p.meta.clone()),
                        None,
                        None,
                    ),
                    "Task" => match st.work_items.get(&owner.object_id) {
                        Some(w) => (Some(w.meta.clone()), None, Some(w.status)),
                        None => (None, None, None),
                    },
                    _ => match st.runs.get(&owner.object_id) {
                        Some(r) => (Some(r.meta.clone()), Some(r.status), None),
                        None => (None, None, None),
                    },
                };
                OwnedObject {
                    owner,
                    meta,
                    run_status,
                    task_status,
                }
            })
            .collect())
    }

    async fn owned_runs(
        &mut self,
        source_id: Uuid,
    ) -> StoreResult<Vec<(String, pam_manifests::state::RunStatus)>> {
        let owned = self.list_source_objects(source_id).await?;
        let runs = &self.work.runs;
        Ok(owned
            .into_iter()
            .filter(|o| o.kind == pam_manifests::Kind::Run.as_str())
            .filter_map(|o| Some((o.name, runs.get(&o.object_id)?.status)))
            .collect())
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(Source, sources, "sources", "sources_name_key", name, |_s| {
    None
});

impl Table for Source {
    /// Its status is the sync loop's: a new Source starts from the
    /// table's defaults.
    fn inserted(&self) -> Self {
        let mut row = self.clone();
        row.status = SourceStatus {
            errors: serde_json::json!([]),
            drift: serde_json::json!([]),
            departed: serde_json::json!([]),
            ..SourceStatus::default()
        };
        row
    }
    /// Its inventory goes with it (not the objects).
    fn on_delete(s: &mut State, id: Uuid) -> StoreResult<()> {
        s.source_objects.retain(|_, o| o.source_id != id);
        Ok(())
    }
}
