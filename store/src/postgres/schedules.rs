use super::*;
use crate::Schedule;

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
