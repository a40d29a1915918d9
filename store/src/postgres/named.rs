//! What every table of named objects shares (written once, not
//! once per kind): the [`NamedTx`] calls of every kind with a table of its
//! own, and the reads, writes and delete the other named kinds (tasks,
//! runs) use too.

use super::*;
use crate::{NamedKind, NamedTx};

/// A statement with its binds, as `sqlx::query` builds it.
pub(super) type PgQuery<'q> = sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments>;

/// A table of named objects and how its rows map to records.
pub(super) trait Named: NamedKind<Scope: PgScope> + Sized + Send {
    const TABLE: &'static str;
    /// The column that holds the name (`slug` for projects).
    const NAME: &'static str = "name";
    /// A listing's order (byte order, as the memory store sorts).
    const ORDER: &'static str = "name COLLATE \"C\"";
    /// The columns [`Named::from_row`] reads.
    fn cols() -> String;
    fn from_row(row: &PgRow) -> StoreResult<Self>;
}

/// How a [`NamedKind::Scope`] picks its rows.
pub(super) trait PgScope {
    /// The condition on the rows of the scope, its binds numbered from
    /// `$1`.
    const SQL: &'static str;
    /// How many binds [`PgScope::SQL`] takes.
    const BINDS: usize;
    fn bind(self, q: PgQuery<'_>) -> PgQuery<'_>;
}

/// A cluster-wide kind: every row.
impl PgScope for () {
    const SQL: &'static str = "TRUE";
    const BINDS: usize = 0;
    fn bind(self, q: PgQuery<'_>) -> PgQuery<'_> {
        q
    }
}

/// A project-scoped kind: the project's rows.
impl PgScope for Uuid {
    const SQL: &'static str = "project_id = $1";
    const BINDS: usize = 1;
    fn bind(self, q: PgQuery<'_>) -> PgQuery<'_> {
        q.bind(self)
    }
}

/// A generically stored kind (`objects`): its rows in the project (`None`:
/// the cluster), compared in the form the unique index
/// `objects_kind_project_id_name_key` is built on, so lookups use it.
impl PgScope for (String, Option<Uuid>) {
    const SQL: &'static str = "kind = $1 AND \
        COALESCE(project_id, '00000000-0000-0000-0000-000000000000'::uuid) \
        = COALESCE($2::uuid, '00000000-0000-0000-0000-000000000000'::uuid)";
    const BINDS: usize = 2;
    fn bind(self, q: PgQuery<'_>) -> PgQuery<'_> {
        q.bind(self.0).bind(self.1)
    }
}

/// A kind whose calls are all [`NamedTx`]'s: what its insert and update
/// write beyond what every named row has.
pub(super) trait Table: Named + Sync {
    /// The columns an insert writes: all of them, unless the table's
    /// defaults fill some.
    fn insert_cols() -> String {
        Self::cols()
    }
    /// Binds [`Table::insert_cols`], in order.
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q>;
    /// The kind's own columns an update writes besides the metadata
    /// ([`PgTx::update_named`]).
    const OWN: &'static [&'static str] = &[];
    /// Binds [`Table::OWN`], in order.
    fn bind_own<'q>(&self, q: PgQuery<'q>) -> PgQuery<'q> {
        q
    }
}

#[async_trait]
impl<K: Table> NamedTx<K> for PgTx {
    #[tracing::instrument(level = "debug", skip_all, fields(table = K::TABLE))]
    async fn named_insert(&mut self, x: &K) -> StoreResult<()> {
        let cols = K::insert_cols();
        let values: Vec<String> = (1..=cols.split(',').count())
            .map(|i| format!("${i}"))
            .collect();
        let sql = format!(
            "INSERT INTO {} ({cols}) VALUES ({})",
            K::TABLE,
            values.join(",")
        );
        self.insert_guarded(x.bind_insert(sqlx::query(&sql))).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = K::TABLE))]
    async fn named_get(&mut self, id: Uuid) -> StoreResult<Option<K>> {
        self.named_by_id(id).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = K::TABLE))]
    async fn named_by_name(&mut self, scope: K::Scope, name: &str) -> StoreResult<Option<K>> {
        self.named(scope, name).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = K::TABLE))]
    async fn named_list(&mut self, scope: K::Scope) -> StoreResult<Vec<K>> {
        self.all_named(scope).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = K::TABLE))]
    async fn named_update(&mut self, x: &K, expected_rv: i64) -> StoreResult<K> {
        self.update_named(
            (x.id(), expected_rv),
            (x.meta(), x.updated_at()),
            (K::OWN, |q| x.bind_own(q)),
            x.what(),
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(table = K::TABLE))]
    async fn named_delete(&mut self, id: Uuid) -> StoreResult<bool> {
        self.delete_named::<K>(id).await
    }
}

impl PgTx {
    /// The row with this id.
    pub(super) async fn named_by_id<T: Named>(&mut self, id: Uuid) -> StoreResult<Option<T>> {
        let sql = format!("SELECT {} FROM {} WHERE id = $1", T::cols(), T::TABLE);
        self.row(sqlx::query(&sql).bind(id), T::from_row).await
    }

    /// The row named `name` in `scope`.
    pub(super) async fn named<T: Named>(
        &mut self,
        scope: T::Scope,
        name: &str,
    ) -> StoreResult<Option<T>> {
        let sql = format!(
            "SELECT {} FROM {} WHERE {} AND {} = ${}",
            T::cols(),
            T::TABLE,
            T::Scope::SQL,
            T::NAME,
            T::Scope::BINDS + 1
        );
        let q = scope.bind(sqlx::query(&sql)).bind(name);
        self.row(q, T::from_row).await
    }

    /// Every row of `scope` in [`Named::ORDER`].
    pub(super) async fn all_named<T: Named>(&mut self, scope: T::Scope) -> StoreResult<Vec<T>> {
        let sql = format!(
            "SELECT {} FROM {} WHERE {} ORDER BY {}",
            T::cols(),
            T::TABLE,
            T::Scope::SQL,
            T::ORDER
        );
        self.rows(scope.bind(sqlx::query(&sql)), T::from_row).await
    }

    /// Deletes the row with this id; whether there was one. Under a
    /// savepoint: a row still referenced is `Invalid` (the constraint
    /// only in the debug log), and the transaction stays usable.
    pub(super) async fn delete_named<T: Named>(&mut self, id: Uuid) -> StoreResult<bool> {
        let sql = format!("DELETE FROM {} WHERE id = $1", T::TABLE);
        self.savepoint().await?;
        match sqlx::query(&sql).bind(id).execute(self.conn()).await {
            Ok(r) => Ok(self.end_savepoint(Ok(r)).await?.rows_affected() == 1),
            Err(e) => {
                self.undo_savepoint().await?;
                Err(db_err_delete(e))
            }
        }
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
