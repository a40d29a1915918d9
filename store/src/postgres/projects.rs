use super::*;

#[async_trait]
impl ProjectTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_project(&mut self, p: &Project) -> StoreResult<()> {
        let sql = insert_sql::<Project>();
        let q = sqlx::query(&sql)
            .bind(p.id)
            .bind(&p.name)
            .bind(&p.slug)
            .bind(&p.description)
            .bind(p.status.as_str());
        let q = bind_meta!(q, p.meta).bind(p.created_at).bind(p.updated_at);
        self.insert_guarded(q).await
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
        self.update_named(
            (p.id, expected_rv),
            (&p.meta, p.updated_at),
            (&["name", "description", "status"], |q| {
                q.bind(p.name.clone())
                    .bind(p.description.clone())
                    .bind(p.status.as_str())
            }),
            format!("project {}", p.id),
        )
        .await
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
