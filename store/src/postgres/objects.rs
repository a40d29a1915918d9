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

// By id, update and delete are the generic ones (named.rs); reads by
// name and listings add the kind to the scope, so they are written here.
impl super::named::Named for Object {
    const TABLE: &'static str = "objects";
    const SCOPE: Option<&'static str> = Some("project_id");
    fn cols() -> String {
        object_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        object_from_row(row)
    }
}

/// `project_id` is `$2` (NULL: cluster scope), in the form the unique
/// index `objects_kind_project_id_name_key` is built on, so the lookup by
/// name uses it.
const SCOPE: &str = "COALESCE(project_id, '00000000-0000-0000-0000-000000000000'::uuid) \
     = COALESCE($2::uuid, '00000000-0000-0000-0000-000000000000'::uuid)";

#[async_trait]
impl ObjectTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_object(&mut self, o: &Object) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO objects ({}) \
             VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)",
            object_cols()
        );
        let q = sqlx::query(&sql)
            .bind(o.id)
            .bind(&o.kind)
            .bind(o.project_id)
            .bind(&o.name);
        let q = bind_meta!(q, o.meta)
            .bind(&o.status)
            .bind(o.created_at)
            .bind(o.updated_at);
        self.insert_guarded(q).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_object(&mut self, id: Uuid) -> StoreResult<Option<Object>> {
        self.named_by_id(id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_object_by_name(
        &mut self,
        kind: &str,
        project: Option<Uuid>,
        name: &str,
    ) -> StoreResult<Option<Object>> {
        let sql = format!(
            "SELECT {} FROM objects WHERE kind = $1 AND {SCOPE} AND name = $3",
            object_cols()
        );
        let q = sqlx::query(&sql).bind(kind).bind(project).bind(name);
        self.row(q, object_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_objects(
        &mut self,
        kind: &str,
        project: Option<Uuid>,
    ) -> StoreResult<Vec<Object>> {
        let sql = format!(
            "SELECT {} FROM objects WHERE kind = $1 AND {SCOPE} ORDER BY name COLLATE \"C\"",
            object_cols()
        );
        let q = sqlx::query(&sql).bind(kind).bind(project);
        self.rows(q, object_from_row).await
    }

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

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_object(&mut self, o: &Object, expected_rv: i64) -> StoreResult<Object> {
        let status = o.status.clone();
        self.update_named(
            (o.id, expected_rv),
            (&o.meta, o.updated_at),
            (&["status"], move |q| q.bind(status)),
            format!("{} {}", o.kind.to_ascii_lowercase(), o.name),
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_object(&mut self, id: Uuid) -> StoreResult<bool> {
        self.delete_named::<Object>(id).await
    }
}
