//! A worker's own labels end to end, with a real pamd and two real workers: a
//! worker chooses its own labels, so what it reports lives under
//! `worker.pam.dev/` and never satisfies a selector on the labels an operator
//! sets. A worker reporting `secure=true` does not get a run (and its Secret)
//! targeted at `secure: "true"`; that run waits until an operator labels a host
//! `secure=true` in a Host manifest, then runs there. A selector naming
//! `worker.pam.dev/secure` is how an operator opts in to trusting the report.

use std::path::Path;
use std::time::Duration;

use pam_tests::worker::{
    apply, claude_printing_env, create_worker_token, fast_pamd, host, project_yaml, run,
    wait_online, wait_phase, Worker, FAST_WORKER_TOML,
};
use pam_tests::{eventually, fails, ok};

const T: Duration = Duration::from_secs(30);

fn secret_yaml(value: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: keys\n  project: e2e\nspec:\n  stringData:\n    TOKEN: {value}\n")
}

/// A claude run (the fake provider prints `API_KEY`) targeted at
/// `selector`, with `API_KEY` from the Secret when `secret` is set.
fn run_yaml(name: &str, cwd: &str, selector: &str, secret: bool) -> String {
    let env = if secret {
        "  env:\n  - name: API_KEY\n    valueFrom:\n      secretKeyRef: {name: keys, key: TOKEN}\n"
    } else {
        ""
    };
    format!(
        "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  task: t1\n  provider: claude\n  prompt: go\n  cwd: {cwd:?}\n  target:\n    selector: {selector}\n{env}"
    )
}

fn host_yaml(name: &str, label_key: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Host\nmetadata:\n  name: {name}\n  labels:\n    {label_key}: \"true\"\nspec:\n  platform: linux\n")
}

/// Every file under `dir`, as text (lossy), with its path.
fn files_under(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else if let Ok(bytes) = std::fs::read(&p) {
            out.push((
                p.display().to_string(),
                String::from_utf8_lossy(&bytes).into_owned(),
            ));
        }
    }
    out
}

/// The secret value is nowhere on worker `w`: not in its log (at trace
/// level) and in no file of its data dir (run logs, outbox, env files).
fn assert_never_received(w: &Worker, value: &str) {
    assert!(!w.log().contains(value), "{} logged the value", w.name);
    for (path, text) in files_under(&w.data_dir) {
        assert!(!text.contains(value), "{path} holds the value");
    }
}

#[tokio::test]
async fn a_self_reported_label_does_not_satisfy_an_operator_selector() {
    let value = format!("pamsecret{}", uuid::Uuid::new_v4().simple());
    let pamd = fast_pamd().await;
    let provider = claude_printing_env("API_KEY");
    // A reports secure=true for itself; B reports nothing.
    let token_a = create_worker_token(&pamd, "box-a").await.unwrap();
    let toml_a = format!("{FAST_WORKER_TOML}{provider}[labels]\nsecure = \"true\"\n");
    let a = Worker::start_logging(&pamd.url, &token_a, "box-a", &toml_a, "trace").unwrap();
    let token_b = create_worker_token(&pamd, "box-b").await.unwrap();
    let toml_b = format!("{FAST_WORKER_TOML}{provider}");
    let b = Worker::start_with_token(&pamd.url, &token_b, "box-b", &toml_b).unwrap();
    wait_online(&pamd, "box-a").await;
    wait_online(&pamd, "box-b").await;

    // A's report is shown, and selects, in the worker's namespace only.
    let shown = host(&pamd, "box-a").await;
    assert_eq!(
        shown["status"]["labels"],
        serde_json::json!({"worker.pam.dev/secure": "true"}),
        "{shown}"
    );
    assert!(shown["spec"].get("labels").is_none(), "{shown}");
    assert_eq!(
        ok(&pamd.pamctl(&["get", "hosts", "-l", "secure=true", "-o", "name"])),
        ""
    );
    assert_eq!(
        ok(&pamd.pamctl(&[
            "get",
            "hosts",
            "-l",
            "worker.pam.dev/secure=true",
            "-o",
            "name"
        ])),
        "host/box-a\n"
    );

    apply(
        &pamd,
        &format!("{}---\n{}", project_yaml(), secret_yaml(&value)),
    );
    let cwd_a = a.tmp().display().to_string();
    // The targeted run first: it is the older pending run, so A would
    // claim it before the next one if its report matched.
    apply(
        &pamd,
        &run_yaml("secure-run", &cwd_a, "{secure: \"true\"}", true),
    );
    // An operator who trusts A's report says so by the namespaced key.
    apply(
        &pamd,
        &run_yaml(
            "trusted",
            &cwd_a,
            "{worker.pam.dev/secure: \"true\"}",
            false,
        ),
    );
    let trusted = wait_phase(&pamd, "trusted", "exited", T).await;
    assert_eq!(trusted["status"]["host"], "box-a", "{trusted}");
    // A claimed the younger run, so it passed over the older one: claims
    // take matching runs oldest first. The targeted run is still pending
    // and on no host.
    let waiting = run(&pamd, "secure-run").await;
    assert_eq!(waiting["status"]["phase"], "pending", "{waiting}");
    assert!(waiting["status"].get("host").is_none(), "{waiting}");
    assert_never_received(&a, &value);

    // An operator label is an operator's: the worker's namespace is
    // refused in a Host manifest.
    let refused = fails(
        &pamd.pamctl_stdin(
            &["apply", "-f", "-"],
            Some(&host_yaml("box-b", "worker.pam.dev/secure")),
        ),
        3,
    );
    assert!(refused.contains("worker.pam.dev/"), "{refused}");
    let refused = fails(
        &pamd.pamctl(&["label", "host", "box-b", "worker.pam.dev/secure=true"]),
        3,
    );
    assert!(refused.contains("worker.pam.dev/"), "{refused}");
    assert_eq!(run(&pamd, "secure-run").await["status"]["phase"], "pending");

    // The operator labels B secure=true: the run goes to B, Secret and all.
    apply(&pamd, &host_yaml("box-b", "secure"));
    let done = wait_phase(&pamd, "secure-run", "exited", T).await;
    assert_eq!(done["status"]["host"], "box-b", "{done}");
    let want = format!("API_KEY={value}");
    eventually(T, "the value in secure-run's output", || async {
        let out = pamd.pamctl(&["logs", "secure-run", "-p", "e2e"]);
        String::from_utf8_lossy(&out.stdout)
            .contains(&want)
            .then_some(())
    })
    .await;
    assert_never_received(&a, &value);
    drop(b);
}
