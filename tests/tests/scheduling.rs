//! Hosts advertise what they can run, placement uses it, and a
//! pending run says why it waits. A real pamd and two real workers: one
//! whose `claude` command exists (a script answering `--version` with
//! 2.1.0, else the fake provider), one whose `claude` command does not.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use pam_tests::worker::{
    apply, claude_command, create_worker_token, fake, fast_pamd, host, project_yaml, run,
    run_events, wait_online, wait_phase, Worker, FAST_WORKER_TOML,
};
use pam_tests::{eventually, ok};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(60);

/// A claude Run on task t1 of project e2e.
fn claude_run(name: &str, cwd: &str, extra: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  task: t1\n  provider: claude\n  prompt: go\n  cwd: {cwd:?}\n{extra}"
    )
}

/// The run's `Scheduled` condition.
fn scheduled(r: &Value) -> Value {
    r["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Scheduled").cloned())
        .unwrap_or(Value::Null)
}

#[tokio::test]
async fn a_claude_run_goes_where_claude_is_and_a_pending_one_says_why() {
    let pamd = fast_pamd().await;
    let scratch = tempfile::tempdir().unwrap();
    let script = scratch.path().join("claude");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nif [ \"$1\" = --version ]; then echo '2.1.0 (Claude Code)'; exit 0; fi\nexec {} --lines 2 --sleep-ms 100 \"$@\"\n",
            fake(&[])[0]
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let with_claude = format!(
        "{FAST_WORKER_TOML}{}",
        claude_command(&[&script.display().to_string(), "-p", "{prompt}"])
    );
    let without_claude = format!(
        "{FAST_WORKER_TOML}{}",
        claude_command(&["/nonexistent/pam/claude"])
    );
    let token_a = create_worker_token(&pamd, "has-claude").await.unwrap();
    let a = Worker::start_with_token(&pamd.url, &token_a, "has-claude", &with_claude).unwrap();
    let token_b = create_worker_token(&pamd, "no-claude").await.unwrap();
    let _b = Worker::start_with_token(&pamd.url, &token_b, "no-claude", &without_claude).unwrap();
    wait_online(&pamd, "has-claude").await;
    wait_online(&pamd, "no-claude").await;

    // What each reported: the API, get hosts -o wide, describe host.
    let caps_a = host(&pamd, "has-claude").await["status"]["capabilities"].clone();
    assert!(
        caps_a["providers"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "claude", "version": "2.1.0"})),
        "{caps_a}"
    );
    assert!(
        caps_a["workspaceFreeBytes"].as_u64().unwrap() > 0,
        "{caps_a}"
    );
    let caps_b = host(&pamd, "no-claude").await["status"]["capabilities"].clone();
    let names_b: Vec<&str> = caps_b["providers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert!(!names_b.contains(&"claude"), "{caps_b}");
    assert!(names_b.contains(&"exec"), "{caps_b}");
    let wide = ok(&pamd.pamctl(&["get", "hosts", "-o", "wide"]));
    assert!(wide.lines().next().unwrap().contains("PROVIDERS"), "{wide}");
    assert!(wide.contains("claude@2.1.0"), "{wide}");
    let described = ok(&pamd.pamctl(&["describe", "host", "has-claude"]));
    assert!(described.contains("claude@2.1.0"), "{described}");

    // A claude run with no target goes to the host that has claude.
    let cwd = a.tmp().display().to_string();
    apply(
        &pamd,
        &format!("{}---\n{}", project_yaml(), claude_run("first", &cwd, "")),
    );
    let first = wait_phase(&pamd, "first", "exited", T).await;
    assert_eq!(first["status"]["host"], "has-claude", "{first}");

    // Cordoned, the only claude host: the run waits and says why.
    ok(&pamd.pamctl(&["host", "disable", "has-claude"]));
    apply(&pamd, &claude_run("second", &cwd, ""));
    let want = "0/2 hosts can run it: 1 lacks provider claude, 1 cordoned";
    let r = eventually(T, "second's Scheduled condition", || async {
        let r = run(&pamd, "second").await;
        (scheduled(&r)["message"] == want).then_some(r)
    })
    .await;
    assert_eq!(r["status"]["phase"], "pending", "{r}");
    let cond = scheduled(&r);
    assert_eq!(cond["status"], "False", "{cond}");
    assert_eq!(cond["reason"], "Unschedulable", "{cond}");
    let table = ok(&pamd.pamctl(&["-p", "e2e", "get", "runs"]));
    let row = table
        .lines()
        .find(|l| l.starts_with("second "))
        .unwrap_or_default();
    assert!(table.lines().next().unwrap().contains("REASON"), "{table}");
    assert!(row.contains("Unschedulable"), "{table}");
    let wide = ok(&pamd.pamctl(&["-p", "e2e", "get", "runs", "-o", "wide"]));
    assert!(wide.contains(want), "{wide}");
    let described = ok(&pamd.pamctl(&["-p", "e2e", "describe", "run", "second"]));
    assert!(described.contains(want), "{described}");

    // Level-triggered, not a write per pass: over several passes (1 s
    // resync) the run is not written again and journals nothing.
    let rv = r["metadata"]["resourceVersion"].clone();
    let events = run_events(&pamd, r["metadata"]["uid"].as_str().unwrap())
        .await
        .len();
    tokio::time::sleep(Duration::from_secs(4)).await;
    let again = run(&pamd, "second").await;
    assert_eq!(again["metadata"]["resourceVersion"], rv, "{again}");
    assert_eq!(again["status"]["phase"], "pending", "{again}");
    assert_eq!(
        run_events(&pamd, r["metadata"]["uid"].as_str().unwrap())
            .await
            .len(),
        events
    );

    // Uncordoned, it runs there.
    ok(&pamd.pamctl(&["host", "enable", "has-claude"]));
    let second = wait_phase(&pamd, "second", "exited", T).await;
    assert_eq!(second["status"]["host"], "has-claude", "{second}");

    // A version no host has: it fails no_eligible_host at its timeout,
    // carrying the last message.
    apply(
        &pamd,
        &claude_run(
            "too-new",
            &cwd,
            "  providerVersion: \">=3\"\n  dispatchTimeoutSeconds: 3\n",
        ),
    );
    let failed = wait_phase(&pamd, "too-new", "failed", T).await;
    assert_eq!(
        failed["status"]["failureReason"], "no_eligible_host",
        "{failed}"
    );
    assert_eq!(
        failed["status"]["message"],
        "0/2 hosts can run it: 1 lacks provider claude, 1 lacks provider claude >=3",
        "{failed}"
    );
}

