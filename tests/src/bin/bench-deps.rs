//! bench-deps: the dispatch pass with task dependencies next to
//! the same pass without them, measured in the same run on the same test
//! PostgreSQL server (two fresh databases of the same shape).
//!
//! Shape: 10,000 tasks in 100 chains of 100, one pending run per task, one
//! online host. With dependencies, task i of a chain depends on task i-1,
//! so 100 runs are dispatchable and 9,900 blocked; without, the same rows
//! have no links (10,000 dispatchable).
//!
//! - `pass`: one reconcile pass (liveness, the dependency gate, timeouts,
//!   restarts), median of 21.
//! - `claim`: a host claiming 16 runs (the claim query that skips blocked
//!   runs), median of 51, each rolled back so every sample sees the same
//!   rows.
//! - `unblock`: one pass right after the 100 chain heads are marked done
//!   (100 runs become dispatchable; informational).
//!
//! Target: each with dependencies within 2× of the same without.
//! Run: `cargo run --release -p pam-tests --bin bench-deps`.

use std::time::Duration;

use chrono::Utc;
use pam_store::{Host, TokenKind};
use pam_tests::bench::{self, record, timed, Figure};
use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

const CHAINS: i64 = 100;
const LENGTH: i64 = 100;

struct Env {
    pool: PgPool,
    state: pam_controller::api::AppState,
    host: Uuid,
}

