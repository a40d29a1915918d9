//! Usage and budgets end to end: real pamd, real pam-worker, tmux and the fake
//! provider speaking claude's, codex's, gemini's and grok's stream formats.
//! Usage arrives with the progress and finished signals, is counted once
//! across a worker restart (its outbox replays what was not acked), rolls
//! up to the task and the project, and a run reaching its budget is
//! stopped and fails `budget_exceeded`.

use std::time::Duration;

use pam_tests::worker::{
    apply, create_worker_token, fake, fast_pamd, project_yaml, run, run_events, wait_online,
    wait_phase, Worker, FAST_WORKER_TOML,
};
use pam_tests::{eventually, ok, Pamd};
use serde_json::Value;

const T: Duration = Duration::from_secs(60);

/// worker.toml pointing every provider at the fake provider in its
/// format, `extra` fake flags for all of them.
fn worker_toml(extra: &[&str]) -> String {
    let mut toml = FAST_WORKER_TOML.to_string();
    for format in ["claude", "codex", "gemini", "grok"] {
        let mut args = vec!["--format", format];
        args.extend_from_slice(extra);
        toml.push_str(&format!(
            "[providers.{format}]\ncommand = {}\n",
            serde_json::to_string(&fake(&args)).unwrap()
        ));
    }
    toml
}

fn run_yaml(name: &str, provider: &str, cwd: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  task: t1\n  provider: {provider}\n  prompt: go\n  cwd: {cwd:?}\n{extra_spec}"
    )
}

fn total(r: &Value) -> (u64, u64, u64, f64) {
    let t = &r["status"]["usage"]["total"];
    (
        t["inputTokens"].as_u64().unwrap_or(0),
        t["cachedInputTokens"].as_u64().unwrap_or(0),
        t["outputTokens"].as_u64().unwrap_or(0),
        t["costUsd"].as_f64().unwrap_or(-1.0),
    )
}

async fn pamd_and_worker(extra: &[&str]) -> (Pamd, Worker) {
    let pamd = fast_pamd().await;
    let token = create_worker_token(&pamd, "h1").await.unwrap();
    let w = Worker::start_with_token(&pamd.url, &token, "h1", &worker_toml(extra)).unwrap();
    wait_online(&pamd, "h1").await;
    (pamd, w)
}

#[tokio::test]
async fn usage_arrives_once_across_a_worker_restart_and_rolls_up() {
    let (pamd, mut w) = pamd_and_worker(&["--lines", "3", "--sleep-ms", "700"]).await;
    let cwd = w.tmp().display().to_string();
    apply(
        &pamd,
        &format!(
            "{}---\n{}---\n{}---\n{}---\n{}",
            project_yaml(),
            run_yaml("u-claude", "claude", &cwd, ""),
            run_yaml("u-codex", "codex", &cwd, ""),
            run_yaml("u-gemini", "gemini", &cwd, ""),
            run_yaml("u-grok", "grok", &cwd, "")
        ),
    );
    // The first claude step's usage is in before the worker dies.
    eventually(T, "claude's first step usage", || async {
        let r = run(&pamd, "u-claude").await;
        (total(&r).0 >= 10).then_some(())
    })
    .await;
    w.kill9();
    w.restart().unwrap();
    for name in ["u-claude", "u-codex", "u-gemini", "u-grok"] {
        wait_phase(&pamd, name, "exited", T).await;
    }
    // claude: the result's totals and its own total_cost_usd (3 steps).
    let c = run(&pamd, "u-claude").await;
    assert_eq!(total(&c), (30, 0, 6, 0.25), "{c}");
    assert_eq!(
        c["status"]["usage"]["attempt"],
        c["status"]["usage"]["total"]
    );
    // codex: turn.completed's usage, priced from the default table:
    // 15 uncached in × $1.25 + 15 cached × $0.125 + 3 out × $10 per 1M.
    let x = run(&pamd, "u-codex").await;
    let (i, cached, o, cost) = total(&x);
    assert_eq!((i, cached, o), (30, 15, 3), "{x}");
    assert!((cost - 0.000_050_625).abs() < 2e-6, "{x}");
    // gemini: the result's stats.
    let g = run(&pamd, "u-gemini").await;
    assert_eq!((total(&g).0, total(&g).2), (30, 3), "{g}");
    // grok: per-step usage, settled by the result's totals, priced as
    // grok-code-fast-1 (the model it reports): 18 uncached in × $0.20 +
    // 12 cached × $0.02 + 6 out × $1.50 per 1M.
    let k = run(&pamd, "u-grok").await;
    let (i, cached, o, cost) = total(&k);
    assert_eq!((i, cached, o), (30, 12, 6), "{k}");
    assert!((cost - 0.000_012_84).abs() < 2e-6, "{k}");

    // Roll-ups: the task t1 and the project e2e hold all four.
    let sum_in = 30 + 30 + 30 + 30;
    let task = pamd.get("/api/v1/projects/e2e/tasks/t1").await.unwrap();
    assert_eq!(task["status"]["usage"]["inputTokens"], sum_in, "{task}");
    let project = pamd.get("/api/v1/projects/e2e").await.unwrap();
    assert_eq!(
        project["status"]["usage"]["inputTokens"], sum_in,
        "{project}"
    );
    let cost = project["status"]["usage"]["costUsd"].as_f64().unwrap();
    assert!(cost > 0.25 && cost < 0.2502, "{project}");

    // pamctl shows it: wide columns, describe, top.
    let wide = ok(&pamd.pamctl(&["-p", "e2e", "get", "runs", "-o", "wide"]));
    assert!(
        wide.lines().next().unwrap().ends_with("TOKENS   COST"),
        "{wide}"
    );
    assert!(wide.contains("$0.2500"), "{wide}");
    let top = ok(&pamd.pamctl(&["-p", "e2e", "top", "runs"]));
    let first = top.lines().nth(1).unwrap_or_default();
    assert!(first.starts_with("u-claude"), "{top}");
    let described = ok(&pamd.pamctl(&["-p", "e2e", "describe", "run", "u-claude"]));
    assert!(
        described.contains("36 tokens (in 30, cached 0, out 6), $0.2500"),
        "{described}"
    );
    let top = ok(&pamd.pamctl(&["top", "projects"]));
    assert!(top.contains("e2e"), "{top}");
}

