//! The dashboard's chart reads: runs counted into a window's
//! buckets by the time they finished or started, the same in both stores.

use super::*;
use pam_store::charts::{DispatchBucket, DurationBucket, OutcomeBucket, StartedBucket, Window};

/// A run of `task` that became dispatchable at `ready`, started at
/// `start` and, when `end` is given, finished there in `status`.
fn timed(
    task: &WorkItem,
    name: &str,
    ready: i64,
    start: Option<i64>,
    end: Option<(i64, RunStatus)>,
    cost: i64,
) -> Run {
    let mut r = run(task, name, t(ready));
    r.started_at = start.map(t);
    if let Some((e, status)) = end {
        r.status = status;
        r.finished_at = Some(t(e));
    } else if start.is_some() {
        r.status = RunStatus::Running;
    }
    r.usage.total.cost_micro_usd = cost;
    r
}

pub async fn chart_reads_count_runs_into_buckets(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let (_, q_task) = other_project(s, "other").await;
    // The window: 3 buckets of 100 s from t(1000).
    let w = Window {
        from: t(1000),
        bucket_seconds: 100,
        buckets: 3,
    };
    use RunStatus::*;
    insert_runs(
        s,
        &[
            // Bucket 0: two exited (durations 10 s and 30 s), one failed
            // that never started (no duration).
            timed(&task, "a", 990, Some(995), Some((1005, Exited)), 100),
            timed(&task, "b", 1000, Some(1010), Some((1040, Exited)), 200),
            timed(&task, "c", 950, None, Some((1099, Failed)), 0),
            // Bucket 2: stopped after 50 s; its start is in bucket 1 after
            // a 20 s wait.
            timed(&task, "d", 1130, Some(1150), Some((1200, Stopped)), 7),
            // Still running: started in bucket 2, no outcome.
            timed(&task, "e", 1250, Some(1251), None, 50),
            // Outside the window: finished at its end (exclusive), or
            // before its start.
            timed(&task, "f", 1200, Some(1250), Some((1300, Exited)), 1),
            timed(&task, "g", 900, Some(900), Some((999, Exited)), 1),
            // Another project's run in the window.
            timed(&q_task, "h", 1000, Some(1001), Some((1002, Exited)), 1),
        ],
    )
    .await;

    let mut tx = s.begin().await.unwrap();
    let outcome = |bucket, status, runs, cost_micro_usd| OutcomeBucket {
        bucket,
        status,
        runs,
        cost_micro_usd,
    };
    assert_eq!(
        tx.chart_outcomes(p.id, &w).await.unwrap(),
        vec![
            outcome(0, Exited, 2, 300),
            outcome(0, Failed, 1, 0),
            outcome(2, Stopped, 1, 7),
        ]
    );
    assert_eq!(
        tx.chart_durations(p.id, &w).await.unwrap(),
        vec![
            // percentile_cont over [10 000, 30 000] ms.
            DurationBucket {
                bucket: 0,
                runs: 2,
                p50_ms: 20_000,
                p90_ms: 28_000,
            },
            DurationBucket {
                bucket: 2,
                runs: 1,
                p50_ms: 50_000,
                p90_ms: 50_000,
            },
        ]
    );
    let started = |bucket, runs| StartedBucket { bucket, runs };
    // a started before the window; d in bucket 1; e and f in bucket 2.
    assert_eq!(
        tx.chart_started(p.id, &w).await.unwrap(),
        vec![started(0, 1), started(1, 1), started(2, 2)]
    );
    drop(tx);

    // Claims as the journal records them: b's (10 s after it became
    // dispatchable, bucket 0), d's (20 s, bucket 1), e's (1 s) and f's
    // (50 s) in bucket 2; an earlier attempt's claim of e, another topic,
    // a claim before the window and another project's are not counted.
    let mut tx = s.begin().await.unwrap();
    let ids: std::collections::HashMap<String, Uuid> = tx
        .list_runs(&RunFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.name, r.id))
        .collect();
    for (name, attempt, topic, at) in [
        ("b", 1, "run.spawning", 1010),
        ("d", 1, "run.spawning", 1150),
        ("e", 1, "run.spawning", 1251),
        ("f", 1, "run.spawning", 1250),
        ("e", 0, "run.spawning", 1260),
        ("e", 1, "run.started", 1260),
        ("a", 1, "run.spawning", 995),
        ("h", 1, "run.spawning", 1001),
    ] {
        let payload = json!({"run_id": ids[name], "attempt": attempt, "name": name});
        tx.append_event(topic, payload, t(at)).await.unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let dispatch = |bucket, claims, p50, p90| DispatchBucket {
        bucket,
        claims,
        latency_p50_ms: p50,
        latency_p90_ms: p90,
    };
    assert_eq!(
        tx.chart_dispatch(p.id, &w, "run.spawning").await.unwrap(),
        vec![
            dispatch(0, 1, 10_000, 10_000),
            dispatch(1, 1, 20_000, 20_000),
            // percentile_cont over [1 000, 50 000] ms.
            dispatch(2, 2, 25_500, 45_100),
        ]
    );
    assert!(tx
        .chart_outcomes(Uuid::new_v4(), &w)
        .await
        .unwrap()
        .is_empty());
}
