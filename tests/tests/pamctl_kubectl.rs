//! pamctl at kubectl parity, through the real pamctl binary against a real
//! pamd on real PostgreSQL: five failures a kubectl user met (each test
//! fails on the pamctl before the fix) and kubectl's `get`, `describe`,
//! `delete`, `wait` and `version` habits.

use std::path::Path;
use std::time::{Duration, Instant};

use pam_tests::{fails, ok, Pamd, PamdOptions};

const TREE: &str = r#"apiVersion: pam.dev/v1
kind: Project
metadata: {name: demo}
spec: {}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: release, project: demo, labels: {tier: plan}}
spec: {type: milestone, title: Release}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: build, project: demo, labels: {tier: be, app.kubernetes.io/name: web}}
spec: {title: Build, parent: release}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: ui, project: demo}
spec: {type: subtask, title: UI, parent: build}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: hello, project: demo}
spec: {title: Hello}
"#;

/// A pending run of `hello` that no host will take (none exist).
fn run(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {name}, project: demo}}\nspec:\n  task: hello\n  provider: claude\n  prompt: hi\n  cwd: /tmp\n{extra}"
    )
}

async fn pamd_with_tree() -> Pamd {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    pamd
}

fn demo(pamd: &Pamd, args: &[&str]) -> std::process::Output {
    let mut all = vec!["-p", "demo"];
    all.extend_from_slice(args);
    pamd.pamctl(&all)
}

fn write(dir: &Path, rel: &str, text: &str) -> String {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

/// Filters for ages, ids and times, and table spacing (which follows the
/// width of the age column).
fn settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.add_filter(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        "[UID]",
    );
    s.add_filter(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)",
        "[TIME]",
    );
    s.add_filter(r"\b\d+(s|m|h|d)\d*(s|m|h)?\b", "[AGE]");
    s.add_filter(r"resourceVersion: '\d+'", "resourceVersion: '[RV]'");
    s.add_filter(r" {2,}", "   ");
    s
}

#[tokio::test]
async fn a1_logs_of_a_run_that_does_not_exist_says_so() {
    let pamd = pamd_with_tree().await;
    let err = fails(&demo(&pamd, &["logs", "nope"]), 3);
    assert_eq!(
        err,
        "error: 404 not_found: run \"nope\" not found in project \"demo\"\n"
    );
    // A run that exists but has not started yet gets the hint.
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&run("r1", ""))));
    let err = fails(&demo(&pamd, &["logs", "r1"]), 3);
    assert_eq!(
        err,
        "error: 404 not_found: run \"r1\" has no log: it never started\nhint: follow it with `pamctl logs -f r1`\n"
    );
}

#[tokio::test]
async fn a2_delete_f_deletes_children_before_their_project() {
    let pamd = pamd_with_tree().await;
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&run("r1", ""))));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let mut docs = TREE.split("---\n");
    write(dir, "a-project.yaml", docs.next().unwrap());
    write(dir, "b-tasks.yaml", &docs.collect::<Vec<_>>().join("---\n"));
    write(dir, "c-runs.yaml", &run("r1", ""));
    let d = dir.display().to_string();
    let out = ok(&demo(&pamd, &["delete", "-f", &d]));
    assert_eq!(
        out,
        "demo/run.pam.dev/r1 deleted\n\
         demo/task.pam.dev/ui deleted\n\
         demo/task.pam.dev/build deleted\n\
         demo/task.pam.dev/release deleted\n\
         demo/task.pam.dev/hello deleted\n\
         project.pam.dev/demo deleted\n"
    );
    assert_eq!(ok(&pamd.pamctl(&["get", "projects", "-o", "name"])), "");
    // Gone now: an error per object (exit 3), unless --ignore-not-found.
    let again = demo(&pamd, &["delete", "-f", &d]);
    let err = fails(&again, 3);
    assert!(err.contains("404 not_found"), "{err}");
    assert_eq!(String::from_utf8_lossy(&again.stdout), "");
    let quiet = demo(&pamd, &["delete", "-f", &d, "--ignore-not-found"]);
    assert_eq!(ok(&quiet), "");
    assert_eq!(String::from_utf8_lossy(&quiet.stderr), "");
}

#[tokio::test]
async fn a3_wait_for_a_phase_a_failed_run_cannot_reach_ends_at_once() {
    // Dispatch timeouts fire once pamd has watched the fleet for a full
    // offline window (OQ-15): a short one.
    let pamd = Pamd::start(PamdOptions {
        config_toml: pam_tests::worker::FAST_PAMD_TOML.to_string(),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    // No host exists: the run fails (no_eligible_host) once that window
    // and its own 1 s timeout have passed, and is never restarted.
    let r7 = run(
        "r7",
        "  dispatchTimeoutSeconds: 1\n  restartPolicy: {maxAttempts: 3}\n",
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&r7)));
    let out = ok(&demo(
        &pamd,
        &["wait", "run/r7", "--for=phase=failed", "--timeout", "1m"],
    ));
    assert_eq!(out, "run.pam.dev/r7 condition met\n");
    let started = Instant::now();
    let waited = demo(
        &pamd,
        &["wait", "run/r7", "--for=phase=exited", "--timeout", "1m"],
    );
    let err = fails(&waited, 1);
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "waited {:?}",
        started.elapsed()
    );
    // no_eligible_host or dispatch_timeout: neither is ever restarted.
    assert!(
        err.starts_with(
            "error: 1 object(s) can never meet --for=phase=exited\n\
             error: run.pam.dev/r7 ended in phase \"failed\" (failureReason "
        ),
        "{err}"
    );
    assert!(err.ends_with("; not restarted)\n"), "{err}");
    // A typo in the phase is refused up front.
    let err = fails(&demo(&pamd, &["wait", "run/r7", "--for=phase=exitted"]), 2);
    assert!(err.contains("a run has no phase \"exitted\""), "{err}");
}

