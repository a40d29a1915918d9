//! Secrets end to end: a Secret applied with pamctl reaches the real
//! provider process's environment in a real tmux session (the fake
//! provider prints it into its output), and nowhere else — not in any
//! event, not in pamd's or the worker's log at trace level, not in any API
//! response but the run's own output, not in `ps`, not in a `pg_dump` of
//! the whole database (which holds ciphertext only). A run naming a missing Secret waits with
//! a SecretMissing condition and runs once it is applied; a key rotation
//! keeps every run working.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pam_tests::worker::{
    apply, claude_printing_env, create_worker_token, project_yaml, run, wait_online, wait_phase,
    Worker, FAST_PAMD_TOML, FAST_WORKER_TOML,
};
use pam_tests::{eventually, ok, Pamd, PamdOptions};
use serde_json::Value;

const T: Duration = Duration::from_secs(30);

fn secret_yaml(name: &str, value: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  stringData:\n    TOKEN: {value}\n")
}

fn run_yaml(name: &str, cwd: &str, secret: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  task: t1\n  provider: claude\n  prompt: go\n  cwd: {cwd:?}\n  env:\n  - name: API_KEY\n    valueFrom:\n      secretKeyRef: {{name: {secret}, key: TOKEN}}\n"
    )
}

/// Samples `ps -eo args` every 20 ms until stopped.
fn sample_ps(stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            if let Ok(out) = std::process::Command::new("ps")
                .args(["-eo", "args"])
                .output()
            {
                seen.push(String::from_utf8_lossy(&out.stdout).into_owned());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        seen
    })
}

