//! Task dependencies end to end: real pamd on PostgreSQL, a
//! real pam-worker with tmux and the fake provider. A task's runs are
//! dispatched only once every task it depends on is done; the operator
//! marks a task done (`pamctl task done`) after its run exits.

use std::time::Duration;

use pam_tests::worker::{apply, events, fake, fast_pamd, run, wait_online, wait_phase, Worker};
use pam_tests::{eventually, ok, Pamd};
use serde_json::Value;

const T: Duration = Duration::from_secs(30);

async fn pamd() -> Pamd {
    fast_pamd().await
}

/// Project e2e; per `(name, deps)` a Task and its Run `run-<name>` (the
/// fake provider sleeping `sleep_ms`).
fn graph(w: &Worker, tasks: &[(&str, &[&str])], sleep_ms: u64) -> String {
    let mut docs = vec![
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: e2e\nspec: {}\n".to_string(),
    ];
    let cmd = serde_json::to_string(&fake(&[
        "--lines",
        "1",
        "--sleep-ms",
        &sleep_ms.to_string(),
    ]))
    .unwrap();
    for (name, deps) in tasks {
        let deps = if deps.is_empty() {
            String::new()
        } else {
            format!("  dependsOn: [{}]\n", deps.join(", "))
        };
        docs.push(format!(
            "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  title: {name}\n{deps}"
        ));
        docs.push(format!(
            "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: run-{name}\n  project: e2e\nspec:\n  task: {name}\n  provider: exec\n  cwd: {cwd:?}\n  command: {cmd}\n",
            cwd = w.tmp().display().to_string()
        ));
    }
    docs.join("---\n")
}

fn done(pamd: &Pamd, task: &str) {
    ok(&pamd.pamctl(&["task", "done", task, "-p", "e2e"]));
}

