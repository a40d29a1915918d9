use super::*;
use crate::objects::Object;

impl State {
    /// The objects of `kind` in `project`, by name (byte order, as
    /// PostgreSQL's `COLLATE "C"`).
    fn objects_of(&self, kind: &str, project: Option<Uuid>) -> Vec<Object> {
        let mut v: Vec<Object> = self
            .objects
            .values()
            .filter(|o| o.kind == kind && o.project_id == project)
            .cloned()
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }
}

#[async_trait]
impl ObjectTx for MemTx {
    async fn insert_object(&mut self, o: &Object) -> StoreResult<()> {
        let st = &mut self.work;
        if let Some(p) = o.project_id {
            if !st.projects.contains_key(&p) {
                return Err(StoreError::NotFound(format!(
                    "referenced row (objects_project_id_fkey {p})"
                )));
            }
        }
        if st.objects.contains_key(&o.id) {
            return Err(StoreError::AlreadyExists("objects_pkey".into()));
        }
        let taken = st
            .objects
            .values()
            .any(|x| x.kind == o.kind && x.project_id == o.project_id && x.name == o.name);
        if taken {
            return Err(StoreError::AlreadyExists(
                "objects_kind_project_id_name_key".into(),
            ));
        }
        st.objects.insert(o.id, o.clone());
        Ok(())
    }

    async fn get_object(&mut self, id: Uuid) -> StoreResult<Option<Object>> {
        Ok(self.work.by_id(id))
    }

    async fn get_object_by_name(
        &mut self,
        kind: &str,
        project: Option<Uuid>,
        name: &str,
    ) -> StoreResult<Option<Object>> {
        Ok(self
            .work
            .objects
            .values()
            .find(|o| o.kind == kind && o.project_id == project && o.name == name)
            .cloned())
    }

    async fn list_objects(
        &mut self,
        kind: &str,
        project: Option<Uuid>,
    ) -> StoreResult<Vec<Object>> {
        Ok(self.work.objects_of(kind, project))
    }

    async fn objects_in_project(&mut self, project: Uuid) -> StoreResult<Vec<Object>> {
        let mut v: Vec<Object> = self
            .work
            .objects
            .values()
            .filter(|o| o.project_id == Some(project))
            .cloned()
            .collect();
        v.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
        Ok(v)
    }

    async fn update_object(&mut self, o: &Object, expected_rv: i64) -> StoreResult<Object> {
        let what = format!("{} {}", o.kind.to_ascii_lowercase(), o.name);
        self.work.update_named(o, expected_rv, what, |cur, new| {
            cur.status = new.status.clone();
            Ok(())
        })
    }

    async fn delete_object(&mut self, id: Uuid) -> StoreResult<bool> {
        Ok(self.work.objects.remove(&id).is_some())
    }
}

// Its generic by-id read and guarded update (named.rs); the name key is
// (kind, scope, name), checked above.
super::named::named!(
    Object,
    objects,
    "objects",
    "objects_kind_project_id_name_key",
    name,
    |o| o.project_id
);
