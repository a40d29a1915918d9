//! kubectl's read-modify-write habits through the real pamctl binary
//! against a real pamd: `label`, `annotate`, `edit` (with a scripted
//! editor), `get -o yaml | apply -f -`, and dynamic shell completion.

use std::path::Path;
use std::process::Output;

use pam_tests::{bin, fails, ok, Pamd, PamdOptions};

const TREE: &str = r#"apiVersion: pam.dev/v1
kind: Project
metadata: {name: demo}
spec: {}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: build, project: demo, labels: {tier: be}}
spec: {title: Build}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: test, project: demo}
spec: {title: Test, parent: build}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: r1, project: demo}
spec: {task: build, provider: claude, prompt: hi, cwd: /tmp}
"#;

async fn pamd_with_tree() -> Pamd {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(TREE)));
    pamd
}

fn demo(pamd: &Pamd, args: &[&str]) -> Output {
    let mut all = vec!["-p", "demo"];
    all.extend_from_slice(args);
    pamd.pamctl(&all)
}

/// pamctl with extra environment (EDITOR, VISUAL).
fn pamctl_env(pamd: &Pamd, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = pamd.isolated(&bin("pamctl"), Some(&pamd.token));
    cmd.args(args).envs(env.iter().copied());
    cmd.output().unwrap()
}

fn jsonpath(pamd: &Pamd, object: &str, path: &str) -> String {
    ok(&demo(
        pamd,
        &["get", object, "-o", &format!("jsonpath={path}")],
    ))
}

#[tokio::test]
async fn label_and_annotate_read_modify_write() {
    let pamd = pamd_with_tree().await;
    let gen_before = jsonpath(&pamd, "task/build", "{.metadata.generation}");
    assert_eq!(
        ok(&demo(
            &pamd,
            &["label", "task", "build", "test", "team=core"]
        )),
        "task.pam.dev/build labeled\ntask.pam.dev/test labeled\n"
    );
    // An existing key keeps its value without --overwrite (exit 2).
    let err = fails(&demo(&pamd, &["label", "task/build", "tier=fe"]), 2);
    assert_eq!(
        err,
        "error: \"tier\" already has a value (be), and --overwrite is false\nhint: pass --overwrite to replace it\n"
    );
    assert_eq!(
        jsonpath(&pamd, "task/build", "{.metadata.labels.tier}"),
        "be"
    );
    ok(&demo(
        &pamd,
        &["label", "task/build", "tier=fe", "--overwrite"],
    ));
    assert_eq!(
        jsonpath(&pamd, "task/build", "{.metadata.labels.tier}"),
        "fe"
    );
    // Same value: nothing to do; removing: `k-`; removing again: a note.
    assert_eq!(
        ok(&demo(&pamd, &["label", "task/build", "tier=fe"])),
        "task.pam.dev/build not labeled\n"
    );
    assert_eq!(
        ok(&demo(&pamd, &["label", "task/build", "tier-"])),
        "task.pam.dev/build labeled\n"
    );
    let again = demo(&pamd, &["label", "task/build", "tier-"]);
    assert_eq!(ok(&again), "task.pam.dev/build not labeled\n");
    assert_eq!(
        String::from_utf8_lossy(&again.stderr),
        "label \"tier\" not found.\n"
    );
    assert_eq!(
        jsonpath(&pamd, "task/build", "{.metadata.labels}"),
        r#"{"team":"core"}"#
    );
    // Labels are metadata: the spec's generation does not move.
    assert_eq!(
        jsonpath(&pamd, "task/build", "{.metadata.generation}"),
        gen_before
    );
    // Annotations take free text; runs and hosts too.
    assert_eq!(
        ok(&demo(
            &pamd,
            &["annotate", "run/r1", "note=needs a retry, maybe"]
        )),
        "run.pam.dev/r1 annotated\n"
    );
    assert_eq!(
        jsonpath(&pamd, "run/r1", "{.metadata.annotations.note}"),
        "needs a retry, maybe"
    );
    let err = fails(&demo(&pamd, &["label", "run/nope", "a=b"]), 3);
    assert!(err.contains("run \"nope\" not found"), "{err}");
    let err = fails(&demo(&pamd, &["label", "run/r1", "bad key=x"]), 2);
    assert!(err.starts_with("error: label key \"bad key\""), "{err}");
}

