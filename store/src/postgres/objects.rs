use super::*;
use crate::objects::Object;

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
