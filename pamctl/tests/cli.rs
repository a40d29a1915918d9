//! pamctl as a process: offline verbs (validate, completion, help), config
//! errors, and exit-code plumbing.
//!
//! Tests marked STUB talk to `Stub` (common/mod.rs): canned HTTP, not
//! pamd.

mod common;

use std::io::Write;
use std::net::TcpListener;
use std::process::Stdio;

use common::{Env, Run, Stub};

const PROJECT: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: web\nspec: {}\n";
const TASKS: &str = "\
apiVersion: pam.dev/v1
kind: Task
metadata:
  name: release-1
  project: web
spec:
  type: milestone
  title: Release 1
---
apiVersion: pam.dev/v1
kind: Task
metadata:
  name: build
  project: web
spec:
  title: Build
  parent: release-1
";

#[test]
fn help_documents_exit_codes() {
    let r = Env::new().run(&["--help"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains("Exit codes:"), "{}", r.stdout);
    for code in [
        "  0  success",
        "  1  diff found changes",
        "  2  usage error",
        "  3  the server refused",
        "  4  the server could not be reached",
        "  5  the server failed",
    ] {
        assert!(r.stdout.contains(code), "missing {code:?} in\n{}", r.stdout);
    }
}

#[test]
fn usage_errors_exit_2() {
    let env = Env::new();
    let r = env.run(&["frobnicate"]);
    assert_eq!(r.code, 2);
    let r = env.run(&["get", "pods"]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        "error: unknown kind \"pods\"\nhint: kinds: project|projects|proj, host|hosts|ho, secret|secrets|sec, task|tasks|tk, run|runs|rn, schedule|schedules|sch, source|sources|src, webhook|webhooks|wh, role|roles|ro\n"
    );
    let r = env.run(&["get", "tasks"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: no project given\nhint: pass -p/--project P"),
        "{}",
        r.stderr
    );
    env.write("m.yaml", PROJECT);
    let r = env.run(&["apply", "-f", "m.yaml", "--prune"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .starts_with("error: --prune needs -l SELECTOR or --applyset NAME\n"),
        "{}",
        r.stderr
    );
}

#[test]
fn validate_a_good_tree() {
    let env = Env::new();
    env.write("tree/project.yaml", PROJECT);
    env.write("tree/web/tasks.yml", TASKS);
    env.write("tree/README.md", "not a manifest");
    let r = env.run(&["validate", "-f", "tree", "-R"]);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (0, "3 objects valid\n", "")
    );
    // Without -R the subdirectory is not read.
    let r = env.run(&["validate", "-f", "tree"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "1 object valid\n"));
    // stdin
    let mut child = env
        .cmd(&["validate", "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(PROJECT.as_bytes())
        .unwrap();
    let r = Run::from(child.wait_with_output().unwrap());
    assert_eq!((r.code, r.stdout.as_str()), (0, "1 object valid\n"));
}

#[test]
fn validate_prints_positioned_errors() {
    let env = Env::new();
    env.write(
        "bad/a-tasks.yaml",
        &format!(
            "{PROJECT}---\n{}",
            TASKS.replace("parent: release-1", "parent: nowhere")
        ),
    );
    env.write("bad/b-run.yaml", "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: build-1\n  project: web\nspec:\n  task: build\n  provider: vim\n  cwd: /src\n");
    let r = env.run(&["validate", "-f", "bad"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(r.stdout, "");
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "error: bad/a-tasks.yaml: document 2, line 23, column 11: spec.parent: no task \"nowhere\" in project \"web\", expected the name of a Task in this batch or already stored in project \"web\"",
            "error: bad/b-run.yaml: document 0, line 8, column 13: spec.provider: unknown variant `vim`, expected one of `claude`, `codex`, `gemini`, `grok`, `exec`",
            "hint: 2 errors in 2 file(s); nothing was sent to a server",
        ]
    );
}

/// Hostile manifests are errors with file and line, never an
/// abort (deep nesting overflowed pamctl's stack) or a memory blow-up (an
/// alias bomb).
#[test]
fn validate_refuses_hostile_input_with_positions() {
    let env = Env::new();
    let deep = format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: a, project: web}}\nspec: {{title: A}}\nx:\n{}a\n",
        "- ".repeat(100_000)
    );
    env.write("hostile/deep.yaml", &deep);
    let mut laughs = String::from(
        "kind: Task\nx:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for w in ["a", "b", "c", "d", "e", "f", "g", "h", "i"].windows(2) {
        let items = vec![format!("*{}", w[0]); 10].join(", ");
        laughs.push_str(&format!("  {}: &{} [{items}]\n", w[1], w[1]));
    }
    env.write("hostile/laughs.yaml", &laughs);
    env.write(
        "hostile/nul.yaml",
        &format!(
            "{PROJECT}---\n{}",
            TASKS.replace("title: Build", "title: \"Bu\\0ild\"")
        ),
    );
    let started = std::time::Instant::now();
    let r = env.run(&["validate", "-f", "hostile"]);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert_eq!(r.code, 1, "{}", r.stderr);
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "error: hostile/deep.yaml: document 0, line 6, column 127: nesting deeper than 64 levels, expected at most 64 mappings and sequences inside one another",
            "error: hostile/laughs.yaml: document 0, line 6, column 38: aliases expand to more than 10023 nodes, expected at most 10000 more than the file writes out",
            "error: hostile/nul.yaml: document 2, line 22, column 10: spec.title: must not contain NUL (\\0) characters, expected text without them",
            "hint: 3 errors in 3 file(s); nothing was sent to a server",
        ]
    );
}