#[tokio::test]
async fn get_yaml_applies_back_unchanged_and_a_stale_copy_conflicts() {
    let pamd = pamd_with_tree().await;
    let one = ok(&demo(&pamd, &["get", "task", "build", "-o", "yaml"]));
    assert!(
        one.contains("\nstatus:\n") && one.contains("  uid: "),
        "{one}"
    );
    assert_eq!(
        ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&one))),
        "demo/task.pam.dev/build unchanged\n"
    );
    let list = ok(&demo(&pamd, &["get", "tasks,runs", "-o", "yaml"]));
    let mut lines: Vec<String> = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&list)))
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(
        lines,
        [
            "demo/run.pam.dev/r1 unchanged",
            "demo/task.pam.dev/build unchanged",
            "demo/task.pam.dev/test unchanged"
        ]
    );
    let json = ok(&demo(&pamd, &["get", "task", "build", "-o", "json"]));
    assert_eq!(
        ok(&pamd.pamctl_stdin(&["diff", "-f", "-"], Some(&json))),
        ""
    );
    // A change made since the copy was read: its resourceVersion is stale.
    ok(&demo(&pamd, &["label", "task/build", "x=y"]));
    let edited = one.replace("title: Build", "title: Build it");
    let err = fails(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&edited)), 3);
    assert!(err.contains("409 conflict"), "{err}");
    // Its lines stayed where they were: errors point at what the operator sees.
    let bad = one.replace("title: Build", "title: Build\n  colour: red");
    let err = fails(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&bad)), 3);
    let line = one.lines().position(|l| l == "  title: Build").unwrap() + 2;
    assert!(
        err.contains(&format!(
            "error: -: document 0, line {line}, column 3: spec.colour"
        )),
        "{err}"
    );
}

