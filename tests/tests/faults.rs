//! Fault injection with real processes: real pamd (on a fresh test
//! database, or on its embedded PostgreSQL), real pam-worker on a private
//! tmux server, the fake provider. Each case breaks something while runs
//! are running and finishing, then reads the runs and the journal
//! (`GET /api/v1/events`) and asserts 0 lost, 0 duplicated, 0 stuck:
//! every run ends `exited` in its first attempt with exactly one
//! `run.spawning`, `run.started` and `run.finished` (in that order), no
//! `run.failed`, and every worker's outbox drains.
//!
//! Bounded in time: short runs, a 1 s heartbeat, a 3 s offline window.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use pam_tests::worker::{apply, events, fake, project_yaml, run, run_yaml, wait_online, Worker};
use pam_tests::{eventually, ok, Pamd, PamdOptions};
use serde_json::{json, Value};

/// The longest any one wait may take.
const T: Duration = Duration::from_secs(60);

/// 1 s heartbeats; a host silent for 3 s goes offline.
const PAMD_TOML: &str = "[hosts]\nheartbeat_seconds = 1\noffline_after_seconds = 3\n";

/// pamd (on a fresh test database, or `embedded`) and worker h1, online.
async fn fleet(embedded: bool) -> (Pamd, Worker) {
    let pamd = Pamd::start(PamdOptions {
        config_toml: PAMD_TOML.to_string(),
        embedded,
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    (pamd, w)
}

/// Applies project e2e and runs `{prefix}-0..n`: run i prints
/// `lines(i)` progress lines `sleep_ms` apart, then exits 0. Returns the
/// run names.
fn start_runs(
    pamd: &Pamd,
    w: &Worker,
    prefix: &str,
    n: usize,
    lines: impl Fn(usize) -> usize,
    sleep_ms: u64,
) -> Vec<String> {
    let mut yaml = project_yaml();
    let mut names = Vec::new();
    for i in 0..n {
        let name = format!("{prefix}-{i}");
        let l = lines(i).to_string();
        let ms = sleep_ms.to_string();
        yaml.push_str("---\n");
        yaml.push_str(&run_yaml(
            &name,
            w.tmp(),
            &fake(&["--lines", &l, "--sleep-ms", &ms]),
            "",
        ));
        names.push(name);
    }
    apply(pamd, &yaml);
    names
}

fn phase_of(r: &Value) -> &str {
    r["status"]["phase"].as_str().unwrap_or("")
}

/// Waits until at least `n` of the runs are running.
async fn running(pamd: &Pamd, names: &[String], n: usize) {
    eventually(T, &format!("{n} runs running"), || async {
        let mut k = 0;
        for name in names {
            if phase_of(&run(pamd, name).await) == "running" {
                k += 1;
            }
        }
        (k >= n).then_some(())
    })
    .await;
}

/// The end-of-case check: 0 stuck (every run terminal within [`T`]),
/// 0 lost and 0 duplicated (the journal holds exactly one spawning,
/// started and finished per run, in order, all attempt 1, and no
/// run.failed), and the workers' outboxes drained.
async fn assert_exactly_once(pamd: &Pamd, workers: &[&Worker], names: &[String]) {
    let deadline = Instant::now() + T;
    let runs: Vec<Value> = loop {
        let mut all = Vec::new();
        for name in names {
            all.push(run(pamd, name).await);
        }
        let live: Vec<&str> = all
            .iter()
            .filter(|r| !matches!(phase_of(r), "exited" | "failed" | "stopped"))
            .map(|r| r["metadata"]["name"].as_str().unwrap_or("?"))
            .collect();
        if live.is_empty() {
            break all;
        }
        assert!(
            Instant::now() < deadline,
            "stuck: {live:?} not terminal after {T:?}\npamd log:\n{}",
            pamd.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for w in workers {
        eventually(T, &format!("worker {} outbox drained", w.name), || async {
            (w.outbox_len() == 0).then_some(())
        })
        .await;
    }
    let journal = events(pamd, None).await;
    let mut seqs: Vec<i64> = journal.iter().filter_map(|e| e["seq"].as_i64()).collect();
    let n = seqs.len();
    seqs.dedup();
    assert_eq!(seqs.len(), n, "a seq journaled twice");
    let mut problems = Vec::new();
    for r in &runs {
        let name = r["metadata"]["name"].as_str().unwrap_or("?");
        let id = r["metadata"]["uid"].as_str().unwrap_or("?");
        let st = &r["status"];
        if st["phase"] != "exited" || st["attempt"] != 1 || st["exitCode"] != 0 {
            problems.push(format!(
                "{name}: phase {} attempt {} exit {} reason {}",
                st["phase"], st["attempt"], st["exitCode"], st["failureReason"]
            ));
        }
        let mut by_topic: BTreeMap<&str, Vec<(i64, i64)>> = BTreeMap::new();
        for e in &journal {
            if e["payload"]["run_id"] == id {
                by_topic
                    .entry(e["topic"].as_str().unwrap_or("?"))
                    .or_default()
                    .push((
                        e["seq"].as_i64().unwrap(),
                        e["payload"]["attempt"].as_i64().unwrap_or(0),
                    ));
            }
        }
        let mut order = Vec::new();
        for topic in ["run.spawning", "run.started", "run.finished"] {
            let got = by_topic.get(topic).cloned().unwrap_or_default();
            match got.len() {
                0 => problems.push(format!("{name}: {topic} lost")),
                1 => order.push(got[0].0),
                k => problems.push(format!("{name}: {topic} journaled {k} times: {got:?}")),
            }
            if got.iter().any(|(_, attempt)| *attempt != 1) {
                problems.push(format!("{name}: {topic} of another attempt: {got:?}"));
            }
        }
        if !order.windows(2).all(|p| p[0] < p[1]) {
            problems.push(format!(
                "{name}: spawning/started/finished out of order: {order:?}"
            ));
        }
        for topic in ["run.failed", "run.stopped", "run.requeued"] {
            if let Some(got) = by_topic.get(topic) {
                problems.push(format!("{name}: {topic} journaled: {got:?}"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "lost, duplicated or failed:\n{}\npamd log:\n{}",
        problems.join("\n"),
        pamd.log()
    );
}

/// (a) pamd SIGKILLed four times while runs are running and finishing
/// (their signals wait in the worker's outbox meanwhile): each signal is
/// applied exactly once.
#[tokio::test]
async fn a_pamd_killed_repeatedly_while_runs_finish() {
    let (mut pamd, w) = fleet(false).await;
    // Eight runs of 1 to 4.5 s on capacity 4: some finish, some are
    // claimed, across the crashes.
    let names = start_runs(&pamd, &w, "ra", 8, |i| 4 + 2 * i, 250);
    running(&pamd, &names, 1).await;
    for down_ms in [200, 1500, 0, 800] {
        tokio::time::sleep(Duration::from_millis(1200)).await;
        pamd.kill9();
        tokio::time::sleep(Duration::from_millis(down_ms)).await;
        pamd.start_again().await.unwrap();
    }
    assert_exactly_once(&pamd, &[&w], &names).await;
}

/// (b) pamd down for more than twice the offline window while the worker
/// keeps its runs going: when pamd is back, no host goes offline, no run
/// fails, no session is killed — every run finishes in its first attempt.
#[tokio::test]
async fn b_pamd_down_longer_than_the_offline_window_fails_nothing() {
    let (mut pamd, w) = fleet(false).await;
    // ~16 s each: still running well after pamd is back.
    let names = start_runs(&pamd, &w, "rb", 3, |_| 32, 500);
    running(&pamd, &names, 3).await;
    let sessions = {
        let mut s = w.sessions();
        s.sort();
        s
    };
    assert_eq!(sessions.len(), 3, "{sessions:?}");
    pamd.kill9();
    tokio::time::sleep(Duration::from_secs(7)).await;
    pamd.start_again().await.unwrap();
    // Past the window pamd gives the host after it starts, the sessions
    // are all still there and the runs live.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut now = w.sessions();
    now.sort();
    assert_eq!(now, sessions, "a session was killed");
    for name in &names {
        let r = run(&pamd, name).await;
        assert!(
            matches!(phase_of(&r), "running" | "exited"),
            "{name}: {r}\npamd log:\n{}",
            pamd.log()
        );
    }
    assert_exactly_once(&pamd, &[&w], &names).await;
    let offline = events(&pamd, Some("worker.offline")).await;
    assert!(offline.is_empty(), "{offline:#?}");
}

/// (c) The worker SIGKILLed and started again on the same host (same data
/// dir, tmux server and token), twice, with runs live: it adopts the
/// sessions, and their signals are applied exactly once.
#[tokio::test]
async fn c_worker_killed_and_restarted_with_runs_live() {
    let (pamd, mut w) = fleet(false).await;
    let names = start_runs(&pamd, &w, "rc", 6, |i| 6 + 3 * i, 250);
    running(&pamd, &names, 2).await;
    for _ in 0..2 {
        w.kill9();
        w.restart().unwrap();
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    assert_exactly_once(&pamd, &[&w], &names).await;
}

async fn open_stream(pamd: &Pamd, token: &str) -> reqwest::Response {
    let r = reqwest::Client::new()
        .get(format!("{}/api/v1/events/stream?after=0", pamd.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    r
}

/// (d) A token revoked while its stream is open (runs going on): its
/// stream ends within a second, and its reconnect is refused; another
/// token's stream carries every journaled event exactly once.
#[tokio::test]
async fn d_a_revoked_tokens_stream_ends_within_a_second() {
    let (pamd, w) = fleet(false).await;
    let http = reqwest::Client::new();
    let created: Value = http
        .post(format!("{}/api/v1/tokens", pamd.url))
        .bearer_auth(&pamd.token)
        .json(&json!({"name": "alice"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let alice = created["token"].as_str().unwrap().to_string();
    let alice_id = created["id"].as_str().unwrap().to_string();
    let mut alice_events = pam_tests::sse_seqs(open_stream(&pamd, &alice).await);
    let mut admin_events = pam_tests::sse_seqs(open_stream(&pamd, &pamd.token).await);
    let names = start_runs(&pamd, &w, "rd", 4, |i| 4 + 2 * i, 250);
    running(&pamd, &names, 1).await;
    let revoked = Instant::now();
    let r = http
        .delete(format!("{}/api/v1/tokens/{alice_id}", pamd.url))
        .bearer_auth(&pamd.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    loop {
        let left = Duration::from_secs(1).saturating_sub(revoked.elapsed());
        match tokio::time::timeout(left, alice_events.recv()).await {
            Ok(Some(Some(_))) => continue,
            Ok(_) => break,
            Err(_) => panic!("alice's stream still open a second after the revocation"),
        }
    }
    let again = http
        .get(format!("{}/api/v1/events/stream", pamd.url))
        .bearer_auth(&alice)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status().as_u16(), 401);

    assert_exactly_once(&pamd, &[&w], &names).await;
    // The admin stream carried the whole journal, each event once.
    let journal: Vec<i64> = events(&pamd, None)
        .await
        .iter()
        .filter_map(|e| e["seq"].as_i64())
        .collect();
    let last = *journal.last().unwrap();
    let mut seen = Vec::new();
    while seen.last().is_none_or(|s| *s < last) {
        match tokio::time::timeout(T, admin_events.recv()).await {
            Ok(Some(Some(seq))) => seen.push(seq),
            other => panic!("admin stream: {other:?} after {seen:?}"),
        }
    }
    assert_eq!(seen, journal, "the stream lost or repeated events");
}

/// (e) pamd, its embedded postmaster and every backend SIGKILLed together,
/// three times, pamd started again at once each time, with runs going on:
/// pamd comes up every time, and nothing is lost or duplicated.
#[tokio::test]
async fn e_pamd_and_its_embedded_postgres_killed_together() {
    let (mut pamd, w) = fleet(true).await;
    let names = start_runs(&pamd, &w, "re", 6, |i| 6 + 3 * i, 250);
    running(&pamd, &names, 1).await;
    for round in 0..3 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let killed = pamd.kill9_with_postgres().unwrap();
        assert!(killed >= 2, "round {round}: killed only {killed}");
        pamd.start_again()
            .await
            .unwrap_or_else(|e| panic!("round {round}: pamd did not come back: {e:#}"));
    }
    assert_exactly_once(&pamd, &[&w], &names).await;
}

/// A second pamd started on the data dir of one running on its embedded
/// PostgreSQL is refused before it touches the cluster, and the first one
/// keeps serving (it used to reuse the running cluster, fail to listen,
/// and stop the first one's database on its way out).
#[tokio::test]
async fn f_a_second_pamd_on_a_data_dir_is_refused_and_the_first_keeps_its_database() {
    let pamd = Pamd::start(PamdOptions {
        embedded: true,
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let second = std::process::Command::new(pam_tests::bin("pamd"))
        .arg("--config")
        .arg(&pamd.config)
        .arg("--data-dir")
        .arg(&pamd.data_dir)
        .args(["--listen", "127.0.0.1:0"])
        .env("HOME", &pamd.data_dir)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Refused at once; one still running after 30 s was let in.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut second = second;
    while second.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = second.kill();
            panic!("a second pamd on the same data dir was let in");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let second = second.wait_with_output().unwrap();
    assert!(!second.status.success());
    let said = String::from_utf8_lossy(&second.stderr);
    assert!(said.contains("another pamd runs on the data dir"), "{said}");
    // The first one's database is still there: it serves and writes.
    tokio::time::sleep(Duration::from_millis(500)).await;
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some("apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: still}\nspec: {}\n"),
    ));
    assert!(ok(&pamd.pamctl(&["get", "projects"])).contains("still"));
}
