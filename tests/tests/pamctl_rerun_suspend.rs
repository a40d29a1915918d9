//! The verbs on stored objects through pamctl against a real pamd:
//! `rerun RUN` (a stopped run re-run as `RUN-r1` with the same spec, not
//! stopped; a run not finished refused), and `suspend`/`resume` of a
//! directory Source and of a Schedule (other kinds refused).

use std::time::Duration;

use pam_tests::{eventually, fails, ok, Pamd, PamdOptions};
use serde_json::Value;

const TREE: &str = r#"apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart, project: web}
spec: {title: Cart}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: r1, project: web, labels: {team: shop}}
spec: {task: cart, provider: claude, prompt: hi, cwd: /tmp, stopped: true}
---
apiVersion: pam.dev/v1
kind: Schedule
metadata: {name: nightly, project: web}
spec:
  schedule: "30 2 * * *"
  runTemplate: {task: cart, provider: claude, prompt: hi, cwd: /tmp}
"#;

fn json(pamd: &Pamd, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    serde_json::from_str(&ok(&pamd.pamctl(&all))).unwrap()
}

#[tokio::test]
async fn rerun_and_suspend_resume_through_pamctl() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("p.yaml"),
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: docs}\nspec: {}\n",
    )
    .unwrap();
    let pamd = Pamd::start(PamdOptions {
        config_toml: format!(
            "[sources]\nallowed_roots = [{:?}]\n",
            std::env::temp_dir().display().to_string()
        ),
        ..Default::default()
    })
    .await
    .unwrap();
    let source = format!(
        "apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: docs}}\nspec: {{path: '{}', interval: 1h, projects: [docs]}}\n",
        dir.path().display()
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&format!("{TREE}---\n{source}"))));

    // A run declared stopped is stopped by the dispatch pass: finished.
    eventually(Duration::from_secs(20), "r1 stopped", || async {
        (json(&pamd, &["get", "run", "r1", "-p", "web"])["status"]["phase"] == "stopped")
            .then_some(())
    })
    .await;
    let out = ok(&pamd.pamctl(&["rerun", "r1", "-p", "web"]));
    assert_eq!(out, "r1-r1\n");
    let again = json(&pamd, &["get", "run", "r1-r1", "-p", "web"]);
    assert_eq!(again["metadata"]["annotations"]["pam.dev/rerun-of"], "r1");
    assert_eq!(again["metadata"]["labels"]["team"], "shop");
    assert_eq!(again["spec"]["prompt"], "hi");
    assert_ne!(
        again["spec"]["stopped"], true,
        "a re-run is not stopped: {again}"
    );
    // The re-run is pending (no host here): not finished, refused (3).
    let err = fails(&pamd.pamctl(&["rerun", "r1-r1", "-p", "web"]), 3);
    assert!(err.contains("only a finished run can be re-run"), "{err}");

    eventually(Duration::from_secs(20), "docs synced", || async {
        (json(&pamd, &["get", "source", "docs"])["status"]["sync"] == "Synced").then_some(())
    })
    .await;
    let out = ok(&pamd.pamctl(&["suspend", "source", "docs"]));
    assert_eq!(out, "source.pam.dev/docs suspended\n");
    assert_eq!(
        json(&pamd, &["get", "source", "docs"])["spec"]["suspend"],
        true
    );
    let out = ok(&pamd.pamctl(&["resume", "source/docs"]));
    assert_eq!(out, "source.pam.dev/docs resumed\n");
    assert_ne!(
        json(&pamd, &["get", "source", "docs"])["spec"]["suspend"],
        true
    );

    let out = ok(&pamd.pamctl(&["suspend", "schedule", "nightly", "-p", "web"]));
    assert_eq!(out, "schedule.pam.dev/nightly suspended\n");
    let s = json(&pamd, &["get", "schedule", "nightly", "-p", "web"]);
    assert_eq!(s["spec"]["suspend"], true);
    ok(&pamd.pamctl(&["resume", "schedule", "nightly", "-p", "web"]));

    let err = fails(&pamd.pamctl(&["suspend", "run", "r1", "-p", "web"]), 2);
    assert!(err.contains("only a source or a schedule"), "{err}");
    let err = fails(&pamd.pamctl(&["suspend", "source", "nope"]), 3);
    assert!(err.contains("not found"), "{err}");
}
