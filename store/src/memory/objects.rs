use super::named::Table;
use super::*;
use crate::objects::Object;

#[async_trait]
impl ObjectTx for MemTx {
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
}

impl Table for Object {
    fn copy_own(&mut self, from: &Self) {
        self.status = from.status.clone();
    }
}

// Its generic reads and key checks (named.rs); the name is unique in
// its scope, (kind, project).
super::named::named!(
    Object,
    objects,
    "objects",
    "objects_kind_project_id_name_key",
    name,
    |o| o.project_id
);
