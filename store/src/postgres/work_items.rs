use super::*;

impl PgTx {
    /// The path of item `id` under `parent`, which must exist and be in
    /// `project` (a parent is never in another project).
    async fn child_path(&mut self, parent: Uuid, project: Uuid, id: Uuid) -> StoreResult<String> {
        let row = sqlx::query("SELECT project_id, path FROM work_items WHERE id = $1")
            .bind(parent)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?
            .ok_or_else(|| {
                StoreError::Invalid(format!("parent work item {parent} does not exist"))
            })?;
        let parent_project: Uuid = get(&row, "project_id")?;
        if parent_project != project {
            return Err(StoreError::Invalid(format!(
                "parent work item {parent} is in another project"
            )));
        }
        let parent_path: String = get(&row, "path")?;
        Ok(format!("{parent_path}/{}", short_id(id)))
    }
}

#[async_trait]
impl WorkItemTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_work_item(&mut self, w: &WorkItem) -> StoreResult<WorkItem> {
        let path = match w.parent_id {
            None => short_id(w.id),
            Some(parent) => self.child_path(parent, w.project_id, w.id).await?,
        };
        let sql = format!(
            "INSERT INTO work_items ({cols}) VALUES \
             ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20) \
             RETURNING {cols}",
            cols = work_item_cols()
        );
        let q = sqlx::query(&sql)
            .bind(w.id)
            .bind(w.project_id)
            .bind(w.parent_id)
            .bind(&w.name)
            .bind(w.kind.as_str())
            .bind(&w.title)
            .bind(&w.description)
            .bind(w.status.as_str())
            .bind(&w.assignee)
            .bind(&path)
            .bind(w.sort_order);
        let q = bind_meta!(q, w.meta).bind(w.created_at).bind(w.updated_at);
        self.savepoint().await?;
        let r = q.fetch_one(self.conn()).await;
        let row = self.end_savepoint(r).await?;
        work_item_from_row(&row)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_work_items(&mut self, items: Vec<WorkItem>) -> StoreResult<Vec<WorkItem>> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        // Paths: a parent earlier in the batch, else one lookup for every
        // stored parent.
        let in_batch: HashSet<Uuid> = items.iter().map(|w| w.id).collect();
        let stored: Vec<Uuid> = items
            .iter()
            .filter_map(|w| w.parent_id)
            .filter(|p| !in_batch.contains(p))
            .collect();
        let mut known: HashMap<Uuid, (Uuid, String)> = HashMap::new();
        if !stored.is_empty() {
            let rows =
                sqlx::query("SELECT id, project_id, path FROM work_items WHERE id = ANY($1)")
                    .bind(&stored)
                    .fetch_all(self.conn())
                    .await
                    .map_err(db_err)?;
            for row in rows {
                known.insert(
                    get(&row, "id")?,
                    (get(&row, "project_id")?, get(&row, "path")?),
                );
            }
        }
        let mut paths = Vec::with_capacity(items.len());
        for w in &items {
            let path = match w.parent_id {
                None => short_id(w.id),
                Some(parent) => {
                    let (project, parent_path) = known.get(&parent).ok_or_else(|| {
                        StoreError::Invalid(format!("parent work item {parent} does not exist"))
                    })?;
                    if *project != w.project_id {
                        return Err(StoreError::Invalid(format!(
                            "parent work item {parent} is in another project"
                        )));
                    }
                    format!("{parent_path}/{}", short_id(w.id))
                }
            };
            known.insert(w.id, (w.project_id, path.clone()));
            paths.push(path);
        }
        // One COPY FROM STDIN: no per-row round trip, and the cheapest
        // write PostgreSQL offers (text format, built here).
        let mut data = String::with_capacity(items.len() * 512);
        for (w, path) in items.iter().zip(&paths) {
            copy_work_item_row(&mut data, w, path);
        }
        self.savepoint().await?;
        let result = self
            .copy_in(
                &format!("COPY work_items ({}) FROM STDIN", work_item_cols()),
                data.as_bytes(),
            )
            .await;
        self.end_savepoint(result).await?;
        // Every column was written from `items` (no database defaults), so
        // the stored rows are the input with its computed paths (and
        // PostgreSQL's microsecond timestamps): no RETURNING to decode.
        use chrono::SubsecRound;
        Ok(items
            .into_iter()
            .zip(paths)
            .map(|(w, path)| WorkItem {
                path,
                created_at: w.created_at.trunc_subsecs(6),
                updated_at: w.updated_at.trunc_subsecs(6),
                ..w
            })
            .collect())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_work_item(&mut self, id: Uuid) -> StoreResult<Option<WorkItem>> {
        self.named_by_id(id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_work_item_by_name(
        &mut self,
        project_id: Uuid,
        name: &str,
    ) -> StoreResult<Option<WorkItem>> {
        self.named(project_id, name).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_work_items(&mut self, project_id: Uuid) -> StoreResult<Vec<WorkItem>> {
        self.all_named(project_id).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(names = names.len()))]
    async fn work_items_with_ancestors(
        &mut self,
        project_id: Uuid,
        names: &[String],
    ) -> StoreResult<Vec<WorkItem>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        // The walk goes up parent_id (one primary-key lookup per step) on
        // (id, parent_id) pairs only, so UNION drops shared ancestors
        // cheaply; the rows are read once at the end. Parents are in the
        // item's project (insert and reparent refuse others).
        let sql = format!(
            "WITH RECURSIVE chain (id, parent_id) AS ( \
                 SELECT id, parent_id FROM work_items WHERE project_id = $1 AND name = ANY($2) \
                 UNION \
                 SELECT w.id, w.parent_id FROM work_items w INNER JOIN chain c ON w.id = c.parent_id \
             ) SELECT {} FROM work_items WHERE id IN (SELECT id FROM chain) \
             ORDER BY path COLLATE \"C\", sort_order, id",
            work_item_cols()
        );
        self.rows(
            sqlx::query(&sql).bind(project_id).bind(names),
            work_item_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(names = names.len()))]
    async fn work_items_named(&mut self, names: &[String]) -> StoreResult<Vec<WorkItem>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        // One (project_id, name) index lookup per project, where `name =
        // ANY` alone scans every item (no index leads with name). The
        // LIMIT (a project holds each name once, so it cuts nothing) keeps
        // the planner from flattening the lateral into a hash join over a
        // scan of work_items.
        let sql = format!(
            "SELECT {} FROM projects p CROSS JOIN LATERAL ( \
                 SELECT * FROM work_items x WHERE x.project_id = p.id AND x.name = ANY($1) \
                 LIMIT $2 \
             ) w ORDER BY w.name COLLATE \"C\", w.project_id",
            qualified("w", &work_item_cols())
        );
        self.rows(
            sqlx::query(&sql).bind(names).bind(names.len() as i64),
            work_item_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn subtree(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let root = self
            .get_work_item(id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("work item {id}")))?;
        // project_id too: path short ids are not identities, and two roots
        // in different projects may share one.
        let sql = format!(
            "SELECT {} FROM work_items \
             WHERE project_id = $2 AND (path = $1 OR path LIKE $1 || '/%') \
             ORDER BY path COLLATE \"C\", sort_order, id",
            work_item_cols()
        );
        self.rows(
            sqlx::query(&sql).bind(&root.path).bind(root.project_id),
            work_item_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn subtree_recursive(&mut self, id: Uuid) -> StoreResult<Vec<WorkItem>> {
        let cols = work_item_cols();
        let sql = format!(
            "WITH RECURSIVE subtree AS ( \
                 SELECT {cols} FROM work_items WHERE id = $1 \
                 UNION ALL \
                 SELECT {wcols} FROM work_items w INNER JOIN subtree s ON w.parent_id = s.id \
             ) SELECT {cols} FROM subtree ORDER BY path COLLATE \"C\", sort_order, id",
            wcols = qualified("w", &cols)
        );
        let rows = sqlx::query(&sql)
            .bind(id)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        if rows.is_empty() {
            return Err(StoreError::NotFound(format!("work item {id}")));
        }
        all(rows, work_item_from_row)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_work_item(&mut self, w: &WorkItem, expected_rv: i64) -> StoreResult<WorkItem> {
        let cols = ["title", "description", "assignee", "sort_order"];
        self.update_named(
            (w.id, expected_rv),
            (&w.meta, w.updated_at),
            (&cols, |q| {
                q.bind(w.title.clone())
                    .bind(w.description.clone())
                    .bind(w.assignee.clone())
                    .bind(w.sort_order)
            }),
            format!("work item {}", w.id),
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_work_item_status(
        &mut self,
        id: Uuid,
        from: WorkItemStatus,
        to: WorkItemStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem> {
        transition(from, to)?;
        self.set_named_status((id, from.as_str(), to.as_str()), now, "work item")
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn reparent_work_item(
        &mut self,
        id: Uuid,
        new_parent: Option<Uuid>,
        now: DateTime<Utc>,
    ) -> StoreResult<WorkItem> {
        let row = sqlx::query("SELECT project_id, path FROM work_items WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?
            .ok_or_else(|| StoreError::NotFound(format!("work item {id}")))?;
        let project: Uuid = get(&row, "project_id")?;
        let old_path: String = get(&row, "path")?;
        let new_path = match new_parent {
            None => short_id(id),
            Some(parent) => {
                if parent == id {
                    return Err(StoreError::Invalid(format!(
                        "work item {id} cannot be its own parent"
                    )));
                }
                let path = self.child_path(parent, project, id).await?;
                // OQ-6: the new parent must not be a descendant. Walk its
                // ancestors by live parent links (paths are not identities).
                let cycle: bool = sqlx::query_scalar(
                    "WITH RECURSIVE anc AS ( \
                         SELECT id, parent_id FROM work_items WHERE id = $1 \
                         UNION \
                         SELECT w.id, w.parent_id FROM work_items w \
                         INNER JOIN anc a ON w.id = a.parent_id \
                     ) SELECT EXISTS (SELECT 1 FROM anc WHERE id = $2)",
                )
                .bind(parent)
                .bind(id)
                .fetch_one(self.conn())
                .await
                .map_err(db_err)?;
                if cycle {
                    return Err(StoreError::Invalid(format!(
                        "work item {parent} is a descendant of {id}: moving would make a cycle"
                    )));
                }
                path
            }
        };
        // The subtree is located by the OLD prefix, then rewritten at once.
        let q = sqlx::query(
            "UPDATE work_items SET path = $1 || substr(path, length($2) + 1) \
             WHERE project_id = $3 AND (path = $2 OR path LIKE $2 || '/%')",
        )
        .bind(&new_path)
        .bind(&old_path)
        .bind(project);
        self.exec(q).await?;
        let sql = format!(
            "UPDATE work_items SET parent_id = $2, updated_at = $3, \
             resource_version = resource_version + 1 WHERE id = $1 RETURNING {}",
            work_item_cols()
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(new_parent)
            .bind(now)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)?;
        work_item_from_row(&row)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_work_item(&mut self, id: Uuid) -> StoreResult<bool> {
        self.delete_named::<WorkItem>(id).await
    }
}