#[tokio::test]
async fn a5_run_start_takes_the_exec_command_after_dashes() {
    let pamd = pamd_with_tree().await;
    let args = [
        "run",
        "start",
        "--task",
        "hello",
        "--provider",
        "exec",
        "--cwd",
        "/tmp",
        "--name",
    ];
    let mut no_cmd = args.to_vec();
    no_cmd.push("r2");
    let err = fails(&demo(&pamd, &no_cmd), 2);
    assert!(
        err.starts_with("error: invalid run: spec.command: missing required field for provider exec, expected the argv to run (a non-empty list)\n"),
        "{err}"
    );
    assert_eq!(ok(&demo(&pamd, &["get", "runs", "-o", "name"])), "");
    let mut with_cmd = args.to_vec();
    with_cmd.extend(["r2", "--", "cat", "-n"]);
    assert_eq!(ok(&demo(&pamd, &with_cmd)), "demo/run.pam.dev/r2 created\n");
    let mut repeated = args.to_vec();
    repeated.extend([
        "r3",
        "--command",
        "sh",
        "--command",
        "-c",
        "--command",
        "echo hi",
    ]);
    ok(&demo(&pamd, &repeated));
    let cmds = ok(&demo(
        &pamd,
        &[
            "get",
            "runs",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.spec.command}{\"\\n\"}{end}",
            "--sort-by",
            ".metadata.name",
        ],
    ));
    assert_eq!(
        cmds,
        "r2=[\"cat\",\"-n\"]\nr3=[\"sh\",\"-c\",\"echo hi\"]\n"
    );
}