/// An editor script: each run appends the file it was given to `log`,
/// then runs the next of `steps` (a sed script) on it.
fn editor(dir: &Path, steps: &[&str]) -> String {
    let mut script = String::from("#!/bin/sh\nset -e\nn=$(cat \"$0.count\" 2>/dev/null || echo 0)\necho $((n+1)) > \"$0.count\"\ncat \"$1\" >> \"$0.log\"\necho '=====' >> \"$0.log\"\ncase $n in\n");
    for (i, s) in steps.iter().enumerate() {
        script.push_str(&format!("{i}) sed -i '{s}' \"$1\" ;;\n"));
    }
    script.push_str("*) exit 9 ;;\nesac\n");
    let p = dir.join("ed.sh");
    std::fs::write(&p, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

#[tokio::test]
async fn edit_applies_on_save_and_reopens_on_errors() {
    let pamd = pamd_with_tree().await;
    let tmp = tempfile::tempdir().unwrap();
    // Save: the change applies.
    let ed = editor(tmp.path(), &["s/title: Build/title: Build it/"]);
    let out = pamctl_env(
        &pamd,
        &["-p", "demo", "edit", "task/build"],
        &[("EDITOR", &ed)],
    );
    assert_eq!(ok(&out), "demo/task.pam.dev/build edited\n");
    assert_eq!(jsonpath(&pamd, "task/build", "{.spec.title}"), "Build it");
    let shown = std::fs::read_to_string(format!("{ed}.log")).unwrap();
    assert!(shown.contains("  resourceVersion: '"), "{shown}");
    assert!(
        !shown.contains("\nstatus:") && !shown.contains("uid:"),
        "{shown}"
    );

    // An invalid change reopens the file with the error on top; fixing it applies.
    let tmp2 = tempfile::tempdir().unwrap();
    let ed = editor(
        tmp2.path(),
        &[
            "s/title: Build it/title: B2\\n  colour: red/",
            "/colour: red/d",
        ],
    );
    let out = pamctl_env(
        &pamd,
        &["-p", "demo", "edit", "task", "build"],
        &[("VISUAL", &ed)],
    );
    assert_eq!(ok(&out), "demo/task.pam.dev/build edited\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("spec.colour: unknown field"), "{err}");
    let log = std::fs::read_to_string(format!("{ed}.log")).unwrap();
    let second = log.split("=====\n").nth(1).unwrap();
    assert!(second.contains("# error: 422 invalid"), "{second}");
    assert!(second.contains("spec.colour: unknown field"), "{second}");
    assert_eq!(jsonpath(&pamd, "task/build", "{.spec.title}"), "B2");

    // Saved again without fixing: pamctl gives up and keeps the file.
    let tmp3 = tempfile::tempdir().unwrap();
    let ed = editor(
        tmp3.path(),
        &["s/title: B2/title: B3\\n  colour: red/", "s/^$//"],
    );
    let out = pamctl_env(
        &pamd,
        &["-p", "demo", "edit", "task/build"],
        &[("EDITOR", &ed)],
    );
    let err = fails(&out, 1);
    assert!(
        err.contains("error: edit cancelled: the file was saved again without changes"),
        "{err}"
    );
    let kept = err
        .lines()
        .find_map(|l| l.strip_prefix("hint: your changes are in "))
        .unwrap();
    assert!(std::fs::read_to_string(kept)
        .unwrap()
        .contains("colour: red"));
    std::fs::remove_file(kept).unwrap();
    assert_eq!(jsonpath(&pamd, "task/build", "{.spec.title}"), "B2");

    // An unchanged or emptied file cancels.
    for ed in ["true", "truncate -s 0"] {
        let out = pamctl_env(
            &pamd,
            &["-p", "demo", "edit", "task/build"],
            &[("EDITOR", ed)],
        );
        assert_eq!(ok(&out), "");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            "Edit cancelled, no changes made.\n"
        );
    }
    // Renaming is not editing.
    let tmp4 = tempfile::tempdir().unwrap();
    let ed = editor(
        tmp4.path(),
        &["s/name: build/name: build2/", "s/name: build2/name: build/"],
    );
    let out = pamctl_env(
        &pamd,
        &["-p", "demo", "edit", "task/build"],
        &[("EDITOR", &ed)],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("edit changes objects, not which objects"),
        "{err}"
    );
    assert_eq!(
        ok(&demo(&pamd, &["get", "tasks", "-o", "name"]))
            .lines()
            .count(),
        2
    );
}

#[tokio::test]
async fn completion_asks_the_server_for_names() {
    let pamd = pamd_with_tree().await;
    let complete = |words: &[&str]| {
        let mut args = vec!["__complete"];
        args.extend_from_slice(words);
        ok(&pamd.pamctl(&args))
    };
    assert_eq!(
        complete(&["-p", "demo", "get", "task", ""]),
        "build\ntest\n:0\n"
    );
    assert_eq!(complete(&["get", "-p", "demo", "run/"]), "run/r1\n:0\n");
    assert_eq!(complete(&["logs", "--project", "demo", "r"]), "r1\n:0\n");
    assert_eq!(complete(&["-p", ""]), "demo\n:0\n");
    // No project: no names, and no error either.
    assert_eq!(complete(&["get", "task", ""]), ":0\n");
    // The bash script, driven the way bash drives it.
    let dir = bin("pamctl").parent().unwrap().display().to_string();
    let path = format!("{dir}:{}", std::env::var("PATH").unwrap_or_default());
    let line = "pamctl -p demo describe task/b";
    let script = format!(
        "source <(pamctl completion bash)\n\
         COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}\n\
         COMP_WORDS=(pamctl -p demo describe task/b); COMP_CWORD=4\n\
         _pamctl; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    );
    let out = pamctl_env_cmd("bash", &["-c", &script], &pamd, &path);
    assert_eq!(ok(&out), "task/build\n");
    let script = "source <(pamctl completion bash)\n\
         COMP_LINE='pamctl wait run/r1 --for=phase=ex'; COMP_POINT=${#COMP_LINE}\n\
         COMP_WORDS=(pamctl wait run/r1 --for = phase = ex); COMP_CWORD=7\n\
         _pamctl; printf '%s\\n' \"${COMPREPLY[@]}\"";
    let out = pamctl_env_cmd("bash", &["-c", script], &pamd, &path);
    assert_eq!(ok(&out), "exited\n");
}

/// Runs `program` with pamctl's isolated environment and `path` as PATH.
fn pamctl_env_cmd(program: &str, args: &[&str], pamd: &Pamd, path: &str) -> Output {
    let mut cmd = pamd.isolated(Path::new(program), Some(&pamd.token));
    cmd.args(args).env("PATH", path);
    cmd.output().unwrap()
}
