use super::named::{Named, PgQuery, Table};
use super::*;
use crate::objects::Object;

fn object_cols() -> String {
    format!("id, kind, project_id, name, {META_COLS}, status, created_at, updated_at")
}

fn object_from_row(row: &PgRow) -> StoreResult<Object> {
    Ok(Object {
        id: get(row, "id")?,
        kind: get(row, "kind")?,
        project_id: get(row, "project_id")?,
        name: get(row, "name")?,
        meta: meta_from_row(row)?,
        status: get(row, "status")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

impl Named for Object {
    const TABLE: &'static str = "objects";
    fn cols() -> String {
        object_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        object_from_row(row)
    }
}

impl Table for Object {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q
            .bind(self.id)
            .bind(&self.kind)
            .bind(self.project_id)
            .bind(&self.name);
        self.bind_own(bind_meta!(q, self.meta))
            .bind(self.created_at)
            .bind(self.updated_at)
    }
    const OWN: &'static [&'static str] = &["status"];
    fn bind_own<'q>(&self, q: PgQuery<'q>) -> PgQuery<'q> {
        q.bind(self.status.clone())
    }
}

#[async_trait]
impl ObjectTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn objects_in_project(&mut self, project: Uuid) -> StoreResult<Vec<Object>> {
        let sql = format!(
            "SELECT {} FROM objects WHERE project_id = $1 \
             ORDER BY kind COLLATE \"C\", name COLLATE \"C\"",
            object_cols()
        );
        self.rows(sqlx::query(&sql).bind(project), object_from_row)
            .await
    }
}