#[test]
fn nothing_listening_exits_4_with_a_hint() {
    // A port that was free a moment ago: bind, read it, close.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let env = Env::new();
    let server = format!("http://127.0.0.1:{port}");
    let r = env.run(&["--server", &server, "get", "hosts"]);
    assert_eq!(r.code, 4, "{}", r.stderr);
    let first = r.stderr.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("error: cannot reach the server at {server}: ")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("\nhint: is pamd running? start it with `pamd --local-worker` (or point --server / PAM_SERVER at one)\n"), "{}", r.stderr);
    assert_eq!(r.stdout, "");
    // The same through PAM_SERVER.
    let r = Run::from(
        env.cmd(&["get", "hosts"])
            .env("PAM_SERVER", &server)
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 4);
}

#[test]
fn bad_config_files_are_usage_errors() {
    let env = Env::new();
    env.write(
        ".config/pam/config.yaml",
        "current-context: nope\ncontexts: [{name: a, server: 'http://x'}]\n",
    );
    let r = env.run(&["get", "hosts"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("error: no context \"nope\" in "),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.ends_with("hint: known contexts: a\n"),
        "{}",
        r.stderr
    );
}

// ---------------------------------------------------------------- STUB
// ---------------------------------------------------------------- STUB

#[test]
fn stub_401_exits_3_with_the_token_hint_and_admin_token_is_sent() {
    let stub = Stub::start(vec![(
        401,
        r#"{"error":{"code":"unauthorized","message":"bad token"}}"#,
    )]);
    let env = Env::new();
    env.write(".local/share/pam/admin.token", "pam_local_admin\n");
    let r = env.run(&["--server", &stub.url, "get", "hosts"]);
    assert_eq!(r.code, 3, "{}", r.stderr);
    let admin = env.path().join(".local/share/pam/admin.token");
    assert_eq!(
        r.stderr,
        format!(
            "error: 401 unauthorized: bad token\nhint: the token in {0} was refused; pass --token or set PAM_TOKEN; a local pamd writes {0}\n",
            admin.display()
        )
    );
    let (what, _, auth) = stub.next();
    assert_eq!(
        (what.as_str(), auth.as_str()),
        ("GET /api/v1/hosts", "Bearer pam_local_admin")
    );
}

#[test]
fn stub_422_prints_every_display_line_and_5xx_exits_5() {
    let stub = Stub::start(vec![
        (
            422,
            r#"{"error":{"code":"invalid","message":"2 problems"},"errors":[{"display":"a.yaml: document 0, line 3, column 9: metadata.name: bad"},{"display":"a.yaml: document 1: spec: missing"}]}"#,
        ),
        (
            500,
            r#"{"error":{"code":"internal","message":"internal error"}}"#,
        ),
    ]);
    let env = Env::new();
    env.write("a.yaml", PROJECT);
    let r = env.run(&[
        "--server", &stub.url, "--token", "pam_t", "apply", "-f", "a.yaml",
    ]);
    assert_eq!(r.code, 3);
    assert_eq!(
        r.stderr,
        "error: 422 invalid: 2 problems\nerror: a.yaml: document 0, line 3, column 9: metadata.name: bad\nerror: a.yaml: document 1: spec: missing\n"
    );
    let (what, body, _) = stub.next();
    assert_eq!(what, "POST /api/v1/apply");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["files"][0]["name"], "a.yaml");
    assert_eq!(body["files"][0]["content"], PROJECT);
    assert_eq!(
        (body["dryRun"].as_bool(), body["prune"].as_bool()),
        (Some(false), Some(false))
    );
    let r = env.run(&["--server", &stub.url, "--token", "pam_t", "get", "projects"]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (5, "error: 500 internal: internal error\n")
    );
}

#[test]
fn stub_diff_exits_1_on_changes_and_0_without() {
    let stub = Stub::start(vec![
        (
            200,
            r#"{"items":[{"kind":"Project","name":"web","action":"update","live":{"spec":{"archived":false}},"desired":{"spec":{"archived":true}}}]}"#,
        ),
        (
            200,
            r#"{"items":[{"kind":"Project","name":"web","action":"unchanged","live":{"spec":{}},"desired":{"spec":{}}}]}"#,
        ),
    ]);
    let env = Env::new();
    env.write("a.yaml", PROJECT);
    let r = env.run(&[
        "--server", &stub.url, "--token", "t", "diff", "-f", "a.yaml",
    ]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert!(
        r.stdout.contains("-  archived: false\n+  archived: true\n"),
        "{}",
        r.stdout
    );
    let r = env.run(&[
        "--server", &stub.url, "--token", "t", "diff", "-f", "a.yaml",
    ]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
}

#[test]
fn stub_token_create_prints_only_the_token_on_stdout() {
    let stub = Stub::start(vec![(
        200,
        r#"{"id":"tok-1","name":"ci","kind":"operator","token":"pam_secret"}"#,
    )]);
    let env = Env::new();
    let r = env.run(&[
        "--server", &stub.url, "--token", "t", "token", "create", "ci",
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "pam_secret\n");
    assert!(r.stderr.contains("not shown again"), "{}", r.stderr);
    assert!(!r.stderr.contains("pam_secret"));
    let (what, body, _) = stub.next();
    assert_eq!(
        (what.as_str(), body.as_str()),
        ("POST /api/v1/tokens", r#"{"name":"ci"}"#)
    );
}
