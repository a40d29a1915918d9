//! pamd's side of three pamctl verbs, each through the real pamctl binary
//! (or a plain HTTP client, for what pamctl itself would refuse first)
//! against a real pamd on real PostgreSQL, and with a real pam-worker for
//! host labels:
//! an exec run without a command is refused on the objects path as on the
//! files path, `token list` shows LAST-USED (written at most once a minute),
//! and `get hosts -l` selects on the one label set that targets use.

use std::time::Duration;

use pam_tests::worker::{self, wait_online, Worker, FAST_PAMD_TOML, FAST_WORKER_TOML};
use pam_tests::{eventually, fails, ok, Pamd, PamdOptions};
use serde_json::{json, Value};

const TREE: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: demo}\nspec: {}\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: hello, project: demo}\nspec: {title: Hello}\n";

/// The objects path (`POST /api/v1/apply {"objects": […]}`, what `pamctl
/// run start` sends) refuses an exec run without a command with the files
/// path's words, and nothing is written; the same run through pamctl is
/// refused before it is sent.
#[tokio::test]
async fn an_exec_run_without_a_command_is_refused_on_both_paths() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));

    let run = json!({
        "apiVersion": "pam.dev/v1", "kind": "Run",
        "metadata": {"name": "r2", "project": "demo"},
        "spec": {"task": "hello", "provider": "exec", "cwd": "/tmp"},
    });
    let r = pamd
        .http()
        .post(format!("{}/api/v1/apply", pamd.url))
        .bearer_auth(&pamd.token)
        .json(&json!({ "objects": [run] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 422);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["errors"][0]["path"], "spec.command", "{v}");
    let objects_msg = v["errors"][0]["message"].as_str().unwrap().to_string();
    assert!(
        objects_msg.contains("missing required field for provider exec"),
        "{v}"
    );

    // The files path, through pamctl apply: the same words.
    let file = "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r2, project: demo}\nspec: {task: hello, provider: exec, cwd: /tmp}\n";
    let err = fails(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(file)), 3);
    assert!(err.contains(&objects_msg), "{err}");

    assert_eq!(
        ok(&pamd.pamctl(&["-p", "demo", "get", "runs", "-o", "name"])),
        "",
        "nothing is written"
    );
}

fn token_row(list: &str, name: &str) -> String {
    list.lines()
        .find(|l| l.split_whitespace().nth(1) == Some(name))
        .unwrap_or_else(|| panic!("no token {name} in\n{list}"))
        .to_string()
}

async fn last_used(pamd: &Pamd, name: &str) -> Value {
    let v = pamd.get("/api/v1/tokens").await.unwrap();
    v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap_or_else(|| panic!("no token {name}: {v}"))["lastUsedAt"]
        .clone()
}

/// A used token shows when it was last used; an unused one `<never>`; and
/// a burst of requests within a minute writes `lastUsedAt` once, not once
/// per request.
#[tokio::test]
async fn token_list_shows_last_used() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let ci = ok(&pamd.pamctl(&["token", "create", "ci"]))
        .trim()
        .to_string();
    ok(&pamd.pamctl(&["token", "create", "idle"]));

    let list = ok(&pamd.pamctl(&["token", "list"]));
    assert!(list.lines().next().unwrap().contains("LAST-USED"), "{list}");
    assert!(token_row(&list, "ci").contains("<never>"), "{list}");

    ok(&pamd.pamctl_as(Some(&ci), &["get", "projects"], None));
    let first = eventually(Duration::from_secs(10), "lastUsedAt of ci", || async {
        let v = last_used(&pamd, "ci").await;
        v.is_string().then_some(v)
    })
    .await;
    let list = ok(&pamd.pamctl(&["token", "list"]));
    let row = token_row(&list, "ci");
    assert!(!row.contains("<never>"), "{list}");
    assert!(token_row(&list, "idle").contains("<never>"), "{list}");

    for _ in 0..20 {
        ok(&pamd.pamctl_as(Some(&ci), &["get", "projects"], None));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        last_used(&pamd, "ci").await,
        first,
        "requests within a minute of the last write do not write again"
    );
}

/// Host labels: a Host manifest's `metadata.labels` (examples/hosts.yaml)
/// and the labels a real worker reports (under `worker.pam.dev/`) are one
/// set, which `get hosts -l`, `--show-labels` and a run's target selector
/// all use.
#[tokio::test]
async fn get_hosts_selects_on_the_labels_targets_use() {
    let pamd = Pamd::start(PamdOptions {
        config_toml: FAST_PAMD_TOML.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let hosts = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/hosts.yaml");
    ok(&pamd.pamctl(&["apply", "-f", hosts]));
    assert_eq!(
        ok(&pamd.pamctl(&["get", "hosts", "-l", "os=linux", "-o", "name"])),
        "host/build-linux-1\n"
    );
    assert_eq!(
        ok(&pamd.pamctl(&["get", "hosts", "-l", "os=macos", "-o", "name"])),
        "host/studio-mac\n"
    );

    let token = worker::create_worker_token(&pamd, "box-g").await.unwrap();
    let toml = format!("{FAST_WORKER_TOML}\n[labels]\npool = \"gpu\"\n");
    let _w = Worker::start_with_token(&pamd.url, &token, "box-g", &toml).unwrap();
    wait_online(&pamd, "box-g").await;
    assert_eq!(
        ok(&pamd.pamctl(&[
            "get",
            "hosts",
            "-l",
            "worker.pam.dev/pool=gpu",
            "-o",
            "name"
        ])),
        "host/box-g\n"
    );
    let shown = ok(&pamd.pamctl(&["get", "hosts", "box-g", "--show-labels"]));
    assert!(shown.contains("worker.pam.dev/pool=gpu"), "{shown}");

    // A run whose target selects the worker's pool=gpu goes to that host
    // and exits 0.
    worker::apply(&pamd, &worker::project_yaml());
    let cwd = tempfile::tempdir().unwrap();
    let run = worker::run_yaml(
        "on-gpu",
        cwd.path(),
        &["true".to_string()],
        "  target:\n    selector: {worker.pam.dev/pool: gpu}\n",
    );
    worker::apply(&pamd, &run);
    let done = worker::wait_phase(&pamd, "on-gpu", "exited", Duration::from_secs(30)).await;
    assert_eq!(done["status"]["host"], "box-g", "{done}");
    assert_eq!(done["status"]["exitCode"], 0, "{done}");
}
