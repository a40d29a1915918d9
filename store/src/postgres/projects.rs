use super::*;

#[async_trait]
impl ProjectTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_project(&mut self, p: &Project) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO projects ({}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14)",
            project_cols()
        );
        let q = sqlx::query(&sql)
            .bind(p.id)
            .bind(&p.name)
            .bind(&p.slug)
            .bind(&p.description)
            .bind(p.status.as_str());
        let q = bind_meta!(q, p.meta).bind(p.created_at).bind(p.updated_at);
        self.savepoint().await?;
        let r = q.execute(self.conn()).await;
        self.end_savepoint(r).await.map(|_| ())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_project(&mut self, id: Uuid) -> StoreResult<Option<Project>> {
        self.named_by_id(id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_project_by_slug(&mut self, slug: &str) -> StoreResult<Option<Project>> {
        self.named(None, slug).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_projects(&mut self) -> StoreResult<Vec<Project>> {
        self.all_named(None).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_project(&mut self, p: &Project, expected_rv: i64) -> StoreResult<Project> {
        let sql = format!(
            "UPDATE projects SET name = $3, description = $4, status = $5, spec = $6, \
             labels = $7, annotations = $8, generation = $9, observed_generation = $10, \
             conditions = $11, updated_at = $12, resource_version = resource_version + 1 \
             WHERE id = $1 AND resource_version = $2 RETURNING {}",
            project_cols()
        );
        let row = sqlx::query(&sql)
            .bind(p.id)
            .bind(expected_rv)
            .bind(&p.name)
            .bind(&p.description)
            .bind(p.status.as_str())
            .bind(&p.meta.spec)
            .bind(labels_to_json(&p.meta.labels))
            .bind(labels_to_json(&p.meta.annotations))
            .bind(p.meta.generation)
            .bind(p.meta.observed_generation)
            .bind(&p.meta.conditions)
            .bind(p.updated_at)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => project_from_row(&row),
            None => Err(self
                .zero_rows(
                    "projects",
                    p.id,
                    format!("project {} is not at resource version {expected_rv}", p.id),
                )
                .await),
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_project(&mut self, id: Uuid) -> StoreResult<bool> {
        self.delete_named::<Project>(id).await
    }
}

impl super::named::Named for Project {
    const TABLE: &'static str = "projects";
    const SCOPE: Option<&'static str> = None;
    const NAME: &'static str = "slug";
    const ORDER: &'static str = "slug COLLATE \"C\"";
    fn cols() -> String {
        project_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        project_from_row(row)
    }
}
