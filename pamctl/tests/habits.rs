//! pamctl's client-side habits through the pamctl binary, offline or
//! against `Stub` (canned HTTP, not pamd): completion, examples in help,
//! explain, api-resources, version --client, a scheme-less server, an exec
//! run without a command, durations, logs --tail/--since. The server-side
//! ones are in tests/tests/pamctl_kubectl.rs and pamctl_edit.rs.

mod common;

use common::{Env, Run, Stub};

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
    let r = env.run(&["__complete", "explain", "task.spec.pa"]);
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
    NAME                SHORTNAMES   APIVERSION   NAMESPACED   KIND
    events              ev           pam.dev/v1   false        Event
    hosts               ho           pam.dev/v1   false        Host
    projects            proj         pam.dev/v1   false        Project
    roles               ro           pam.dev/v1   false        Role
    runs                rn           pam.dev/v1   true         Run
    schedules           sch          pam.dev/v1   true         Schedule
    secrets             sec          pam.dev/v1   true         Secret
    sources             src          pam.dev/v1   false        Source
    tasks               tk           pam.dev/v1   true         Task
    webhookdeliveries   whd          pam.dev/v1   false        WebhookDelivery
    webhooks            wh           pam.dev/v1   false        Webhook
    ");
    let r = env.run(&["api-resources", "-o", "name"]);
    assert_eq!(
        r.stdout,
        "events\nhosts\nprojects\nroles\nruns\nschedules\nsecrets\nsources\ntasks\nwebhookdeliveries\nwebhooks\n"
    );
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
            .contains("FIELDS:\n  budget\t<Object>\n    maxCostUsd\t<number>\n    maxTokens\t<integer>\n  command\t<[]string>\n  cwd\t<string>\n"),
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
    // https:// is spoken; another scheme is a usage error.
    let r = env.run(&["--server", "ftp://pam.example.com", "get", "hosts"]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("pamctl speaks http:// and https://, not ftp://"),
        "{}",
        r.stderr
    );
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
fn stub_logs_tail_and_since() {
    let stub = Stub::start(vec![
        (200, "two\nthree\n"),
        (200, "three\n"),
        (
            404,
            r#"{"error":{"code":"not_found","message":"run \"r1\" has no log: it never started"}}"#,
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
    // The bytes pamd sends, as they are: it cuts the tail and the time.
    let r = logs(&["--tail", "2"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "two\nthree\n"));
    assert_eq!(stub.next().0, "GET /api/v1/projects/web/runs/r1/log?tail=2");
    let r = logs(&["--since", "1h5m", "--attempt", "1"]);
    assert_eq!((r.code, r.stdout.as_str()), (0, "three\n"));
    assert_eq!(
        stub.next().0,
        "GET /api/v1/projects/web/runs/r1/log?attempt=1&since=1h5m"
    );
    // pamd's reason, and the way to wait for it.
    let r = logs(&[]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            3,
            "error: 404 not_found: run \"r1\" has no log: it never started\nhint: follow it with `pamctl logs -f r1`\n"
        )
    );
    // Where to start is said once; a bad duration is refused here.
    assert_eq!(logs(&["--since", "1h", "--tail", "1"]).code, 2);
    assert_eq!(logs(&["--since", "soon"]).code, 2);
}
