use super::named::{Named, PgQuery, Table};
use super::*;
use crate::Schedule;

fn schedule_cols() -> String {
    format!("id, project_id, name, {META_COLS}, last_schedule_time, created_at, updated_at")
}

fn schedule_from_row(row: &PgRow) -> StoreResult<Schedule> {
    Ok(Schedule {
        id: get(row, "id")?,
        project_id: get(row, "project_id")?,
        name: get(row, "name")?,
        meta: meta_from_row(row)?,
        last_schedule_time: get(row, "last_schedule_time")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

#[async_trait]
impl ScheduleTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_all_schedules(&mut self) -> StoreResult<Vec<Schedule>> {
        let sql = format!("SELECT {} FROM schedules ORDER BY id", schedule_cols());
        self.rows(sqlx::query(&sql), schedule_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn take_tick(
        &mut self,
        id: Uuid,
        expected: Option<DateTime<Utc>>,
        tick: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Schedule> {
        let sql = format!(
            "UPDATE schedules SET last_schedule_time = $3, updated_at = $4, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND last_schedule_time IS NOT DISTINCT FROM $2 RETURNING {}",
            schedule_cols()
        );
        let q = sqlx::query(&sql)
            .bind(id)
            .bind(expected)
            .bind(tick)
            .bind(now);
        let why = || format!("schedule {id}: another pass took a tick after {expected:?}");
        self.guarded_update(q, ("schedules", id), why, schedule_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_schedule_run(
        &mut self,
        schedule_id: Uuid,
        scheduled_at: DateTime<Utc>,
        run_id: Uuid,
    ) -> StoreResult<()> {
        let q = sqlx::query(
            "INSERT INTO schedule_runs (schedule_id, scheduled_at, run_id) VALUES ($1, $2, $3)",
        )
        .bind(schedule_id)
        .bind(scheduled_at)
        .bind(run_id);
        self.insert_guarded(q).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn schedule_runs(&mut self, schedule_id: Uuid) -> StoreResult<Vec<(DateTime<Utc>, Run)>> {
        let sql = format!(
            "SELECT sr.scheduled_at, {} FROM schedule_runs sr JOIN runs ON runs.id = sr.run_id \
             WHERE sr.schedule_id = $1 ORDER BY sr.scheduled_at",
            qualified("runs", &run_cols())
        );
        let rows = sqlx::query(&sql)
            .bind(schedule_id)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|row| Ok((get(row, "scheduled_at")?, run_from_row(row)?)))
            .collect()
    }
}

impl Named for Schedule {
    const TABLE: &'static str = "schedules";
    fn cols() -> String {
        schedule_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        schedule_from_row(row)
    }
}

/// `last_schedule_time` is inserted, and then written only by
/// [`ScheduleTx::take_tick`].
impl Table for Schedule {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q.bind(self.id).bind(self.project_id).bind(&self.name);
        bind_meta!(q, self.meta)
            .bind(self.last_schedule_time)
            .bind(self.created_at)
            .bind(self.updated_at)
    }
}