impl Env {
    async fn new(with_deps: bool) -> anyhow::Result<Env> {
        let (pool, _) = bench::pool(10).await?;
        let (url, state) = bench::serve(pool.clone()).await?;
        let client = reqwest::Client::new();
        let op = bench::token(&state, TokenKind::Operator, None).await?;
        let project = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: bench}\nspec: {}\n";
        let r = client
            .post(format!("{url}/api/v1/apply"))
            .bearer_auth(&op)
            .json(&json!({"files": [{"name": "p.yaml", "content": project}]}))
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "apply: {}", r.status());
        let wt = bench::token(&state, TokenKind::Worker, Some("h1")).await?;
        let r = client
            .post(format!("{url}/api/v1/workers/register"))
            .bearer_auth(&wt)
            .json(
                &json!({"name": "h1", "platform": "linux", "instance_id": Uuid::new_v4(),
                "capacity": 1_000_000, "labels": {}, "version": "bench"}),
            )
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "register: {}", r.status());
        let host: Uuid = sqlx::query_scalar("SELECT id FROM hosts WHERE name = 'h1'")
            .fetch_one(&pool)
            .await?;
        let env = Env { pool, state, host };
        env.fill(with_deps).await?;
        Ok(env)
    }

    /// The tasks (`c<chain>-<i>`), the chain links when `with_deps`, one
    /// pending run per task (`dispatchable_since` as the store sets it).
    async fn fill(&self, with_deps: bool) -> anyhow::Result<()> {
        sqlx::query(
            "WITH g AS (SELECT gen_random_uuid() AS id, c, i \
                 FROM generate_series(0, $1 - 1) c, generate_series(0, $2 - 1) i) \
             INSERT INTO work_items (id, project_id, kind, title, status, path, name, \
                 created_at, updated_at) \
             SELECT g.id, p.id, 'task', 'c' || g.c || '-' || g.i, 'todo', \
                 left(replace(g.id::text, '-', ''), 8), 'c' || g.c || '-' || g.i, now(), now() \
             FROM g CROSS JOIN (SELECT id FROM projects WHERE slug = 'bench') p",
        )
        .bind(CHAINS)
        .bind(LENGTH)
        .execute(&self.pool)
        .await?;
        if with_deps {
            sqlx::query(
                "INSERT INTO work_item_deps (task_id, depends_on_id, project_id) \
                 SELECT b.id, a.id, a.project_id FROM work_items a JOIN work_items b \
                   ON b.project_id = a.project_id \
                  AND b.name = regexp_replace(a.name, '-[0-9]+$', '') || '-' || \
                      (regexp_replace(a.name, '^.*-', '')::int + 1)",
            )
            .execute(&self.pool)
            .await?;
        }
        sqlx::query(
            "INSERT INTO runs (id, project_id, task_id, name, provider, prompt, cwd, \
                 session_name, status, attempt, pending_since, created_at, updated_at, \
                 dispatchable_since) \
             SELECT u.id, w.project_id, w.id, 'run-' || w.name, 'claude', 'bench', '/tmp', \
                 'pam-' || left(replace(u.id::text, '-', ''), 8), 'pending', 1, now(), now(), \
                 now(), CASE WHEN EXISTS (SELECT 1 FROM work_item_deps d \
                     JOIN work_items x ON x.id = d.depends_on_id \
                     WHERE d.task_id = w.id AND x.status <> 'done') THEN NULL ELSE now() END \
             FROM work_items w CROSS JOIN LATERAL (SELECT gen_random_uuid() AS id, w.id AS k) u",
        )
        .execute(&self.pool)
        .await?;
        sqlx::query("ANALYZE").execute(&self.pool).await?;
        Ok(())
    }

    async fn pass(&self, k: usize) -> anyhow::Result<Duration> {
        let mut times = Vec::new();
        for _ in 0..k {
            let (r, t) = timed(pam_controller::reconcile::pass(&self.state.ctx)).await;
            r?;
            times.push(t);
        }
        Ok(median(times))
    }

    async fn claim(&self, k: usize) -> anyhow::Result<(Duration, usize)> {
        let mut times = Vec::new();
        let mut got = 0;
        for _ in 0..k {
            let mut tx = self.state.ctx.store.begin().await?;
            let host = tx.get::<Host>(self.host).await?.expect("host");
            let (r, t) = timed(tx.claim_runs(&host, 16, Utc::now())).await;
            got = r?.len();
            drop(tx); // rolled back: every sample sees the same rows
            times.push(t);
        }
        Ok((median(times), got))
    }

    /// Marks the first task of every chain done, then times one pass.
    async fn unblock(&self) -> anyhow::Result<(Duration, usize)> {
        sqlx::query("UPDATE work_items SET status = 'done' WHERE name LIKE 'c%-0'")
            .execute(&self.pool)
            .await?;
        let (r, t) = timed(pam_controller::reconcile::pass(&self.state.ctx)).await;
        Ok((t, r?.runs_unblocked))
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn line(what: &str, base: Duration, deps: Duration) {
    let ratio = deps.as_secs_f64() / base.as_secs_f64();
    println!(
        "  {what:<28} {:>8.2} ms   {:>8.2} ms   {ratio:>6.2}x   target <= 2x: {}",
        ms(base),
        ms(deps),
        record(Figure {
            name: &format!("bench-deps {what}"),
            value: ms(deps),
            unit: "ms",
            baseline: Some(ms(base)),
            target: "<= 2x no deps",
            pass: ratio <= 2.0,
        })
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let base = Env::new(false).await?;
    let deps = Env::new(true).await?;
    // Warm both (first pass pays the plan cache and the first gate writes).
    base.pass(3).await?;
    deps.pass(3).await?;
    let (pass_base, pass_deps) = (base.pass(21).await?, deps.pass(21).await?);
    let ((claim_base, n_base), (claim_deps, n_deps)) =
        (base.claim(51).await?, deps.claim(51).await?);
    anyhow::ensure!(n_base == 16 && n_deps == 16, "claimed {n_base} / {n_deps}");
    let (unblock_base, _) = base.unblock().await?;
    let (unblock_deps, unblocked) = deps.unblock().await?;
    anyhow::ensure!(unblocked == CHAINS as usize, "unblocked {unblocked}");
    println!(
        "bench-deps: 10,000 tasks in {CHAINS} chains of {LENGTH}, one pending run each, one online host"
    );
    println!(
        "  {:<28} {:>11}   {:>11}   {:>7}",
        "", "no deps", "chains", "ratio"
    );
    line("reconcile pass (median 21)", pass_base, pass_deps);
    line("claim 16 (median 51)", claim_base, claim_deps);
    line("pass unblocking 100 runs", unblock_base, unblock_deps);
    Ok(())
}
