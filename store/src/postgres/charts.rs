//! The chart reads ([`crate::charts`]): one grouped statement each, over
//! the project's runs (`runs_project_id`).

use super::*;
use crate::charts::{
    ChartTx, DispatchBucket, DurationBucket, OutcomeBucket, StartedBucket, Window, BUCKET_SQL,
    FINISHED,
};

fn bucket(col: &str) -> String {
    BUCKET_SQL.replace("{t}", col)
}

/// `$1` the project, `$2` the window's start, `$3` its bucket seconds,
/// `$4` its end.
fn grouped<'q>(
    sql: &'q str,
    project_id: Uuid,
    w: &Window,
) -> sqlx::query::Query<'q, Postgres, sqlx::postgres::PgArguments> {
    sqlx::query(sql)
        .bind(project_id)
        .bind(w.from)
        .bind(w.bucket_seconds)
        .bind(w.to())
}

/// `status IN (…)` of the finished statuses (constants, not input).
fn finished_sql() -> String {
    let list: Vec<String> = FINISHED
        .iter()
        .map(|s| format!("'{}'", s.as_str()))
        .collect();
    format!("status IN ({})", list.join(", "))
}

/// Whole milliseconds of `to − from`, as the memory store counts them.
fn millis(from: &str, to: &str) -> String {
    format!("floor(extract(epoch from ({to} - {from})) * 1000)::float8")
}

#[async_trait]
impl ChartTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn chart_outcomes(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<OutcomeBucket>> {
        let sql = format!(
            "SELECT {} AS b, status, count(*) AS n, sum(total_cost_micro_usd)::bigint AS cost \
             FROM runs WHERE project_id = $1 AND {} \
             AND finished_at >= $2 AND finished_at < $4 \
             GROUP BY b, status ORDER BY b, status",
            bucket("finished_at"),
            finished_sql()
        );
        let q = grouped(&sql, project_id, w);
        self.rows(q, |row| {
            Ok(OutcomeBucket {
                bucket: get(row, "b")?,
                status: parse(row, "status")?,
                runs: get(row, "n")?,
                cost_micro_usd: get(row, "cost")?,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn chart_durations(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<DurationBucket>> {
        let ms = millis("started_at", "finished_at");
        let sql = format!(
            "SELECT {} AS b, count(*) AS n, \
               floor(percentile_cont(0.5) WITHIN GROUP (ORDER BY {ms}))::bigint AS p50, \
               floor(percentile_cont(0.9) WITHIN GROUP (ORDER BY {ms}))::bigint AS p90 \
             FROM runs WHERE project_id = $1 AND {} AND started_at IS NOT NULL \
             AND finished_at >= $2 AND finished_at < $4 \
             GROUP BY b ORDER BY b",
            bucket("finished_at"),
            finished_sql()
        );
        let q = grouped(&sql, project_id, w);
        self.rows(q, |row| {
            Ok(DurationBucket {
                bucket: get(row, "b")?,
                runs: get(row, "n")?,
                p50_ms: get(row, "p50")?,
                p90_ms: get(row, "p90")?,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn chart_started(
        &mut self,
        project_id: Uuid,
        w: &Window,
    ) -> StoreResult<Vec<StartedBucket>> {
        let sql = format!(
            "SELECT {} AS b, count(*) AS n FROM runs WHERE project_id = $1 \
             AND started_at >= $2 AND started_at < $4 GROUP BY b ORDER BY b",
            bucket("started_at")
        );
        let q = grouped(&sql, project_id, w);
        self.rows(q, |row| {
            Ok(StartedBucket {
                bucket: get(row, "b")?,
                runs: get(row, "n")?,
            })
        })
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn chart_dispatch(
        &mut self,
        project_id: Uuid,
        w: &Window,
        claim_topic: &str,
    ) -> StoreResult<Vec<DispatchBucket>> {
        // The claims in the window by `events_topic_created_at`, each
        // joined to its run by primary key.
        let ms = millis("r.dispatchable_since", "e.created_at");
        let sql = format!(
            "SELECT {} AS b, count(*) AS n, \
               floor(percentile_cont(0.5) WITHIN GROUP (ORDER BY {ms}))::bigint AS p50, \
               floor(percentile_cont(0.9) WITHIN GROUP (ORDER BY {ms}))::bigint AS p90 \
             FROM events e JOIN runs r ON r.id = (e.payload->>'run_id')::uuid \
             WHERE e.topic = $5 AND e.created_at >= $2 AND e.created_at < $4 \
             AND r.project_id = $1 AND r.dispatchable_since IS NOT NULL \
             AND e.payload->>'attempt' = r.attempt::text \
             GROUP BY b ORDER BY b",
            bucket("e.created_at")
        );
        let q = grouped(&sql, project_id, w).bind(claim_topic);
        self.rows(q, |row| {
            Ok(DispatchBucket {
                bucket: get(row, "b")?,
                claims: get(row, "n")?,
                latency_p50_ms: get(row, "p50")?,
                latency_p90_ms: get(row, "p90")?,
            })
        })
        .await
    }
}