#[tokio::test]
async fn a_run_reaching_its_token_budget_is_stopped_and_fails_budget_exceeded() {
    // claude steps report 10 in + i out: 11 tokens, then 23, then 36 ….
    let (pamd, w) = pamd_and_worker(&["--lines", "4", "--sleep-ms", "300", "--hang"]).await;
    let cwd = w.tmp().display().to_string();
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("capped", "claude", &cwd, "  budget:\n    maxTokens: 20\n")
        ),
    );
    let r = wait_phase(&pamd, "capped", "failed", T).await;
    assert_eq!(r["status"]["failureReason"], "budget_exceeded", "{r}");
    let msg = r["status"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("of a budget of 20"), "{r}");
    assert_eq!(r["spec"]["stopped"], true, "{r}");
    let id = r["metadata"]["uid"].as_str().unwrap().to_string();
    let events = run_events(&pamd, &id).await;
    let over: Vec<&Value> = events
        .iter()
        .filter(|e| e["topic"] == "run.budget_exceeded")
        .collect();
    assert_eq!(over.len(), 1, "{events:#?}");
    assert!(over[0]["payload"]["input_tokens"].as_i64().unwrap() >= 20);
    assert_eq!(over[0]["payload"]["budget"]["maxTokens"], 20);
    // Stopped through the worker (the session is gone), not left running.
    eventually(T, "the session to be gone", || async {
        w.sessions().is_empty().then_some(())
    })
    .await;
}

fn project_with_budget(max_tokens: u64) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: e2e\nspec:\n  displayName: E2E\n  budget:\n    maxTokens: {max_tokens}\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t1\n  project: e2e\nspec:\n  title: T1\n"
    )
}

#[tokio::test]
async fn a_project_over_its_budget_holds_new_runs_until_the_budget_is_raised() {
    let (pamd, w) = pamd_and_worker(&["--lines", "3"]).await;
    let cwd = w.tmp().display().to_string();
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_with_budget(20),
            run_yaml("first", "claude", &cwd, "")
        ),
    );
    // 36 tokens: over the project's 20 once it is in.
    wait_phase(&pamd, "first", "exited", T).await;
    eventually(T, "the project's BudgetExceeded condition", || async {
        let p = pamd.get("/api/v1/projects/e2e").await.ok()?;
        let conds = p["status"]["conditions"].as_array()?.clone();
        conds
            .iter()
            .any(|c| c["type"] == "BudgetExceeded" && c["status"] == "True")
            .then_some(())
    })
    .await;
    apply(&pamd, &run_yaml("second", "claude", &cwd, ""));
    // It stays pending, saying why, while the project is over budget.
    let r = eventually(T, "second's BudgetExceeded condition", || async {
        let r = run(&pamd, "second").await;
        let held = r["status"]["conditions"]
            .as_array()?
            .iter()
            .any(|c| c["type"] == "BudgetExceeded" && c["status"] == "True");
        held.then_some(r)
    })
    .await;
    assert_eq!(r["status"]["phase"], "pending", "{r}");
    // Two more passes (1 s resync) and still held.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(run(&pamd, "second").await["status"]["phase"], "pending");

    // Raised: it dispatches and runs.
    apply(&pamd, &project_with_budget(1000));
    wait_phase(&pamd, "second", "exited", T).await;
}