fn condition<'a>(r: &'a Value, type_: &str) -> Option<&'a Value> {
    r["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The seq of the first `topic` event of run `name`.
async fn seq_of(pamd: &Pamd, name: &str, topic: &str) -> i64 {
    events(pamd, Some(topic))
        .await
        .iter()
        .find(|e| e["payload"]["name"] == name)
        .and_then(|e| e["seq"].as_i64())
        .unwrap_or_else(|| panic!("no {topic} for {name}"))
}

#[tokio::test]
async fn a_chain_runs_strictly_in_order_and_shows_what_it_waits_for() {
    let pamd = pamd().await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    apply(
        &pamd,
        &graph(&w, &[("a", &[]), ("b", &["a"]), ("c", &["b"])], 0),
    );
    wait_phase(&pamd, "run-a", "exited", T).await;
    // b waits for a: pending, with a Blocked condition naming a.
    let b = run(&pamd, "run-b").await;
    assert_eq!(b["status"]["phase"], "pending", "{b}");
    let blocked = condition(&b, "Blocked").expect("a Blocked condition");
    assert_eq!(blocked["status"], "True");
    assert_eq!(blocked["message"], "waiting for a to be done");
    let wide = ok(&pamd.pamctl(&["get", "tasks", "-p", "e2e", "-o", "wide"]));
    assert!(
        wide.lines().next().unwrap().contains("BLOCKED-BY"),
        "{wide}"
    );
    let line_b = wide.lines().find(|l| l.starts_with("b ")).unwrap();
    assert!(line_b.trim_end().ends_with(" a"), "{wide}");
    let blocked_list = ok(&pamd.pamctl(&["get", "tasks", "--blocked", "-p", "e2e", "-o", "name"]));
    let mut names: Vec<&str> = blocked_list.lines().collect();
    names.sort();
    assert_eq!(names, ["task/b", "task/c"]);
    let describe = ok(&pamd.pamctl(&["describe", "task", "b", "-p", "e2e"]));
    assert!(describe.contains("Waits For:        a\n"), "{describe}");
    assert!(describe.contains("Waited On By:     c\n"), "{describe}");

    done(&pamd, "a");
    wait_phase(&pamd, "run-b", "exited", T).await;
    assert_eq!(run(&pamd, "run-c").await["status"]["phase"], "pending");
    done(&pamd, "b");
    wait_phase(&pamd, "run-c", "exited", T).await;
    // Strictly in order: each run was dispatched after its dependency's
    // run finished (and the task was marked done).
    let a_done = seq_of(&pamd, "run-a", "run.finished").await;
    let b_spawn = seq_of(&pamd, "run-b", "run.spawning").await;
    let b_done = seq_of(&pamd, "run-b", "run.finished").await;
    let c_spawn = seq_of(&pamd, "run-c", "run.spawning").await;
    assert!(
        a_done < b_spawn && b_done < c_spawn,
        "{a_done} {b_spawn} {b_done} {c_spawn}"
    );
    assert_eq!(events(&pamd, Some("run.unblocked")).await.len(), 2);
}

#[tokio::test]
async fn a_diamond_runs_the_two_middle_runs_in_parallel() {
    let pamd = pamd().await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    apply(
        &pamd,
        &graph(
            &w,
            &[("a", &[]), ("b", &["a"]), ("c", &["a"]), ("d", &["b", "c"])],
            4000,
        ),
    );
    wait_phase(&pamd, "run-a", "exited", T).await;
    done(&pamd, "a");
    // b and c run at the same time while d waits for both.
    eventually(T, "run-b and run-c running together", || async {
        let (b, c) = (run(&pamd, "run-b").await, run(&pamd, "run-c").await);
        (b["status"]["phase"] == "running" && c["status"]["phase"] == "running").then_some(())
    })
    .await;
    let d = run(&pamd, "run-d").await;
    assert_eq!(d["status"]["phase"], "pending");
    assert_eq!(
        condition(&d, "Blocked").unwrap()["message"],
        "waiting for b, c to be done"
    );
    wait_phase(&pamd, "run-b", "exited", T).await;
    wait_phase(&pamd, "run-c", "exited", T).await;
    done(&pamd, "b");
    assert_eq!(
        condition(&run(&pamd, "run-d").await, "Blocked").unwrap()["message"],
        "waiting for c to be done"
    );
    done(&pamd, "c");
    wait_phase(&pamd, "run-d", "running", T).await;
}

#[tokio::test]
async fn cancelling_a_dependency_fails_the_dependent_run() {
    let pamd = pamd().await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    apply(&pamd, &graph(&w, &[("a", &[]), ("b", &["a"])], 0));
    wait_phase(&pamd, "run-a", "exited", T).await;
    ok(&pamd.pamctl(&["task", "cancel", "a", "-p", "e2e"]));
    let b = wait_phase(&pamd, "run-b", "failed", T).await;
    assert_eq!(b["status"]["failureReason"], "dependency_cancelled", "{b}");
    assert_eq!(
        b["status"]["message"],
        "task \"a\" it depends on was cancelled"
    );
    let failed = events(&pamd, Some("run.failed")).await;
    assert!(
        failed.iter().any(|e| e["payload"]["name"] == "run-b"
            && e["payload"]["failure_reason"] == "dependency_cancelled"
            && e["payload"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("\"a\"")),
        "{failed:#?}"
    );
}

#[tokio::test]
async fn pamd_restarted_while_runs_are_blocked_loses_nothing() {
    let mut pamd = pamd().await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    apply(
        &pamd,
        &graph(&w, &[("a", &[]), ("b", &["a"]), ("c", &["b"])], 0),
    );
    wait_phase(&pamd, "run-a", "exited", T).await;
    pamd.restart().await.unwrap();
    wait_online(&pamd, "h1").await;
    for name in ["run-b", "run-c"] {
        let r = run(&pamd, name).await;
        assert_eq!(r["status"]["phase"], "pending", "{r}");
        assert!(condition(&r, "Blocked").is_some(), "{r}");
    }
    done(&pamd, "a");
    wait_phase(&pamd, "run-b", "exited", T).await;
    done(&pamd, "b");
    wait_phase(&pamd, "run-c", "exited", T).await;
}