/// Bad capability reports get the one 422 JSON error, and the host keeps
/// what it reported before.
#[tokio::test]
async fn a_bad_capability_report_is_refused_and_the_previous_stays() {
    let pamd = fast_pamd().await;
    let token = create_worker_token(&pamd, "h1").await.unwrap();
    let w = Worker::start_with_token(&pamd.url, &token, "h1", FAST_WORKER_TOML).unwrap();
    wait_online(&pamd, "h1").await;
    let before = host(&pamd, "h1").await["status"]["capabilities"].clone();
    assert!(before["providers"].is_array(), "{before}");
    let instance = std::fs::read_to_string(w.data_dir.join("instance_id")).unwrap();
    let register = |providers: Value| {
        json!({
            "name": "h1", "platform": "linux", "instance_id": instance.trim(),
            "capacity": 4, "version": "test",
            "capabilities": { "providers": providers },
        })
    };
    let many: Vec<Value> = (0..10_000).map(|_| json!({"name": "claude"})).collect();
    let cases = [
        (register(json!([{"name": "copilot"}])), "unknown provider"),
        (register(Value::Array(many)), "10000 entries"),
        (
            register(json!([{"name": "claude", "version": "9".repeat(1 << 20)}])),
            "capabilities.providers[0].version",
        ),
    ];
    for (body, says) in cases {
        let resp = pamd
            .http()
            .post(format!("{}/api/v1/workers/register", pamd.url))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 422, "{says}");
        let v: Value = resp.json().await.unwrap();
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(v["error"]["code"], "unprocessable", "{v}");
        assert!(message.contains(says), "{message}");
        assert!(message.len() < 300, "{message}");
    }
    assert_eq!(host(&pamd, "h1").await["status"]["capabilities"], before);
}

/// A CLI installed after the worker started is reported on SIGHUP (the
/// worker checks again and registers with the change), and the worker
/// lives on.
#[tokio::test]
async fn a_cli_installed_later_is_reported_on_sighup() {
    let pamd = fast_pamd().await;
    let scratch = tempfile::tempdir().unwrap();
    let script = scratch.path().join("claude");
    let toml = format!(
        "{FAST_WORKER_TOML}{}",
        claude_command(&[&script.display().to_string(), "-p", "{prompt}"])
    );
    let token = create_worker_token(&pamd, "h1").await.unwrap();
    let mut w = Worker::start_with_token(&pamd.url, &token, "h1", &toml).unwrap();
    wait_online(&pamd, "h1").await;
    let names = |caps: &Value| -> Vec<String> {
        caps["providers"]
            .as_array()
            .map(|ps| {
                ps.iter()
                    .filter_map(|p| p["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    let before = host(&pamd, "h1").await["status"]["capabilities"].clone();
    assert!(!names(&before).contains(&"claude".to_string()), "{before}");

    std::fs::write(&script, "#!/bin/sh\necho 'claude-code 3.0.1'\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pid = w.pid().unwrap().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let caps = eventually(T, "claude reported after SIGHUP", || async {
        let caps = host(&pamd, "h1").await["status"]["capabilities"].clone();
        names(&caps).contains(&"claude".to_string()).then_some(caps)
    })
    .await;
    assert!(
        caps["providers"]
            .as_array()
            .unwrap()
            .contains(&json!({"name": "claude", "version": "3.0.1"})),
        "{caps}"
    );
    assert!(w.exited().is_none(), "SIGHUP must not end the worker");
}
