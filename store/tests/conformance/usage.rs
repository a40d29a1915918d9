//! Usage roll-ups: per project, and per work item over its
//! subtree, each summing every attempt's usage.

use super::*;
use pam_store::Usage;

fn used(n: i64) -> Usage {
    Usage {
        input_tokens: n,
        cached_input_tokens: n / 2,
        output_tokens: 10 * n,
        cost_micro_usd: 100 * n,
    }
}

pub async fn usage_rolls_up_per_project_and_subtree(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let (q, q_task) = other_project(s, "other").await;
    let mut tx = s.begin().await.unwrap();
    let sub = tx
        .insert_work_item(&item(&p, Some(&task), "sub"))
        .await
        .unwrap();
    // A sibling whose short id could be a path prefix of nothing: its own.
    let other = tx.insert_work_item(&item(&p, None, "other")).await.unwrap();
    let idle = tx.insert_work_item(&item(&p, None, "idle")).await.unwrap();
    tx.commit().await.unwrap();

    let mut runs = Vec::new();
    for (t, name, n) in [
        (&task, "a", 1),
        (&sub, "b", 2),
        (&sub, "c", 4),
        (&other, "d", 8),
        (&q_task, "e", 16),
    ] {
        let mut r = run(t, name, t0());
        // A requeued run: roll-ups sum the total of every attempt, not
        // the current attempt's share.
        r.usage.attempt = used(0);
        r.usage.total = used(n);
        runs.push(r);
    }
    insert_runs(s, &runs).await;

    let mut tx = s.begin().await.unwrap();
    let mut by_p = tx.usage_by_project(&[p.id, q.id]).await.unwrap();
    by_p.sort_by_key(|(id, _)| (*id != p.id, *id));
    assert_eq!(by_p, vec![(p.id, used(15)), (q.id, used(16))]);
    assert_eq!(
        tx.usage_by_project(&[q.id]).await.unwrap(),
        vec![(q.id, used(16))]
    );
    assert!(tx.usage_by_project(&[]).await.unwrap().is_empty());

    let mut by_w = tx
        .usage_by_work_item(&[task.id, sub.id, other.id, idle.id, Uuid::new_v4()])
        .await
        .unwrap();
    by_w.sort_by_key(|(id, _)| *id);
    let mut want = vec![(task.id, used(7)), (sub.id, used(6)), (other.id, used(8))];
    want.sort_by_key(|(id, _)| *id);
    assert_eq!(by_w, want, "a task includes its subtasks; idle has none");
}

fn t0() -> DateTime<Utc> {
    t(0)
}

/// A project whose condition BudgetExceeded is True dispatches
/// none of its runs; other projects' runs go on; False lets them go.
pub async fn claim_skips_runs_of_projects_over_budget(s: &dyn Store) {
    let (p, task) = seed(s).await;
    let (_, q_task) = other_project(s, "other").await;
    let h = inserted_host(s, "h").await;
    let mine = run(&task, "mine", t(1));
    let theirs = run(&q_task, "theirs", t(2));
    insert_runs(s, &[mine.clone(), theirs.clone()]).await;

    let set = |status: &str| {
        let mut p = p.clone();
        let status = status.to_string();
        async move {
            let mut tx = s.begin().await.unwrap();
            let cur = tx.get::<Project>(p.id).await.unwrap().unwrap();
            p.meta = cur.meta.clone();
            p.meta.conditions = json!([{"type": "BudgetExceeded", "status": status,
                "reason": "BudgetExceeded", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]);
            assert!(pam_store::projects::over_budget(&p.meta) == (status == "True"));
            tx.update(&p, cur.meta.resource_version).await.unwrap();
            tx.commit().await.unwrap();
        }
    };
    set("True").await;
    let mut tx = s.begin().await.unwrap();
    let claimed = tx.claim_runs(&h, 10, t(5)).await.unwrap();
    assert_eq!(
        claimed.iter().map(|r| r.id).collect::<Vec<_>>(),
        [theirs.id]
    );
    tx.commit().await.unwrap();
    set("False").await;
    let mut tx = s.begin().await.unwrap();
    let claimed = tx.claim_runs(&h, 10, t(6)).await.unwrap();
    assert_eq!(claimed.iter().map(|r| r.id).collect::<Vec<_>>(), [mine.id]);
}
