use super::named::Table;
use super::*;
use crate::Schedule;

#[async_trait]
impl ScheduleTx for MemTx {
    async fn list_all_schedules(&mut self) -> StoreResult<Vec<Schedule>> {
        let mut v: Vec<Schedule> = self.work.schedules.values().cloned().collect();
        v.sort_by_key(|x| x.id);
        Ok(v)
    }

    async fn take_tick(
        &mut self,
        id: Uuid,
        expected: Option<DateTime<Utc>>,
        tick: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Schedule> {
        let cur = self.work.named_mut::<Schedule>(id)?;
        if cur.last_schedule_time != expected {
            return Err(conflict(format!(
                "schedule {id}: another pass took a tick after {expected:?}"
            )));
        }
        cur.last_schedule_time = Some(tick);
        cur.meta.resource_version += 1;
        cur.updated_at = now;
        Ok(cur.clone())
    }

    async fn insert_schedule_run(
        &mut self,
        schedule_id: Uuid,
        scheduled_at: DateTime<Utc>,
        run_id: Uuid,
    ) -> StoreResult<()> {
        let s = &mut self.work;
        if !s.schedules.contains_key(&schedule_id) {
            return Err(StoreError::NotFound(format!(
                "referenced row (schedule {schedule_id})"
            )));
        }
        if !s.runs.contains_key(&run_id) {
            return Err(StoreError::NotFound(format!(
                "referenced row (run {run_id})"
            )));
        }
        if s.schedule_runs.contains_key(&(schedule_id, scheduled_at)) {
            return Err(StoreError::AlreadyExists("schedule_runs_pkey".into()));
        }
        if s.schedule_runs.values().any(|r| *r == run_id) {
            return Err(StoreError::AlreadyExists("schedule_runs_run_id_key".into()));
        }
        s.schedule_runs.insert((schedule_id, scheduled_at), run_id);
        Ok(())
    }

    async fn schedule_runs(&mut self, schedule_id: Uuid) -> StoreResult<Vec<(DateTime<Utc>, Run)>> {
        let s = &self.work;
        Ok(s.schedule_runs
            .range(
                (schedule_id, DateTime::<Utc>::MIN_UTC)..=(schedule_id, DateTime::<Utc>::MAX_UTC),
            )
            .filter_map(|((_, at), run)| Some((*at, s.runs.get(run)?.clone())))
            .collect())
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(
    crate::Schedule,
    schedules,
    "schedules",
    "schedules_project_id_name_key",
    name,
    |x| Some(x.project_id)
);

impl Table for Schedule {
    /// Its `schedule_runs` rows go with it (not the runs).
    fn on_delete(s: &mut State, id: Uuid) -> StoreResult<()> {
        s.schedule_runs.retain(|(sid, _), _| *sid != id);
        Ok(())
    }
}
