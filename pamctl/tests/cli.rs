//! pamctl as a process: offline verbs (validate, completion, help), config
//! errors, and exit-code plumbing.
//!
//! Tests marked STUB talk to `Stub`, a few lines of canned HTTP on a
//! loopback port. It is NOT pamd and proves nothing about the server: it
//! only checks that pamctl maps status codes and bodies to exit codes and
//! messages. Behaviour against a real pamd belongs in `tests/` (pam-tests)
//! once the server serves `/api/v1`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

struct Env {
    home: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        Env {
            home: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }

    /// pamctl with a clean environment: HOME in a temp dir, no PAM_*.
    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pamctl"));
        c.args(args)
            .current_dir(self.path())
            .env_clear()
            .env("HOME", self.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null());
        c
    }

    fn run(&self, args: &[&str]) -> Run {
        Run::from(self.cmd(args).output().unwrap())
    }
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl From<Output> for Run {
    fn from(o: Output) -> Run {
        Run {
            code: o.status.code().expect("exited"),
            stdout: String::from_utf8(o.stdout).unwrap(),
            stderr: String::from_utf8(o.stderr).unwrap(),
        }
    }
}

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
        "error: unknown kind \"pods\"\nhint: kinds: project|projects|proj, host|hosts|ho, task|tasks|tk, run|runs|rn\n"
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
fn completion_scripts() {
    let env = Env::new();
    for (shell, marker) in [
        ("bash", "complete -F _pamctl pamctl"),
        ("zsh", "#compdef pamctl"),
        ("fish", "complete -c pamctl"),
    ] {
        let r = env.run(&["completion", shell]);
        assert_eq!(r.code, 0, "{shell}: {}", r.stderr);
        assert!(r.stdout.contains(marker), "{shell}: no {marker:?}");
        assert!(r.stdout.contains("pamctl __complete"), "{shell}");
    }
    // The engine itself works offline for verbs, kinds, flags and fields.
    let r = env.run(&["__complete", "get", "ru"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "runs\nrun/\n:2\n"));
    let r = env.run(&["__complete", "explain", "task.spec.p"]);
    assert_eq!(r.stdout, "task.spec.parent\n:2\n");
    // A server that is not there costs nothing but the names.
    let r = env.run(&[
        "__complete",
        "--server",
        "http://127.0.0.1:9",
        "-p",
        "web",
        "get",
        "task",
        "",
    ]);
    assert_eq!(
        (r.code, r.stdout.as_str(), r.stderr.as_str()),
        (0, ":0\n", "")
    );
}

#[test]
fn every_verb_has_examples_in_its_help() {
    let env = Env::new();
    for verb in [
        &["get"][..],
        &["delete"],
        &["run", "start"],
        &["explain"],
        &["label"],
        &["edit"],
        &["version"],
        &["api-resources"],
        &["logs"],
    ] {
        let mut args = verb.to_vec();
        args.push("--help");
        let r = env.run(&args);
        assert_eq!(r.code, 0, "{verb:?}: {}", r.stderr);
        assert!(
            r.stdout.contains("\nExamples:\n  pamctl "),
            "{verb:?}:\n{}",
            r.stdout
        );
    }
}

