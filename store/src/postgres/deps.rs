use super::*;
use crate::{DependencyLink, Gated};

/// The one "blocked" predicate on PostgreSQL: the task
/// `task_expr` has a dependency that is not done. An index probe on
/// `work_item_deps`' primary key per row it is asked about.
pub(super) fn blocked_sql(task_expr: &str) -> String {
    format!(
        "EXISTS (SELECT 1 FROM work_item_deps dd JOIN work_items dw ON dw.id = dd.depends_on_id \
         WHERE dd.task_id = {task_expr} AND dw.status <> 'done')"
    )
}

fn link_from_row(row: &PgRow) -> StoreResult<DependencyLink> {
    Ok(DependencyLink {
        task_id: get(row, "link_task_id")?,
        other: work_item_from_row(row)?,
    })
}

impl PgTx {
    /// Links joined to the work item at `other_end`, for `task_end` in ids.
    async fn links(
        &mut self,
        task_end: &str,
        other_end: &str,
        ids: &[Uuid],
    ) -> StoreResult<Vec<DependencyLink>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT d.{task_end} AS link_task_id, {} FROM work_item_deps d \
             JOIN work_items w ON w.id = d.{other_end} WHERE d.{task_end} = ANY($1) \
             ORDER BY d.{task_end}, w.name COLLATE \"C\"",
            qualified("w", &work_item_cols())
        );
        self.rows(sqlx::query(&sql).bind(ids), link_from_row).await
    }

    async fn gate_update(&mut self, sql: &str, now: DateTime<Utc>) -> StoreResult<Vec<Run>> {
        let q = sqlx::query(sql).bind(now);
        let mut runs = self.rows(q, run_from_row).await?;
        runs.sort_by_key(|r| r.id);
        Ok(runs)
    }
}

#[async_trait]
impl DependencyTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_dependencies(&mut self, task_id: Uuid, on: &[Uuid]) -> StoreResult<()> {
        if on.contains(&task_id) {
            return Err(StoreError::Invalid(format!(
                "task {task_id} depends on itself"
            )));
        }
        let project: Option<Uuid> =
            sqlx::query_scalar("SELECT project_id FROM work_items WHERE id = $1")
                .bind(task_id)
                .fetch_optional(self.conn())
                .await
                .map_err(db_err)?;
        let Some(project) = project else {
            return Err(StoreError::NotFound(format!("work_items {task_id}")));
        };
        let found: Vec<(Uuid, Uuid)> =
            sqlx::query_as("SELECT id, project_id FROM work_items WHERE id = ANY($1)")
                .bind(on)
                .fetch_all(self.conn())
                .await
                .map_err(db_err)?;
        for id in on {
            match found.iter().find(|(i, _)| i == id) {
                None => return Err(StoreError::NotFound(format!("work_items {id}"))),
                Some((_, p)) if *p != project => {
                    return Err(StoreError::Invalid(format!(
                        "task {id} is not in the project of task {task_id}"
                    )))
                }
                Some(_) => {}
            }
        }
        let q = sqlx::query("DELETE FROM work_item_deps WHERE task_id = $1").bind(task_id);
        self.exec(q).await?;
        let ords: Vec<i32> = (0..on.len() as i32).collect();
        let q = sqlx::query(
            "INSERT INTO work_item_deps (task_id, depends_on_id, project_id, ord) \
             SELECT $1, d, $2, o FROM unnest($3::uuid[], $4::int[]) AS u(d, o) \
             ON CONFLICT DO NOTHING",
        )
        .bind(task_id)
        .bind(project)
        .bind(on)
        .bind(&ords);
        self.exec(q).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn dependencies_of(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>> {
        self.links("task_id", "depends_on_id", task_ids).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn dependents_of(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>> {
        self.links("depends_on_id", "task_id", task_ids).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn dependency_closure(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>> {
        if task_ids.is_empty() {
            return Ok(Vec::new());
        }
        // UNION (not ALL) stops at links already reached, so a cycle
        // (refused by validation, but data is data) terminates.
        let sql = format!(
            "WITH RECURSIVE reach(task_id, depends_on_id) AS ( \
                 SELECT task_id, depends_on_id FROM work_item_deps WHERE task_id = ANY($1) \
                 UNION \
                 SELECT d.task_id, d.depends_on_id FROM work_item_deps d \
                 JOIN reach r ON d.task_id = r.depends_on_id \
             ) SELECT r.task_id AS link_task_id, {} FROM reach r \
             JOIN work_items w ON w.id = r.depends_on_id \
             ORDER BY r.task_id, w.name COLLATE \"C\"",
            qualified("w", &work_item_cols())
        );
        self.rows(sqlx::query(&sql).bind(task_ids), link_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn refresh_dispatchable(&mut self, now: DateTime<Utc>) -> StoreResult<Gated> {
        // Each statement reads one partial index (runs_blocked,
        // runs_dispatchable) and probes the links of each row it reads.
        let unblock = format!(
            "UPDATE runs SET dispatchable_since = $1, updated_at = $1, \
             resource_version = resource_version + 1 \
             WHERE status = 'pending' AND dispatchable_since IS NULL AND NOT {} RETURNING {}",
            blocked_sql("runs.task_id"),
            run_cols()
        );
        let unblocked = self.gate_update(&unblock, now).await?;
        let reblock = format!(
            "UPDATE runs SET dispatchable_since = NULL, updated_at = $1, \
             resource_version = resource_version + 1 \
             WHERE status = 'pending' AND dispatchable_since IS NOT NULL AND {} RETURNING {}",
            blocked_sql("runs.task_id"),
            run_cols()
        );
        let blocked = self.gate_update(&reblock, now).await?;
        Ok(Gated { unblocked, blocked })
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn runs_waiting_on_cancelled(&mut self, limit: i64) -> StoreResult<Vec<(Run, WorkItem)>> {
        let pairs: Vec<(Uuid, Uuid)> = sqlx::query_as(
            "SELECT DISTINCT ON (r.id) r.id, w.id FROM runs r \
             JOIN work_item_deps d ON d.task_id = r.task_id \
             JOIN work_items w ON w.id = d.depends_on_id \
             WHERE r.status = 'pending' AND r.dispatchable_since IS NULL \
               AND w.status = 'cancelled' \
             ORDER BY r.id, w.name COLLATE \"C\" LIMIT $1",
        )
        .bind(limit)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        if pairs.is_empty() {
            return Ok(Vec::new());
        }
        let run_ids: Vec<Uuid> = pairs.iter().map(|p| p.0).collect();
        let item_ids: Vec<Uuid> = pairs.iter().map(|p| p.1).collect();
        let runs: HashMap<Uuid, Run> = self.by_ids(&run_ids, |r: &Run| r.id).await?;
        let items: HashMap<Uuid, WorkItem> = self.by_ids(&item_ids, |w: &WorkItem| w.id).await?;
        Ok(pairs
            .into_iter()
            .filter_map(|(r, w)| Some((runs.get(&r)?.clone(), items.get(&w)?.clone())))
            .collect())
    }
}

impl PgTx {
    /// The rows of `T` with these ids, by id (`id` reads a row's).
    async fn by_ids<T: super::named::Named>(
        &mut self,
        ids: &[Uuid],
        id: fn(&T) -> Uuid,
    ) -> StoreResult<HashMap<Uuid, T>> {
        let sql = format!("SELECT {} FROM {} WHERE id = ANY($1)", T::cols(), T::TABLE);
        let rows = self.rows(sqlx::query(&sql).bind(ids), T::from_row).await?;
        Ok(rows.into_iter().map(|x| (id(&x), x)).collect())
    }
}
