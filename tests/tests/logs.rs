//! Runs' logs and transcripts, read by pamd from the worker that keeps
//! them over its watch (docs/api.md, "Run logs and transcripts"): real
//! pamd (SIGKILLed and started again mid-run), real pam-worker, real tmux,
//! the fake provider printing over time; then the archive serving a
//! finished attempt once its host and its files are gone, and the answer
//! when nothing can serve it.

use std::time::Duration;

use pam_tests::worker::{
    apply, fake, project_yaml, run, run_yaml, wait_online, wait_phase, Worker, FAST_PAMD_TOML,
};
use pam_tests::{eventually, fails, ok, Pamd, PamdOptions};

const LONG: Duration = Duration::from_secs(60);

/// The lines of `text` after the first `n`.
fn without_first_lines(text: &[u8], n: usize) -> &[u8] {
    let mut start = 0;
    for _ in 0..n {
        start += text[start..].iter().position(|b| *b == b'\n').unwrap() + 1;
    }
    &text[start..]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_log_is_whole_across_a_pamd_crash_and_outlives_its_host() {
    let archive = tempfile::tempdir().unwrap();
    let mut pamd = Pamd::start(PamdOptions {
        config_toml: format!(
            "{FAST_PAMD_TOML}[logs]\ncache_bytes = 1048576\narchive_dir = {:?}\n",
            archive.path().display().to_string()
        ),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let mut worker = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    apply(&pamd, &project_yaml());
    let stop = worker.tmp().join("stop");
    let stop_arg = stop.display().to_string();
    let cmd = fake(&[
        "--format",
        "claude",
        "--lines",
        "2",
        "--sleep-ms",
        "100",
        "--until-file",
        &stop_arg,
    ]);
    apply(&pamd, &run_yaml("r1", worker.tmp(), &cmd, ""));
    let r = wait_phase(&pamd, "r1", "running", LONG).await;
    let id = r["metadata"]["uid"].as_str().unwrap().to_string();
    let file = worker.run_log(&id, 1);
    let read = || std::fs::read(&file).unwrap_or_default();
    let has = |text: &[u8], what: &str| String::from_utf8_lossy(text).contains(what);
    eventually(LONG, "output over time", || async {
        has(&read(), "tick 30\n").then_some(())
    })
    .await;
    let now = ok(&pamd.pamctl(&["-p", "e2e", "logs", "r1"]));
    assert!(now.contains("tick 3"), "{now}");

    // pamd dies; the agent goes on printing.
    let killed_at = chrono::Utc::now();
    pamd.kill9();
    let down = read().len();
    eventually(LONG, "output while pamd is down", || async {
        (read().len() > down + 40).then_some(())
    })
    .await;
    let written_while_down = String::from_utf8_lossy(&read()[down..]).into_owned();
    pamd.start_again().await.unwrap();
    // The worker's watch comes back; the log is whole, what was printed
    // while pamd was down included.
    let got = eventually(LONG, "the log after the restart", || async {
        let out = pamd.pamctl(&["-p", "e2e", "logs", "r1"]);
        out.status.success().then_some(out.stdout)
    })
    .await;
    assert!(has(&got, written_while_down.lines().next().unwrap()));
    assert_eq!(
        &read()[..got.len()],
        &got[..],
        "a prefix of the file, byte for byte"
    );

    // The transcript beside the log (the wrapper's other file), read raw
    // and as a conversation while the run is live.
    let transcript = file.with_file_name("1.transcript.jsonl");
    let entries = concat!(
        r#"{"kind":"session","session_id":"s-1","model":"m1"}"#,
        "\n",
        r#"{"kind":"tool_call","tool":"Write","target":"a.txt","text":"3 lines"}"#,
        "\n",
        r#"{"kind":"tool_result","ok":true,"text":"written"}"#,
        "\n"
    );
    std::fs::write(&transcript, entries).unwrap();
    let raw = ok(&pamd.pamctl(&["-p", "e2e", "transcript", "r1", "-o", "json"]));
    assert_eq!(raw, entries);
    let talk = ok(&pamd.pamctl(&["-p", "e2e", "transcript", "r1"]));
    assert!(talk.contains("tool call Write a.txt\n  3 lines"), "{talk}");
    assert!(talk.contains("tool result ok\n  written"), "{talk}");

    // Followed until the run is over for good.
    let follow = pamd.pamctl_background(&["-p", "e2e", "logs", "-f", "r1"]);
    let mut followed = vec![follow.line(LONG)];
    std::fs::write(&stop, b"").unwrap();
    wait_phase(&pamd, "r1", "exited", LONG).await;
    while let Ok(line) = follow.lines.recv_timeout(LONG) {
        followed.push(line);
    }
    let (status, err) = follow.exit(LONG);
    assert!(status.success(), "{err}");
    let whole = read();
    assert_eq!(format!("{}\n", followed.join("\n")).as_bytes(), &whole[..]);
    let out = ok(&pamd.pamctl(&["-p", "e2e", "logs", "r1"]));
    assert_eq!(out.as_bytes(), &whole[..], "the whole log, byte for byte");

    // --tail, --since, --attempt.
    let lines = String::from_utf8_lossy(&whole).lines().count();
    let tail = ok(&pamd.pamctl(&["-p", "e2e", "logs", "r1", "--tail", "3"]));
    assert_eq!(tail.as_bytes(), without_first_lines(&whole, lines - 3));
    let all = ok(&pamd.pamctl(&["-p", "e2e", "logs", "r1", "--since", "1h"]));
    assert_eq!(all.as_bytes(), &whole[..]);
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let none = ok(&pamd.pamctl(&["-p", "e2e", "logs", "r1", "--since", &later.to_rfc3339()]));
    assert_eq!(none, "");
    // Since pamd was killed: what was printed from about a second
    // before on (the index's spacing), not the first ticks 3 s before.
    let since = killed_at.to_rfc3339();
    let recent = ok(&pamd.pamctl(&["-p", "e2e", "logs", "r1", "--since", &since]));
    assert!(whole.ends_with(recent.as_bytes()), "{recent}");
    assert!(recent.contains(written_while_down.lines().next().unwrap()));
    assert!(!recent.contains("tick 1\n") && recent.len() < whole.len());
    let first = ok(&pamd.pamctl(&["-p", "e2e", "logs", "r1", "--attempt", "1"]));
    assert_eq!(first.as_bytes(), &whole[..]);
    let err = fails(
        &pamd.pamctl(&["-p", "e2e", "logs", "r1", "--attempt", "2"]),
        3,
    );
    assert!(err.contains("has no attempt 2"), "{err}");
    // A follow of a run over for good ends at once with the whole log.
    let again = ok(&pamd.pamctl(&["-p", "e2e", "logs", "-f", "r1"]));
    assert_eq!(again.as_bytes(), &whole[..]);

    // Archived, then served once the host and its files are gone (a
    // fresh pamd: nothing cached).
    let archived = archive.path().join(&id).join("1.archived");
    eventually(LONG, "the archive", || async {
        archived.is_file().then_some(())
    })
    .await;
    worker.kill9();
    std::fs::remove_dir_all(&worker.data_dir).unwrap();
    pamd.restart().await.unwrap();
    let out = ok(&pamd.pamctl(&["-p", "e2e", "logs", "r1"]));
    assert_eq!(out.as_bytes(), &whole[..], "the archived log");
    let raw = ok(&pamd.pamctl(&["-p", "e2e", "transcript", "r1", "-o", "json"]));
    assert_eq!(raw, entries, "the archived transcript");

    // Nothing archived any more, the host offline: a clear answer naming it.
    std::fs::remove_dir_all(archive.path().join(&id)).unwrap();
    pamd.restart().await.unwrap();
    eventually(LONG, "h1 offline", || async {
        let h = pamd.get("/api/v1/hosts/h1").await.ok()?;
        (h["status"]["phase"] == "offline").then_some(())
    })
    .await;
    let url = format!("{}/api/v1/projects/e2e/runs/r1/log", pamd.url);
    let r = pamd
        .http()
        .get(&url)
        .bearer_auth(&pamd.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 503);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "host_offline", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(msg.contains("\"h1\", offline since"), "{msg}");
    let err = fails(&pamd.pamctl(&["-p", "e2e", "logs", "r1"]), 5);
    assert!(err.contains("offline since"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_never_started_has_no_log() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    apply(&pamd, &project_yaml());
    let dir = tempfile::tempdir().unwrap();
    // No host: the run stays pending.
    apply(&pamd, &run_yaml("r0", dir.path(), &fake(&[]), ""));
    let err = fails(&pamd.pamctl(&["-p", "e2e", "logs", "r0"]), 3);
    assert!(
        err.contains("run \"r0\" has no log: it never started"),
        "{err}"
    );
    let err = fails(&pamd.pamctl(&["-p", "e2e", "transcript", "r0"]), 3);
    assert!(err.contains("no transcript: it never started"), "{err}");
    let err = fails(&pamd.pamctl(&["-p", "e2e", "logs", "nope"]), 3);
    assert!(err.contains("nope"), "{err}");
    let _ = run(&pamd, "r0").await;
}