#[test]
fn offline_verbs_explain_api_resources_version_client() {
    let env = Env::new();
    let r = env.run(&["api-resources"]);
    insta::assert_snapshot!(r.stdout, @r"
    NAME       SHORTNAMES   APIVERSION   NAMESPACED   KIND
    hosts      ho           pam.dev/v1   false        Host
    projects   proj         pam.dev/v1   false        Project
    runs       rn           pam.dev/v1   true         Run
    tasks      tk           pam.dev/v1   true         Task
    ");
    let r = env.run(&["api-resources", "-o", "name"]);
    assert_eq!(r.stdout, "hosts\nprojects\nruns\ntasks\n");
    let r = env.run(&["explain", "task"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    insta::assert_snapshot!(r.stdout.trim_end(), @r"
    KIND:       Task
    VERSION:    pam.dev/v1

    DESCRIPTION:
        A work item (milestone, epic, task, subtask).

    FIELDS:
      apiVersion	<string> -required-
        Always `pam.dev/v1`.
        enum: pam.dev/v1

      kind	<string> -required-
        Always `Task`.
        enum: Task

      metadata	<Object> -required-
        Identity and labels.

      spec	<Object> -required-
        Desired state, operator-owned.

      status	<Object>
        Observed state, set by the controller; never part of a manifest (apply drops it). Read it with `pamctl get KIND NAME -o yaml` or `pamctl describe`.

    ");
    let r = env.run(&["explain", "run.spec", "--recursive"]);
    assert!(
        r.stdout
            .contains("FIELDS:\n  command\t<[]string>\n  cwd\t<string> -required-\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("\n  restartPolicy\t<Object>\n    backoffMaxSeconds\t<integer>\n"),
        "{}",
        r.stdout
    );
    let r = env.run(&["explain", "run.spec.nope"]);
    assert_eq!(r.code, 2);
    let r = env.run(&["version", "--client"]);
    assert_eq!(
        r.stdout,
        format!("Client Version: {}\n", env!("CARGO_PKG_VERSION"))
    );
    let r = env.run(&["version", "--client", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["clientVersion"]["version"], env!("CARGO_PKG_VERSION"));
    assert!(v.get("serverVersion").is_none());
}

#[test]
fn a_server_without_a_scheme_is_named_as_such() {
    let env = Env::new();
    let r = Run::from(
        env.cmd(&["get", "hosts"])
            .env("PAM_SERVER", "127.0.0.1:7811")
            .output()
            .unwrap(),
    );
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            2,
            "error: server \"127.0.0.1:7811\" has no scheme\nhint: use http://127.0.0.1:7811\n"
        )
    );
    let r = env.run(&["--server", "https://pam.example.com", "get", "hosts"]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("plain http:// only"), "{}", r.stderr);
}

#[test]
fn an_exec_run_without_a_command_is_refused_locally() {
    let env = Env::new();
    // No server is reachable at all: the check runs first.
    let r = env.run(&[
        "--server",
        "http://127.0.0.1:9",
        "-p",
        "demo",
        "run",
        "start",
        "--task",
        "hello",
        "--provider",
        "exec",
        "--cwd",
        "/tmp",
        "--name",
        "r2",
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(
        r.stderr,
        "error: invalid run: spec.command: missing required field for provider exec, expected the argv to run (a non-empty list)\n\
         hint: give the command after the flags: pamctl run start … --provider exec -- cat, or --command ARG (repeatable)\n"
    );
    let r = env.run(&[
        "-p",
        "demo",
        "run",
        "start",
        "--task",
        "hello",
        "--provider",
        "exec",
        "--cwd",
        "/tmp",
        "--command",
        "cat",
        "--",
        "ls",
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("cannot be used with"), "{}", r.stderr);
}

#[test]
fn bad_durations_are_usage_errors() {
    let env = Env::new();
    let r = env.run(&[
        "--server",
        "http://127.0.0.1:9",
        "wait",
        "run/x",
        "--for=delete",
        "-p",
        "d",
        "--timeout",
        "5x",
    ]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            2,
            "error: bad duration \"5x\": expected e.g. 500ms, 30s, 1m30s, 2h\n"
        )
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
    assert!(r.stderr.contains("\nhint: is pamd running? start it with `cargo run --release -p pam-controller --bin pamd`\n"), "{}", r.stderr);
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

/// STUB: answers each request with the next canned `(status, body)` and
/// reports what it was asked (`METHOD path`, body, authorization).
struct Stub {
    url: String,
    seen: mpsc::Receiver<(String, String, String)>,
}

impl Stub {
    fn start(answers: Vec<(u16, &'static str)>) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, seen) = mpsc::channel();
        std::thread::spawn(move || {
            for (status, body) in answers {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request_line = String::new();
                reader.read_line(&mut request_line).unwrap();
                let (mut len, mut auth) = (0usize, String::new());
                loop {
                    let mut h = String::new();
                    reader.read_line(&mut h).unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    let lower = h.to_ascii_lowercase();
                    if let Some(v) = lower.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if lower.starts_with("authorization:") {
                        auth = h["authorization:".len()..].trim().to_string();
                    }
                }
                let mut req_body = vec![0; len];
                reader.read_exact(&mut req_body).unwrap();
                let what: Vec<&str> = request_line.split_whitespace().take(2).collect();
                let _ = tx.send((what.join(" "), String::from_utf8(req_body).unwrap(), auth));
                let mut stream = stream;
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Stub { url, seen }
    }

    fn next(&self) -> (String, String, String) {
        self.seen
            .recv_timeout(std::time::Duration::from_secs(10))
            .unwrap()
    }
}

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

#[test]
fn stub_logs_tail_and_since() {
    let fresh = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let snapshot = |at: &str| -> &'static str {
        Box::leak(
            format!(r#"{{"attempt":1,"text":"one\ntwo\nthree\n","lines":3,"bytes":14,"receivedAt":"{at}"}}"#)
                .into_boxed_str(),
        )
    };
    let stub = Stub::start(vec![
        (200, snapshot(&fresh)),
        (200, snapshot(&fresh)),
        (200, snapshot("2020-01-01T00:00:00Z")),
        (
            404,
            r#"{"error":{"code":"not_found","message":"no output for run \"r1\" yet"}}"#,
        ),
        (
            200,
            r#"{"apiVersion":"pam.dev/v1","kind":"Run","metadata":{"name":"r1"}}"#,
        ),
    ]);
    let env = Env::new();
    let logs = |extra: &[&str]| {
        let mut args = vec![
            "--server",
            stub.url.as_str(),
            "--token",
            "t",
            "-p",
            "web",
            "logs",
            "r1",
        ];
        args.extend_from_slice(extra);
        env.run(&args)
    };
    let r = logs(&["--tail", "2"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "two\nthree\n"));
    assert_eq!(stub.next().0, "GET /api/v1/projects/web/runs/r1/output");
    let r = logs(&["--since", "1h5m", "--tail", "1"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "three\n"));
    let r = logs(&["--since", "10m"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, ""));
    assert_eq!(
        r.stderr,
        "no output received in the last 10m (the latest snapshot arrived 2020-01-01T00:00:00Z)\n"
    );
    // No snapshot: the run is read to tell "no output yet" from "no run".
    let r = logs(&[]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            3,
            "error: run \"r1\" has no output yet\nhint: follow it with `pamctl logs -f r1`\n"
        )
    );
}
