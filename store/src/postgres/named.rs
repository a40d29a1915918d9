//! The reads and the delete that every table of named objects shares
//! (issue 29: written once, not once per kind): by id, by name in its
//! scope, all of a scope in name order, delete by id.

use super::*;

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
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(T::from_row).transpose()
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
}
