//! Apply that merges, end to end: a real pamd on real
//! PostgreSQL and the real pamctl, two tokens (the admin, and `ci`). The
//! admin's `label` survives ci's manifest without labels; another value
//! from ci is refused naming the owner and `--force-conflicts`, which
//! takes the label; `label --force-conflicts` takes it back; `describe`
//! and `get -o yaml` show who set what (the last applier).

use std::process::Output;

use pam_tests::{fails, ok, Pamd, PamdOptions};

const PROJECT: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: demo}\nspec: {}\n";

fn task(labels: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: build, project: demo{labels}}}\nspec: {{title: Build}}\n")
}

fn labels(pamd: &Pamd) -> String {
    ok(&pamd.pamctl(&[
        "-p",
        "demo",
        "get",
        "task/build",
        "-o",
        "jsonpath={.metadata.labels}",
    ]))
}

#[tokio::test]
async fn label_apply_and_force_conflicts_through_pamctl() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(PROJECT)));
    let ci = ok(&pamd.pamctl(&["token", "create", "ci", "--role", "admin"]))
        .trim()
        .to_string();
    let as_ci =
        |args: &[&str], stdin: &str| -> Output { pamd.pamctl_as(Some(&ci), args, Some(stdin)) };
    ok(&as_ci(
        &["apply", "-f", "-"],
        &task(", labels: {team: web}"),
    ));
    ok(&pamd.pamctl(&["-p", "demo", "label", "task", "build", "tier=frontend"]));

    // ci's manifest without labels: its own label goes, the admin's stays.
    ok(&as_ci(&["apply", "-f", "-"], &task("")));
    assert_eq!(labels(&pamd), r#"{"tier":"frontend"}"#);
    let yaml = ok(&pamd.pamctl(&["-p", "demo", "get", "task/build", "-o", "yaml"]));
    assert!(yaml.contains("managedFields:"), "{yaml}");
    assert!(yaml.contains("manager: apply:ci"), "{yaml}");
    assert!(yaml.contains("manager: label:admin"), "{yaml}");
    let describe = ok(&pamd.pamctl(&["-p", "demo", "describe", "task/build"]));
    assert!(
        describe.contains("Last Applied By:  apply:ci"),
        "{describe}"
    );
    assert!(describe.contains("Managed Fields:"), "{describe}");
    // What get -o yaml prints applies back (managedFields is dropped).
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&yaml)));

    // Another value for the admin's label: refused, naming the owner and
    // the way out; nothing written.
    let backend = task(", labels: {tier: backend}");
    let err = fails(&as_ci(&["apply", "-f", "-"], &backend), 3);
    assert!(err.contains("metadata.labels.tier (owned by "), "{err}");
    assert!(err.contains("label:admin-"), "{err}");
    assert!(err.contains("--force-conflicts"), "{err}");
    assert_eq!(labels(&pamd), r#"{"tier":"frontend"}"#);
    // diff says the same; with --force-conflicts, what the forced apply
    // would change.
    let err = fails(&as_ci(&["diff", "-f", "-"], &backend), 3);
    assert!(err.contains("--force-conflicts"), "{err}");
    let forced = as_ci(&["diff", "--force-conflicts", "-f", "-"], &backend);
    let out = String::from_utf8_lossy(&forced.stdout);
    assert!(out.contains("backend"), "{out}");
    assert_eq!(forced.status.code(), Some(1), "a change to show: {out}");
    ok(&as_ci(&["apply", "--force-conflicts", "-f", "-"], &backend));
    assert_eq!(labels(&pamd), r#"{"tier":"backend"}"#);

    // Now ci owns it: the admin's label is refused, then forced.
    let relabel = [
        "-p",
        "demo",
        "label",
        "task",
        "build",
        "tier=edge",
        "--overwrite",
    ];
    let err = fails(&pamd.pamctl(&relabel), 3);
    assert!(err.contains("owned by apply:ci"), "{err}");
    assert!(err.contains("--force-conflicts"), "{err}");
    let mut forced = relabel.to_vec();
    forced.push("--force-conflicts");
    ok(&pamd.pamctl(&forced));
    assert_eq!(labels(&pamd), r#"{"tier":"edge"}"#);
}