#[tokio::test]
async fn a_secret_reaches_the_provider_and_nothing_else() {
    let value = format!("pamsecret{}", uuid::Uuid::new_v4().simple());
    let later_value = format!("pamlater{}", uuid::Uuid::new_v4().simple());
    let pamd = Pamd::start(PamdOptions {
        config_toml: FAST_PAMD_TOML.to_string(),
        log_filter: Some("trace".into()),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let token = create_worker_token(&pamd, "h1").await.unwrap();
    let toml = format!("{FAST_WORKER_TOML}{}", claude_printing_env("API_KEY"));
    let w = Worker::start_logging(&pamd.url, &token, "h1", &toml, "trace").unwrap();
    wait_online(&pamd, "h1").await;
    let cwd = w.tmp().display().to_string();
    let responses: Arc<Mutex<Vec<String>>> = Arc::default();
    let keep = |v: &Value| responses.lock().unwrap().push(v.to_string());

    let stop = Arc::new(AtomicBool::new(false));
    let ps = sample_ps(stop.clone());

    apply(
        &pamd,
        &format!("{}---\n{}", project_yaml(), secret_yaml("keys", &value)),
    );
    // A run naming a Secret that does not exist yet waits, saying which.
    apply(&pamd, &run_yaml("waits", &cwd, "later"));
    let waiting = eventually(T, "SecretMissing on run waits", || async {
        let r = run(&pamd, "waits").await;
        let c = r["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "SecretMissing").cloned());
        c.map(|c| (r, c))
    })
    .await;
    assert_eq!(waiting.0["status"]["phase"], "pending", "{}", waiting.0);
    assert!(
        waiting.1["message"].as_str().unwrap().contains("\"later\""),
        "{}",
        waiting.1
    );

    // The run with the Secret: its provider prints the value.
    apply(&pamd, &run_yaml("r1", &cwd, "keys"));
    let r1 = wait_phase(&pamd, "r1", "exited", T).await;
    keep(&r1);
    let logs = ok(&pamd.pamctl(&["logs", "r1", "-p", "e2e"]));
    assert!(logs.contains(&format!("API_KEY={value}")), "{logs}");
    // The env file is gone once the provider started.
    let run_dir = w
        .data_dir
        .join("runs")
        .join(r1["metadata"]["uid"].as_str().unwrap());
    assert!(!run_dir.join("1.env").exists());
    // What the run printed (the value) is its owner's alone: the
    // log 0600 in 0700 directories, up to the worker's data dir; the
    // outbox too.
    {
        use std::os::unix::fs::MetadataExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().mode() & 0o777;
        assert_eq!(mode(&run_dir.join("1.log")), 0o600);
        for d in [
            run_dir.clone(),
            w.data_dir.join("runs"),
            w.data_dir.join("outbox"),
            w.data_dir.clone(),
        ] {
            assert_eq!(mode(&d), 0o700, "{}", d.display());
        }
    }
    assert_eq!(run(&pamd, "waits").await["status"]["phase"], "pending");

    // Rotation: a new key, the Secret re-sealed, runs still get the value.
    let rotated = ok(&pamd.pamctl(&["secret", "rotate-key"]));
    assert!(rotated.trim().starts_with('k'), "{rotated}");
    apply(&pamd, &run_yaml("r2", &cwd, "keys"));
    wait_phase(&pamd, "r2", "exited", T).await;
    let logs = ok(&pamd.pamctl(&["logs", "r2", "-p", "e2e"]));
    assert!(logs.contains(&format!("API_KEY={value}")), "{logs}");

    // The missing Secret applied: the waiting run dispatches and runs.
    apply(&pamd, &secret_yaml("later", &later_value));
    let waited = wait_phase(&pamd, "waits", "exited", T).await;
    keep(&waited);
    let logs = ok(&pamd.pamctl(&["logs", "waits", "-p", "e2e"]));
    assert!(logs.contains(&format!("API_KEY={later_value}")), "{logs}");
    stop.store(true, Ordering::SeqCst);
    let ps = ps.join().unwrap();
    assert!(ps.len() > 10, "ps was sampled during the runs");

    // What an operator sees: keys, sizes, digests; diff says a value
    // changed without printing either.
    for path in [
        "/api/v1/projects/e2e/secrets",
        "/api/v1/projects/e2e/secrets/keys",
        "/api/v1/projects/e2e/runs",
        "/api/v1/events?limit=10000",
    ] {
        keep(&pamd.get(path).await.unwrap());
    }
    let secret = pamd.get("/api/v1/projects/e2e/secrets/keys").await.unwrap();
    assert_eq!(secret["status"]["keys"][0]["name"], "TOKEN", "{secret}");
    assert_eq!(secret["status"]["keys"][0]["size"], value.len(), "{secret}");
    let mut outputs = vec![
        ok(&pamd.pamctl(&["get", "secrets", "-p", "e2e"])),
        ok(&pamd.pamctl(&["get", "secrets", "-A", "-o", "wide"])),
        ok(&pamd.pamctl(&["get", "secret", "keys", "-p", "e2e", "-o", "yaml"])),
        ok(&pamd.pamctl(&["describe", "secret", "keys", "-p", "e2e"])),
        ok(&pamd.pamctl(&["events"])),
    ];
    let changed = secret_yaml("keys", "pamchanged0123456789");
    let diff = pamd.pamctl_stdin(&["diff", "-f", "-"], Some(&changed));
    assert_eq!(diff.status.code(), Some(1), "a changed value is a change");
    let diff_text = String::from_utf8_lossy(&diff.stdout).into_owned();
    assert!(diff_text.contains("digest"), "{diff_text}");
    assert!(
        diff_text.contains("# secret key TOKEN: value changed"),
        "{diff_text}"
    );
    assert!(!diff_text.contains("pamchanged"), "{diff_text}");
    outputs.push(diff_text);
    assert!(outputs[0].contains("TOKEN"), "{}", outputs[0]);

    // Nowhere but the runs' own output.
    let db = {
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(&pamd.database_url)
            .await
            .unwrap();
        let rows: Vec<(String,)> = sqlx::query_as("SELECT s::text FROM secrets s")
            .fetch_all(&mut conn)
            .await
            .unwrap();
        assert_eq!(rows.len(), 2);
        // The whole database as an operator would back it up: every
        // table's rows (events, runs, idempotency answers, deliveries…).
        // Next to the server binaries the tests run (PATH may hold links
        // to just those).
        let pg_ctl = pam_store::embedded::find_bin_dir().unwrap().join("pg_ctl");
        let pg_dump = std::fs::canonicalize(pg_ctl)
            .unwrap()
            .with_file_name("pg_dump");
        let dump = std::process::Command::new(pg_dump)
            .args(["--data-only", "--dbname", &pamd.database_url])
            .output()
            .unwrap();
        assert!(dump.status.success(), "pg_dump: {dump:?}");
        let dump = String::from_utf8(dump.stdout).unwrap();
        assert!(
            dump.contains("COPY public.secrets"),
            "the dump has the Secrets"
        );
        assert!(dump.contains("COPY public.events"), "and the journal");
        rows.into_iter()
            .map(|r| r.0)
            .chain([dump])
            .collect::<Vec<_>>()
            .join("\n")
    };
    let b64 = |s: &str| {
        use std::io::Write as _;
        let mut out = Vec::new();
        let _ = write!(out, "{s}");
        // The value as base64 too (it is sealed, not encoded).
        let table = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        out.chunks(3)
            .flat_map(|c| {
                let n = (c[0] as u32) << 16
                    | (*c.get(1).unwrap_or(&0) as u32) << 8
                    | *c.get(2).unwrap_or(&0) as u32;
                (0..c.len() + 1).map(move |i| table[(n >> (18 - 6 * i) & 63) as usize] as char)
            })
            .collect::<String>()
    };
    let haystacks = [
        ("pamd's log (trace)", pamd.log()),
        ("the worker's log (trace)", w.log()),
        ("API responses", responses.lock().unwrap().join("\n")),
        ("pamctl output", outputs.join("\n")),
        ("ps -eo args", ps.join("\n")),
        ("the database (pg_dump)", db),
    ];
    for v in [&value, &later_value] {
        for needle in [v.clone(), b64(v)] {
            for (what, text) in &haystacks {
                assert!(
                    !text.contains(&needle),
                    "a Secret's value (or its base64) is in {what}"
                );
            }
        }
    }
    assert!(pamd.log().contains("TRACE") || pamd.log().contains("trace"));
}

/// A Secret value written as something other than a string (a
/// YAML number, a boolean, a list, a map) is refused by apply, validate
/// and diff — and by the API's JSON `objects` — by its type and position
/// only: the value is in no output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_value_that_is_not_a_string_is_never_echoed() {
    const DIGITS: &str = "4111111111111111";
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("secret.yaml");
    for (value, json_value, got) in [
        (
            DIGITS.to_string(),
            serde_json::json!(4111111111111111u64),
            "a number",
        ),
        (
            format!("{DIGITS}.25"),
            serde_json::json!(4111111111111111.25),
            "a number",
        ),
        ("true".to_string(), serde_json::json!(true), "a boolean"),
        (
            format!("[{DIGITS}]"),
            serde_json::json!([DIGITS]),
            "a sequence",
        ),
        (
            format!("{{card: {DIGITS}}}"),
            serde_json::json!({"card": DIGITS}),
            "a mapping",
        ),
    ] {
        let yaml = format!(
            "apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: keys\n  project: e2e\nspec:\n  stringData:\n    API_KEY: {value}\n"
        );
        std::fs::write(&file, &yaml).unwrap();
        let f = file.to_str().unwrap();
        for verb in ["apply", "validate", "diff"] {
            let out = pamd.pamctl(&[verb, "-f", f]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{verb} {value}: {stdout}{stderr}");
            assert!(
                stderr.contains(&format!("{f}: document 0, line 8, column "))
                    && stderr.contains(&format!(
                        "spec.stringData.API_KEY: expected a string, got {got}"
                    )),
                "{verb} {value}: {stderr}"
            );
            assert!(
                !stdout.contains(DIGITS) && !stderr.contains(DIGITS),
                "{verb} {value}: {stdout}{stderr}"
            );
        }
        let obj = serde_json::json!({
            "apiVersion": "pam.dev/v1", "kind": "Secret",
            "metadata": {"name": "keys", "project": "e2e"},
            "spec": {"stringData": {"API_KEY": json_value}}
        });
        for route in ["/api/v1/apply", "/api/v1/diff"] {
            let (code, body) = pamd
                .post(route, serde_json::json!({"objects": [obj.clone()]}))
                .await;
            assert_eq!(code, 422, "{route} {value}: {body}");
            let text = body.to_string();
            assert!(
                text.contains(&format!(
                    "spec.stringData.API_KEY: expected a string, got {got}"
                )),
                "{route} {value}: {text}"
            );
            assert!(!text.contains(DIGITS), "{route} {value}: {text}");
        }
    }
    assert!(!pamd.log().contains(DIGITS), "pamd's log");
    assert_eq!(ok(&pamd.pamctl(&["events"])), "", "nothing written");
}

/// A key line as deploy/kubernetes/pamd.yaml says to make one.
fn new_key_line() -> String {
    let out = std::process::Command::new("sh")
        .args([
            "-c",
            r#"printf 'k%s %s\n' "$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')" "$(head -c32 /dev/urandom | base64)""#,
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()
}

/// `POST /api/v1/secrets/rotate-key {"resealOnly": true}`: its 200 answer.
async fn reseal_only(pamd: &Pamd) -> serde_json::Value {
    let (status, answer) = pamd
        .post(
            "/api/v1/secrets/rotate-key",
            serde_json::json!({"resealOnly": true}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// The rotation of a key file pamd does not write (a Kubernetes Secret,
/// docs/operations.md "Rotating the key"): the new key put first in the
/// file and pamd restarted, `rotate-key --reseal-only` re-seals every
/// Secret with it and names the old key as unused without touching the
/// file; with the old line then removed, runs still get the value.
#[tokio::test]
async fn a_key_file_pamd_does_not_write_rotates_by_reseal_only() {
    let value = format!("pamsecret{}", uuid::Uuid::new_v4().simple());
    let keys = tempfile::tempdir().unwrap();
    let key_file = keys.path().join("secrets.key");
    let mut pamd = Pamd::start(PamdOptions {
        config_toml: FAST_PAMD_TOML.to_string(),
        args: vec!["--secrets-key-file".into(), key_file.display().to_string()],
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    apply(
        &pamd,
        &format!("{}---\n{}", project_yaml(), secret_yaml("keys", &value)),
    );
    let old_text = std::fs::read_to_string(&key_file).unwrap();
    let old_id = old_text
        .lines()
        .find(|l| l.starts_with('k'))
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    // The new key first, the old one kept: pamd restarted with it.
    let new_line = new_key_line();
    let new_id = new_line.split(' ').next().unwrap().to_string();
    let with_both = format!("{new_line}{old_text}");
    std::fs::write(&key_file, &with_both).unwrap();
    pamd.restart().await.unwrap();
    let out = ok(&pamd.pamctl(&["secret", "rotate-key", "--reseal-only"]));
    assert_eq!(out.trim(), new_id, "{out}");
    assert_eq!(
        std::fs::read_to_string(&key_file).unwrap(),
        with_both,
        "the key file is not written"
    );
    let answer = reseal_only(&pamd).await;
    assert_eq!(answer["keyId"], new_id.as_str(), "{answer}");
    assert_eq!(answer["resealed"], 0, "already re-sealed: {answer}");
    assert_eq!(answer["removable"], serde_json::json!([old_id]), "{answer}");
    // The old line removed: every Secret still opens.
    std::fs::write(&key_file, &new_line).unwrap();
    pamd.restart().await.unwrap();
    // Nothing left to remove: `removable` is there, empty (the schema
    // says it always is).
    let answer = reseal_only(&pamd).await;
    assert_eq!(answer["removable"], serde_json::json!([]), "{answer}");
    let token = create_worker_token(&pamd, "h1").await.unwrap();
    let toml = format!("{FAST_WORKER_TOML}{}", claude_printing_env("API_KEY"));
    let w = Worker::start_with_token(&pamd.url, &token, "h1", &toml).unwrap();
    wait_online(&pamd, "h1").await;
    apply(
        &pamd,
        &run_yaml("after", &w.tmp().display().to_string(), "keys"),
    );
    wait_phase(&pamd, "after", "exited", T).await;
    let logs = ok(&pamd.pamctl(&["logs", "after", "-p", "e2e"]));
    assert!(logs.contains(&format!("API_KEY={value}")), "{logs}");
}
