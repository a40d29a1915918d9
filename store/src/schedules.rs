//! The schedule aggregate: [`Schedule`] rows and the runs each
//! created ([`ScheduleTx::schedule_runs`]).
//!
//! # Guarantees
//! - A tick is taken once: [`ScheduleTx::take_tick`] moves
//!   `last_schedule_time` only from the value the caller read (zero rows
//!   is Conflict), and `(schedule_id, scheduled_at)` is unique in
//!   `schedule_runs`, both in the caller's transaction — so two loop passes
//!   (a restarted pamd, another replica) racing for one tick leave one run.
//! - Deleting a project deletes its Schedules; deleting a Schedule or a
//!   run deletes their `schedule_runs` rows, never the runs of a deleted
//!   Schedule (they stay, as runs of their task).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::{Meta, Run, StoreResult};

/// A Schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub id: Uuid,
    pub project_id: Uuid,
    pub name: String,
    pub meta: Meta,
    /// The last tick taken.
    pub last_schedule_time: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Schedules (`schedules`, `schedule_runs`). Part of every [`crate::Tx`].
#[async_trait]
pub trait ScheduleTx: Send {
    /// Every Schedule (the loop), ordered by id.
    async fn list_all_schedules(&mut self) -> StoreResult<Vec<Schedule>>;
    /// Sets `last_schedule_time = tick` where it is still `expected`
    /// (NULL matches None), bumping resource_version; zero rows is
    /// Conflict (another pass took a tick first).
    async fn take_tick(
        &mut self,
        id: Uuid,
        expected: Option<DateTime<Utc>>,
        tick: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> StoreResult<Schedule>;
    /// Records that `run_id` is the Schedule's run for `scheduled_at`; a
    /// second run for one tick is AlreadyExists.
    async fn insert_schedule_run(
        &mut self,
        schedule_id: Uuid,
        scheduled_at: DateTime<Utc>,
        run_id: Uuid,
    ) -> StoreResult<()>;
    /// The Schedule's runs with their ticks, oldest tick first.
    async fn schedule_runs(&mut self, schedule_id: Uuid) -> StoreResult<Vec<(DateTime<Utc>, Run)>>;
}

crate::named::row!(Schedule);

impl crate::NamedKind for Schedule {
    type Scope = Uuid;
    const NOUN: &'static str = "schedule";
    fn scope(&self) -> Uuid {
        self.project_id
    }
}