#[tokio::test]
async fn get_forms_outputs_and_columns() {
    let pamd = pamd_with_tree().await;
    let runs = format!("{}---\n{}", run("r1", ""), run("r2", ""));
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&runs)));
    // A loop pass gives each pending run its REASON; wait for
    // it, so the table below is the same every time.
    pam_tests::eventually(
        Duration::from_secs(30),
        "the runs' Scheduled conditions",
        || async {
            let v = pamd.get("/api/v1/projects/demo/runs").await.ok()?;
            let items = v["items"].as_array()?;
            let scheduled = |r: &serde_json::Value| {
                r["status"]["conditions"]
                    .as_array()
                    .is_some_and(|cs| cs.iter().any(|c| c["type"] == "Scheduled"))
            };
            (items.len() == 2 && items.iter().all(scheduled)).then_some(())
        },
    )
    .await;
    let s = settings();
    // KIND/NAME, several names, several kinds.
    assert_eq!(
        ok(&demo(
            &pamd,
            &["get", "task/build", "run/r1", "task/ui", "-o", "name"]
        )),
        "task/build\ntask/ui\nrun/r1\n"
    );
    assert_eq!(
        ok(&demo(&pamd, &["get", "task", "ui", "build", "-o", "name"])),
        "task/ui\ntask/build\n"
    );
    s.bind(|| {
        insta::assert_snapshot!(ok(&demo(&pamd, &["get", "runs,tasks", "--sort-by=.metadata.name"])), @r"
        NAME   PHASE   ATTEMPT   HOST   PROVIDER   REASON   AGE
        run/r1   pending   1   <none>   claude   Unschedulable   [AGE]
        run/r2   pending   1   <none>   claude   Unschedulable   [AGE]

        NAME   TYPE   STATUS   PARENT   AGE
        task/build   task   todo   release   [AGE]
        task/hello   task   todo   <none>   [AGE]
        task/release   milestone   todo   <none>   [AGE]
        task/ui   subtask   todo   build   [AGE]
        ");
    });
    // One name missing among several: the others print, then the error.
    let mixed = demo(&pamd, &["get", "task", "build", "nope", "-o", "name"]);
    assert_eq!(
        fails(&mixed, 3),
        "error: 404 not_found: task \"nope\" not found in project \"demo\"\n"
    );
    assert_eq!(String::from_utf8_lossy(&mixed.stdout), "task/build\n");
    // jsonpath: a field of one object, a list's names, a range.
    assert_eq!(
        ok(&demo(
            &pamd,
            &["get", "task/build", "-o", "jsonpath={.spec.parent}"]
        )),
        "release"
    );
    assert_eq!(
        ok(&demo(
            &pamd,
            &[
                "get",
                "tasks",
                "--sort-by",
                "{.metadata.name}",
                "-o",
                "jsonpath={.items[*].metadata.name}"
            ]
        )),
        "build hello release ui"
    );
    assert_eq!(
        ok(&demo(
            &pamd,
            &[
                "get",
                "tasks",
                "-o",
                r#"jsonpath={range .items[?(@.spec.type=="milestone")]}{.metadata.name}{"\n"}{end}"#
            ]
        )),
        "release\n"
    );
    // custom-columns, --no-headers, --sort-by, labels.
    s.bind(|| {
        insta::assert_snapshot!(ok(&demo(&pamd, &["get", "tasks", "-o", "custom-columns=TITLE:.spec.title,TYPE:.spec.type,PARENT:.spec.parent", "--sort-by=.spec.title"])), @r"
        TITLE   TYPE   PARENT
        Build   task   release
        Hello   task   <none>
        Release   milestone   <none>
        UI   subtask   build
        ");
        insta::assert_snapshot!(ok(&demo(&pamd, &["get", "tasks", "--sort-by=.metadata.name", "--no-headers", "--show-labels", "-L", "tier,app.kubernetes.io/name"])), @r"
        build   task   todo   release   [AGE]   be   web   app.kubernetes.io/name=web,tier=be
        hello   task   todo   <none>   [AGE]   <none>
        release   milestone   todo   <none>   [AGE]   plan   tier=plan
        ui   subtask   todo   build   [AGE]   <none>
        ");
    });
    let header = ok(&demo(
        &pamd,
        &["get", "tasks", "-L", "tier", "--show-labels"],
    ));
    assert!(
        header.lines().next().unwrap().ends_with("   TIER   LABELS"),
        "{header}"
    );
    // describe KIND/NAME.
    let page = ok(&demo(&pamd, &["describe", "task/build", "run/r1"]));
    assert!(
        page.starts_with("Name:             build\nKind:             Task\n"),
        "{page}"
    );
    assert!(
        page.contains("\n\nName:             r1\nKind:             Run\n"),
        "{page}"
    );
    // Bad output formats and paths are usage errors.
    let err = fails(&demo(&pamd, &["get", "tasks", "-o", "xml"]), 2);
    assert!(err.contains("unknown output format \"xml\""), "{err}");
    let err = fails(&demo(&pamd, &["get", "tasks", "--sort-by", ".a["]), 2);
    assert!(err.contains("--sort-by"), "{err}");
}

#[tokio::test]
async fn delete_all_ignore_not_found_and_version() {
    let pamd = pamd_with_tree().await;
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&run("r1", ""))));
    // --all without a terminal needs --yes and deletes nothing.
    let err = fails(&demo(&pamd, &["delete", "tasks", "--all"]), 2);
    assert!(
        err.starts_with("error: --all deletes 4 object(s) (and, by cascade, everything in or below them): demo/task.pam.dev/"),
        "{err}"
    );
    assert!(err.contains("hint: pass --yes"), "{err}");
    assert_eq!(
        ok(&demo(&pamd, &["get", "tasks", "-o", "name"]))
            .lines()
            .count(),
        4
    );
    // Go durations: 1m30s.
    assert_eq!(
        ok(&demo(
            &pamd,
            &[
                "wait",
                "run/r1",
                "--for=phase=pending",
                "--timeout",
                "1m30s"
            ]
        )),
        "run.pam.dev/r1 condition met\n"
    );
    let out = ok(&demo(&pamd, &["delete", "tasks", "--all", "--yes"]));
    let lines: Vec<&str> = out.lines().collect();
    // Deepest first; the two roots in the server's order.
    assert_eq!(
        lines[..2],
        [
            "demo/task.pam.dev/ui deleted",
            "demo/task.pam.dev/build deleted"
        ]
    );
    let mut roots = lines[2..].to_vec();
    roots.sort();
    assert_eq!(
        roots,
        [
            "demo/task.pam.dev/hello deleted",
            "demo/task.pam.dev/release deleted"
        ]
    );
    // hello's run went with it.
    assert_eq!(ok(&demo(&pamd, &["get", "runs", "-o", "name"])), "");
    let gone = demo(&pamd, &["delete", "run/r1", "task/hello"]);
    let err = fails(&gone, 3);
    assert_eq!(err.lines().count(), 2, "{err}");
    let out = ok(&demo(
        &pamd,
        &["delete", "run/r1", "task/hello", "--ignore-not-found"],
    ));
    assert_eq!(out, "");
    // version: the client's and the server's.
    let v = ok(&pamd.pamctl(&["version"]));
    let want = format!(
        "Client Version: {0}\nServer Version: {0} (API pam.dev/v1, schema ",
        env!("CARGO_PKG_VERSION")
    );
    assert!(v.starts_with(&want), "{v}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&pamd.pamctl(&["version", "-o", "json"]))).unwrap();
    assert_eq!(json["clientVersion"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(json["serverVersion"]["name"], "pamd");
    // --client never asks the server.
    let offline = pamd.pamctl(&["--server", "http://127.0.0.1:9", "version", "--client"]);
    assert_eq!(
        ok(&offline),
        format!("Client Version: {}\n", env!("CARGO_PKG_VERSION"))
    );
}
