//! The reads and the delete that every table of named objects shares
//! (issue 29: written once, not once per kind): by id, by name in its
//! scope, all of a scope in name order, delete by id.

use super::*;

/// A statement with its binds, as `sqlx::query` builds it.
pub(super) type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

/// A table of named objects and how its rows map to records.
pub(super) trait Named: Sized + Send {
    const TABLE: &'static str;
    /// The column names are unique within: `project_id` for project-scoped
    /// kinds, none for cluster-wide ones.
    const SCOPE: Option<&'static str>;
    /// The column that holds the name (`slug` for projects).
    const NAME: &'static str = "name";
    /// A listing's order (byte order, as the memory store sorts).
    const ORDER: &'static str = "name COLLATE \"C\"";
    /// The columns [`Named::from_row`] reads.
    fn cols() -> String;
    fn from_row(row: &PgRow) -> StoreResult<Self>;
}

impl PgTx {
    /// The row with this id.
    pub(super) async fn named_by_id<T: Named>(&mut self, id: Uuid) -> StoreResult<Option<T>> {
        let sql = format!("SELECT {} FROM {} WHERE id = $1", T::cols(), T::TABLE);
        self.row(sqlx::query(&sql).bind(id), T::from_row).await
    }

    /// The row named `name` (in `scope`, for a project-scoped kind).
    pub(super) async fn named<T: Named>(
        &mut self,
        scope: Option<Uuid>,
        name: &str,
    ) -> StoreResult<Option<T>> {
        let (cols, table, name_col) = (T::cols(), T::TABLE, T::NAME);
        let row = match (T::SCOPE, scope) {
            (Some(col), Some(id)) => {
                let sql =
                    format!("SELECT {cols} FROM {table} WHERE {col} = $1 AND {name_col} = $2");
                sqlx::query(&sql)
                    .bind(id)
                    .bind(name)
                    .fetch_optional(self.conn())
                    .await
            }
            _ => {
                let sql = format!("SELECT {cols} FROM {table} WHERE {name_col} = $1");
                sqlx::query(&sql)
                    .bind(name)
                    .fetch_optional(self.conn())
                    .await
            }
        }
        .map_err(db_err)?;
        row.as_ref().map(T::from_row).transpose()
    }

    /// Every row (of `scope`, for a project-scoped kind) in
    /// [`Named::ORDER`].
    pub(super) async fn all_named<T: Named>(&mut self, scope: Option<Uuid>) -> StoreResult<Vec<T>> {
        let (cols, table, order) = (T::cols(), T::TABLE, T::ORDER);
        let rows = match (T::SCOPE, scope) {
            (Some(col), Some(id)) => {
                let sql = format!("SELECT {cols} FROM {table} WHERE {col} = $1 ORDER BY {order}");
                sqlx::query(&sql).bind(id).fetch_all(self.conn()).await
            }
            _ => {
                let sql = format!("SELECT {cols} FROM {table} ORDER BY {order}");
                sqlx::query(&sql).fetch_all(self.conn()).await
            }
        }
        .map_err(db_err)?;
        all(rows, T::from_row)
    }

    /// Deletes the row with this id; whether there was one. A row still
    /// referenced is `Invalid` naming the constraint.
    pub(super) async fn delete_named<T: Named>(&mut self, id: Uuid) -> StoreResult<bool> {
        let sql = format!("DELETE FROM {} WHERE id = $1", T::TABLE);
        let r = sqlx::query(&sql)
            .bind(id)
            .execute(self.conn())
            .await
            .map_err(db_err_delete)?;
        Ok(r.rows_affected() == 1)
    }

    /// Runs an insert under a savepoint, so a failed one (a taken key, a
    /// missing reference) leaves the transaction usable.
    pub(super) async fn insert_guarded(&mut self, q: PgQuery<'_>) -> StoreResult<()> {
        self.savepoint().await?;
        let r = q.execute(self.conn()).await;
        self.end_savepoint(r).await.map(|_| ())
    }

    /// Runs a guarded `UPDATE … RETURNING` of the row `id` of `table`: the
    /// row as written, mapped; when its guard matched nothing, a `Conflict`
    /// saying `why` (the row is there) or `NotFound` (it is gone).
    pub(super) async fn guarded_update<T>(
        &mut self,
        q: PgQuery<'_>,
        (table, id): (&str, Uuid),
        why: impl FnOnce() -> String + Send,
        from_row: fn(&PgRow) -> StoreResult<T>,
    ) -> StoreResult<T> {
        let row = q.fetch_optional(self.conn()).await.map_err(db_err)?;
        match row {
            Some(row) => from_row(&row),
            None => Err(self.zero_rows(table, id, why()).await),
        }
    }

    /// The status write of a kind with a state machine (after the gate):
    /// `UPDATE … WHERE status = $from`; a `Conflict` saying the object
    /// (`what`, e.g. `host`) is not in `from` when another write moved it.
    pub(super) async fn set_named_status<T: Named>(
        &mut self,
        (id, from, to): (Uuid, &str, &str),
        now: DateTime<Utc>,
        what: &str,
    ) -> StoreResult<T> {
        let sql = format!(
            "UPDATE {} SET status = $3, updated_at = $4, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND status = $2 RETURNING {}",
            T::TABLE,
            T::cols()
        );
        let q = sqlx::query(&sql).bind(id).bind(from).bind(to).bind(now);
        let why = || format!("{what} {id} is not {from}");
        self.guarded_update(q, (T::TABLE, id), why, T::from_row)
            .await
    }

    /// The guarded write of an object at `expected_rv` every named kind
    /// shares: its meta columns (spec, labels, annotations, generations,
    /// conditions) and `updated_at`, and the kind's own `extra` columns,
    /// which `bind` binds in order. The row as written; a `Conflict`
    /// naming `what` when another write moved it first, `NotFound` when it
    /// is gone.
    pub(super) async fn update_named<T: Named>(
        &mut self,
        (id, expected_rv): (Uuid, i64),
        (meta, updated_at): (&Meta, DateTime<Utc>),
        (extra, bind): (
            &[&str],
            impl for<'q> FnOnce(PgQuery<'q>) -> PgQuery<'q> + Send,
        ),
        what: String,
    ) -> StoreResult<T> {
        let extra: String = extra
            .iter()
            .enumerate()
            .map(|(i, col)| format!("{col} = ${}, ", i + 10))
            .collect();
        let sql = format!(
            "UPDATE {} SET spec = $3, labels = $4, annotations = $5, generation = $6, \
             observed_generation = $7, conditions = $8, updated_at = $9, {extra}\
             resource_version = resource_version + 1 \
             WHERE id = $1 AND resource_version = $2 RETURNING {}",
            T::TABLE,
            T::cols()
        );
        let q = sqlx::query(&sql)
            .bind(id)
            .bind(expected_rv)
            .bind(&meta.spec)
            .bind(labels_to_json(&meta.labels))
            .bind(labels_to_json(&meta.annotations))
            .bind(meta.generation)
            .bind(meta.observed_generation)
            .bind(&meta.conditions)
            .bind(updated_at);
        let why = || format!("{what} is not at resource version {expected_rv}");
        self.guarded_update(bind(q), (T::TABLE, id), why, T::from_row)
            .await
    }
}
