//! The chart reads ([`crate::charts`]) over the runs in memory, counted as
//! the PostgreSQL statements count them.

use super::*;
use crate::charts::{
    percentile_cont, ChartTx, DispatchBucket, DurationBucket, OutcomeBucket, StartedBucket, Window,
    FINISHED,
};

impl MemTx {
    /// The runs of `project_id` with a time `at` inside `w`, by bucket.
    fn bucketed<'a>(
        &'a self,
        project_id: Uuid,
        w: &'a Window,
        at: impl Fn(&Run) -> Option<DateTime<Utc>> + 'a,
    ) -> impl Iterator<Item = (i64, &'a Run)> + 'a {
        self.work
            .runs
            .values()
            .filter(move |r| r.project_id == project_id)
            .filter_map(move |r| Some((w.bucket_of(at(r)?)?, r)))
    }
}

/// Whole milliseconds of `to − from` (floored, like the SQL).
fn millis(from: DateTime<Utc>, to: DateTime<Utc>) -> i64 {
    (to - from)
        .num_microseconds()
        .map_or(i64::MAX, |us| us.div_euclid(1000))
}

/// (p50, p90) of each bucket's values.
fn percentiles(by: BTreeMap<i64, Vec<i64>>) -> Vec<(i64, i64, i64, i64)> {
    by.into_iter()
        .map(|(b, mut v)| {
            v.sort_unstable();
            let n = v.len() as i64;
            (b, n, percentile_cont(&v, 0.5), percentile_cont(&v, 0.9))
        })
        .collect()
}

#[async_trait]
impl ChartTx for MemTx {
    async fn chart_outcomes(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<OutcomeBucket>> {
        let mut by: BTreeMap<(i64, &'static str), OutcomeBucket> = BTreeMap::new();
        let finished = |r: &Run| FINISHED.contains(&r.status).then_some(r.finished_at?);
        for (b, r) in self.bucketed(project_id, w, finished) {
            let o = by
                .entry((b, r.status.as_str()))
                .or_insert_with(|| OutcomeBucket {
                    bucket: b,
                    status: r.status,
                    runs: 0,
                    cost_micro_usd: 0,
                });
            o.runs += 1;
            o.cost_micro_usd += r.usage.total.cost_micro_usd;
        }
        Ok(by.into_values().collect())
    }

    async fn chart_durations(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<DurationBucket>> {
        let mut by: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        let finished = |r: &Run| {
            r.started_at?;
            FINISHED.contains(&r.status).then_some(r.finished_at?)
        };
        for (b, r) in self.bucketed(project_id, w, finished) {
            let (Some(s), Some(f)) = (r.started_at, r.finished_at) else {
                continue;
            };
            by.entry(b).or_default().push(millis(s, f));
        }
        Ok(percentiles(by)
            .into_iter()
            .map(|(bucket, runs, p50_ms, p90_ms)| DurationBucket {
                bucket,
                runs,
                p50_ms,
                p90_ms,
            })
            .collect())
    }

    async fn chart_started(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<StartedBucket>> {
        let mut by: BTreeMap<i64, i64> = BTreeMap::new();
        for (b, _) in self.bucketed(project_id, w, |r| r.started_at) {
            *by.entry(b).or_default() += 1;
        }
        Ok(by
            .into_iter()
            .map(|(bucket, runs)| StartedBucket { bucket, runs })
            .collect())
    }

    async fn chart_dispatch(
        &mut self,
        project_id: Uuid,
        w: &Window,
        claim_topic: &str,
    ) -> StoreResult<Vec<DispatchBucket>> {
        let mut by: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
        for e in self.work.events.values().filter(|e| e.topic == claim_topic) {
            let Some(b) = w.bucket_of(e.created_at) else {
                continue;
            };
            let run = e.payload["run_id"]
                .as_str()
                .and_then(|id| id.parse::<Uuid>().ok())
                .and_then(|id| self.work.runs.get(&id));
            let Some(r) = run.filter(|r| r.project_id == project_id) else {
                continue;
            };
            // The payload's attempt as text, like the SQL compares it.
            let attempt = match &e.payload["attempt"] {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            if attempt != r.attempt.to_string() {
                continue;
            }
            if let Some(since) = r.dispatchable_since {
                by.entry(b).or_default().push(millis(since, e.created_at));
            }
        }
        Ok(percentiles(by)
            .into_iter()
            .map(
                |(bucket, claims, latency_p50_ms, latency_p90_ms)| DispatchBucket {
                    bucket,
                    claims,
                    latency_p50_ms,
                    latency_p90_ms,
                },
            )
            .collect())
    }
}
