//! The dashboard's charts: a project's runs counted into equal
//! time buckets, one statement per read in PostgreSQL, never a row per run
//! sent to pamd.
//!
//! The caller picks the window ([`Window`]); the stores only count. A
//! run belongs to the bucket its time falls in: a finished run to the
//! bucket of `finished_at` (outcomes, cost, duration), a started run to the
//! bucket of `started_at` (throughput), a claim to the bucket of its
//! journaled event (dispatch latency).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::state::RunStatus;
use uuid::Uuid;

use crate::StoreResult;

/// `buckets` equal buckets of `bucket_seconds` from `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: DateTime<Utc>,
    pub bucket_seconds: i64,
    pub buckets: i64,
}

impl Window {
    /// The end of the window (exclusive).
    pub fn to(&self) -> DateTime<Utc> {
        self.from + chrono::Duration::seconds(self.bucket_seconds * self.buckets)
    }

    /// The bucket `t` falls in, if inside the window; the Rust mirror of
    /// [`BUCKET_SQL`].
    pub fn bucket_of(&self, t: DateTime<Utc>) -> Option<i64> {
        if t < self.from || t >= self.to() {
            return None;
        }
        let micros = (t - self.from).num_microseconds()?;
        Some(micros.div_euclid(self.bucket_seconds * 1_000_000))
    }
}

/// [`Window::bucket_of`] in SQL for a timestamp column `{t}` (`$2` the
/// window's start, `$3` its bucket seconds).
pub const BUCKET_SQL: &str = "floor(extract(epoch from ({t} - $2))::float8 / $3)::bigint";

/// Runs of one outcome that finished in one bucket, and what they cost
/// (every attempt's cost, as the project's budget counts it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeBucket {
    pub bucket: i64,
    /// Exited, failed or stopped.
    pub status: RunStatus,
    pub runs: i64,
    pub cost_micro_usd: i64,
}

/// How long the runs that finished in one bucket ran (`finished_at −
/// started_at`, whole milliseconds): the median and the 90th percentile,
/// interpolated like PostgreSQL's `percentile_cont`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DurationBucket {
    pub bucket: i64,
    pub runs: i64,
    pub p50_ms: i64,
    pub p90_ms: i64,
}

/// The runs that started in one bucket (throughput).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartedBucket {
    pub bucket: i64,
    pub runs: i64,
}

/// The claims of one bucket and their dispatch latency: the claim's time
/// (its journaled event) minus when the run became dispatchable
/// (`dispatchable_since`: created, requeued or unblocked), whole
/// milliseconds, for each run's current attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchBucket {
    pub bucket: i64,
    pub claims: i64,
    pub latency_p50_ms: i64,
    pub latency_p90_ms: i64,
}

/// The chart reads. Every list is sorted by bucket (then status), and
/// leaves out buckets with no run.
#[async_trait]
pub trait ChartTx {
    /// Runs of `project_id` that finished (exited, failed, stopped) in the
    /// window, per bucket and outcome.
    async fn chart_outcomes(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<OutcomeBucket>>;
    /// Durations of the runs of `project_id` that finished in the window
    /// having started.
    async fn chart_durations(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<DurationBucket>>;
    /// Runs of `project_id` that started in the window.
    async fn chart_started(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<StartedBucket>>;
    /// Claims of runs of `project_id` in the window, read from the journal:
    /// events of `claim_topic` (pamd's `run.spawning`, one per claim, its
    /// payload naming `run_id` and `attempt`) about the run's current
    /// attempt — an earlier attempt's claim has no dispatchable time left
    /// to measure from. By the event's time.
    async fn chart_dispatch(
        &mut self,
        project_id: Uuid,
        w: &Window,
        claim_topic: &str,
    ) -> StoreResult<Vec<DispatchBucket>>;
}

/// The statuses a finished run is in.
pub const FINISHED: [RunStatus; 3] = [RunStatus::Exited, RunStatus::Failed, RunStatus::Stopped];

/// PostgreSQL's `percentile_cont(p)` over `sorted` (ascending, not empty),
/// floored to a whole number: MemStore's mirror of the SQL.
pub fn percentile_cont(sorted: &[i64], p: f64) -> i64 {
    let pos = p * (sorted.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let lo_v = sorted[lo] as f64;
    let v = match sorted.get(lo + 1) {
        Some(&hi) => lo_v + (hi as f64 - lo_v) * (pos - lo as f64),
        None => lo_v,
    };
    v.floor() as i64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_interpolates_between_neighbours() {
        assert_eq!(percentile_cont(&[10], 0.9), 10);
        assert_eq!(percentile_cont(&[10, 20], 0.5), 15);
        assert_eq!(percentile_cont(&[0, 100, 200, 300], 0.9), 270);
    }

    #[test]
    fn bucket_of_is_half_open() {
        let from = DateTime::from_timestamp(3600, 0).unwrap();
        let w = Window {
            from,
            bucket_seconds: 60,
            buckets: 2,
        };
        let at = |s| from + chrono::Duration::seconds(s);
        assert_eq!(w.bucket_of(at(-1)), None);
        assert_eq!(w.bucket_of(at(0)), Some(0));
        assert_eq!(w.bucket_of(at(59)), Some(0));
        assert_eq!(w.bucket_of(at(60)), Some(1));
        assert_eq!(w.bucket_of(at(120)), None);
    }
}
