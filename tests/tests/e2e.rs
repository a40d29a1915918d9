//! Seven end-to-end scenarios: real pamd on real PostgreSQL,
//! real pam-worker processes (each on a private tmux server), real tmux and
//! the fake provider, with thresholds shortened through pamd's config.

use std::time::Duration;

use pam_tests::worker::{
    apply, events, fake, host, phase, project_yaml, run, run_events, run_yaml, wait_online,
    wait_phase, Worker, FAST_PAMD_TOML,
};
use pam_tests::{eventually, ok, Pamd, PamdOptions};
use serde_json::Value;

const T: Duration = Duration::from_secs(60);

async fn pamd(extra: &str) -> Pamd {
    pamd_with(&format!("{FAST_PAMD_TOML}{extra}")).await
}

async fn pamd_with(config_toml: &str) -> Pamd {
    Pamd::start(PamdOptions {
        config_toml: config_toml.to_string(),
        ..PamdOptions::default()
    })
    .await
    .unwrap()
}

const RESTART_2: &str =
    "  restartPolicy:\n    maxAttempts: 2\n    backoffSeconds: 1\n    backoffMaxSeconds: 1\n";

fn topics(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .map(|e| e["topic"].as_str().unwrap_or("").to_string())
        .collect()
}

fn run_id(r: &Value) -> String {
    r["metadata"]["uid"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Scenario 1: a run reaches `exited` with exit code 0; events in order
/// run.created, run.spawning, run.started, run.finished, each attempt 1;
/// the log file exists.
#[tokio::test]
async fn s1_run_exits_zero_with_ordered_events_and_a_log() {
    let pamd = pamd("").await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let cwd = w.tmp().to_path_buf();
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("r1", &cwd, &fake(&["--lines", "2"]), "")
        ),
    );
    let r = wait_phase(&pamd, "r1", "exited", T).await;
    assert_eq!(r["status"]["exitCode"], 0, "{r}");
    assert_eq!(r["status"]["attempt"], 1);
    let id = run_id(&r);
    let evs: Vec<Value> = run_events(&pamd, &id)
        .await
        .into_iter()
        .filter(|e| {
            matches!(
                e["topic"].as_str(),
                Some("run.created" | "run.spawning" | "run.started" | "run.finished")
            )
        })
        .collect();
    assert_eq!(
        topics(&evs),
        ["run.created", "run.spawning", "run.started", "run.finished"],
        "{evs:#?}"
    );
    assert!(evs.iter().all(|e| e["payload"]["attempt"] == 1), "{evs:#?}");
    let log = w.run_log(&id, 1);
    assert!(
        log.exists(),
        "{} missing; worker log:\n{}",
        log.display(),
        w.log()
    );
    assert!(std::fs::read_to_string(&log).unwrap().contains("result"));
    // The ended session's last snapshot (from its log) serves `pamctl logs`.
    eventually(T, "final output snapshot", || async {
        let out = pamd.pamctl(&["-p", "e2e", "logs", "r1"]);
        String::from_utf8_lossy(&out.stdout)
            .contains("result")
            .then_some(())
    })
    .await;
}

/// Scenario 2: exit 3 with maxAttempts 2 → failed, requeued as attempt 2,
/// fails again → restart_exhausted; no run.failed for non-zero exits.
#[tokio::test]
async fn s2_nonzero_exit_requeues_then_restart_exhausted() {
    let pamd = pamd("").await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml(
                "r2",
                w.tmp(),
                &fake(&["--lines", "1", "--exit", "3"]),
                RESTART_2
            )
        ),
    );
    let r = eventually(T, "r2 restart_exhausted", || async {
        let r = run(&pamd, "r2").await;
        (r["status"]["failureReason"] == "restart_exhausted").then_some(r)
    })
    .await;
    assert_eq!(r["status"]["phase"], "failed");
    assert_eq!(r["status"]["attempt"], 2);
    assert_eq!(r["status"]["exitCode"], 3);
    let evs = run_events(&pamd, &run_id(&r)).await;
    let finished: Vec<_> = evs
        .iter()
        .filter(|e| e["topic"] == "run.finished")
        .map(|e| e["payload"]["attempt"].as_i64().unwrap())
        .collect();
    assert_eq!(finished, [1, 2], "{evs:#?}");
    assert!(
        !topics(&evs).iter().any(|t| t == "run.failed"),
        "no run.failed for a non-zero exit: {evs:#?}"
    );
    assert!(w.run_log(&run_id(&r), 2).exists());
}

/// Scenario 3: kill -9 the worker running a long run → host offline after
/// the threshold, run failed host_lost, requeued, finished on the other
/// worker with attempt 2; the dead attempt's signals, shipped later, are
/// dropped without events.
#[tokio::test]
async fn s3_worker_killed_run_finishes_elsewhere_and_late_signals_are_dropped() {
    let pamd = pamd("").await;
    let mut workers = [
        Worker::start(&pamd, "ha").await.unwrap(),
        Worker::start(&pamd, "hb").await.unwrap(),
    ];
    wait_online(&pamd, "ha").await;
    wait_online(&pamd, "hb").await;
    let cwd = workers[0].tmp().to_path_buf();
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml(
                "r3",
                &cwd,
                &fake(&["--lines", "24", "--sleep-ms", "250"]),
                RESTART_2
            )
        ),
    );
    let r = wait_phase(&pamd, "r3", "running", T).await;
    let id = run_id(&r);
    let first_host = r["status"]["host"].as_str().unwrap().to_string();
    let dead = if first_host == "ha" { 0 } else { 1 };
    let other = if first_host == "ha" { "hb" } else { "ha" };
    workers[dead].kill9();
    eventually(T, "dead host offline", || async {
        (host(&pamd, &first_host).await["status"]["phase"] == "offline").then_some(())
    })
    .await;
    let evs = run_events(&pamd, &id).await;
    assert!(
        evs.iter().any(|e| e["topic"] == "run.failed"
            && e["payload"]["failure_reason"] == "host_lost"
            && e["payload"]["attempt"] == 1),
        "{evs:#?}"
    );
    let r = wait_phase(&pamd, "r3", "exited", T).await;
    assert_eq!(r["status"]["attempt"], 2);
    assert_eq!(r["status"]["host"], other);
    // The dead attempt ran on in its tmux session and wrote its signals to
    // the dead worker's outbox; let it end, then bring that worker back.
    eventually(T, "attempt 1 session ends", || async {
        workers[dead].sessions().is_empty().then_some(())
    })
    .await;
    assert!(
        workers[dead].outbox_len() > 0,
        "attempt 1 left signals behind"
    );
    let before = run_events(&pamd, &id).await;
    workers[dead].restart().unwrap();
    eventually(T, "late signals shipped", || async {
        (workers[dead].outbox_len() == 0).then_some(())
    })
    .await;
    wait_online(&pamd, &first_host).await;
    let after = run_events(&pamd, &id).await;
    // Compare attempt 1's events only: the live worker may still journal
    // attempt 2's last output snapshot meanwhile.
    let attempt1 = |evs: &[Value]| -> Vec<Value> {
        evs.iter()
            .filter(|e| e["payload"]["attempt"] == 1)
            .cloned()
            .collect()
    };
    assert!(!attempt1(&before).is_empty());
    assert_eq!(
        attempt1(&before),
        attempt1(&after),
        "stale attempt-1 signals must not journal anything"
    );
    assert_eq!(phase(&pamd, "r3").await, "exited");
}

/// Scenario 4: kill -9 pamd while runs are finishing, start it again →
/// every run's finish is recorded exactly once (outbox replay).
#[tokio::test]
async fn s4_pamd_killed_while_runs_finish_each_finish_recorded_once() {
    // A long offline threshold: pamd's downtime must not read as host loss.
    let mut pamd = pamd_with("[hosts]\nheartbeat_seconds = 1\noffline_after_seconds = 120\n").await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let mut yaml = project_yaml();
    let n = 6;
    for i in 0..n {
        let lines = (4 + 2 * i).to_string();
        yaml.push_str("---\n");
        yaml.push_str(&run_yaml(
            &format!("r4-{i}"),
            w.tmp(),
            &fake(&["--lines", &lines, "--sleep-ms", "200"]),
            "",
        ));
    }
    // capacity 4 by default: allow all at once.
    apply(&pamd, &yaml);
    for i in 0..n {
        let p = phase(&pamd, &format!("r4-{i}")).await;
        assert!(p == "pending" || p == "spawning" || p == "running" || p == "exited");
    }
    eventually(T, "a first run exited", || async {
        for i in 0..n {
            if phase(&pamd, &format!("r4-{i}")).await == "exited" {
                return Some(());
            }
        }
        None
    })
    .await;
    pamd.kill9();
    // Runs go on finishing while pamd is down; their signals wait in the
    // worker's outbox.
    eventually(T, "sessions end while pamd is down", || async {
        w.sessions().is_empty().then_some(())
    })
    .await;
    pamd.restart().await.unwrap();
    for i in 0..n {
        wait_phase(&pamd, &format!("r4-{i}"), "exited", T).await;
    }
    eventually(T, "outbox drained", || async {
        (w.outbox_len() == 0).then_some(())
    })
    .await;
    let all = events(&pamd, Some("run.finished")).await;
    for i in 0..n {
        let id = run_id(&run(&pamd, &format!("r4-{i}")).await);
        let count = all.iter().filter(|e| e["payload"]["run_id"] == id).count();
        assert_eq!(count, 1, "run r4-{i}: {count} run.finished events");
    }
}

/// Scenario 5: two workers with the same token and name but different data
/// dirs → instance_suspect, one worker.instance_suspect event, no new
/// dispatch; `pamctl host clear-suspect` restores it.
#[tokio::test]
async fn s5_cloned_token_is_suspect_until_cleared() {
    let pamd = pamd("").await;
    let token = pam_tests::worker::create_worker_token(&pamd, "h1")
        .await
        .unwrap();
    let fast = pam_tests::worker::FAST_WORKER_TOML;
    let mut w1 = Worker::start_with_token(&pamd.url, &token, "h1", fast).unwrap();
    wait_online(&pamd, "h1").await;
    let w2 = Worker::start_with_token(&pamd.url, &token, "h1", fast).unwrap();
    eventually(T, "h1 suspect", || async {
        (host(&pamd, "h1").await["status"]["instanceSuspect"] == true).then_some(())
    })
    .await;
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("r5", w2.tmp(), &fake(&["--lines", "1"]), "")
        ),
    );
    // Several heartbeats of both instances later: still one event, and the
    // run was not dispatched.
    let hb_window = Duration::from_secs(4);
    tokio::time::sleep(hb_window).await;
    assert_eq!(phase(&pamd, "r5").await, "pending");
    assert_eq!(
        events(&pamd, Some("worker.instance_suspect")).await.len(),
        1
    );
    // Retire the first instance; accept the newest presenter.
    w1.kill9();
    ok(&pamd.pamctl(&["host", "clear-suspect", "h1"]));
    let r = wait_phase(&pamd, "r5", "exited", T).await;
    assert_eq!(r["status"]["host"], "h1");
    assert_eq!(host(&pamd, "h1").await["status"]["instanceSuspect"], false);
    assert_eq!(
        events(&pamd, Some("worker.instance_suspect")).await.len(),
        1
    );
}

/// Scenario 6: no eligible host → no_eligible_host at the (shortened)
/// dispatch timeout; `pamctl stop` on a running run → stopped, session gone.
#[tokio::test]
async fn s6_no_eligible_host_times_out_and_stop_kills_the_session() {
    let pamd = pamd("[dispatch]\ntimeout_seconds = 3\n").await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let nowhere = run_yaml(
        "r6-nowhere",
        w.tmp(),
        &fake(&["--lines", "1"]),
        "  target:\n    host: no-such-host\n",
    );
    let hang = run_yaml("r6-hang", w.tmp(), &fake(&["--lines", "1", "--hang"]), "");
    apply(
        &pamd,
        &format!("{}---\n{nowhere}---\n{hang}", project_yaml()),
    );
    let r = wait_phase(&pamd, "r6-nowhere", "failed", T).await;
    assert_eq!(r["status"]["failureReason"], "no_eligible_host", "{r}");
    let r = wait_phase(&pamd, "r6-hang", "running", T).await;
    let session = r["status"]["sessionName"].as_str().unwrap().to_string();
    assert_eq!(w.sessions(), std::slice::from_ref(&session));
    ok(&pamd.pamctl(&["-p", "e2e", "stop", "r6-hang"]));
    wait_phase(&pamd, "r6-hang", "stopped", T).await;
    eventually(T, "session gone", || async {
        (!w.sessions().contains(&session)).then_some(())
    })
    .await;
}

/// Scenario 7: an unmapped `pam-deadbeef` session on a worker host →
/// run.orphan_detected.
#[tokio::test]
async fn s7_unmapped_session_is_reported_as_orphan() {
    let pamd = pamd("").await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let out = w.tmux(&["new-session", "-d", "-s", "pam-deadbeef", "sleep", "600"]);
    assert!(out.status.success(), "{out:?}");
    let ev = eventually(T, "run.orphan_detected", || async {
        events(&pamd, Some("run.orphan_detected"))
            .await
            .into_iter()
            .next()
    })
    .await;
    assert_eq!(ev["payload"]["session_name"], "pam-deadbeef", "{ev}");
    assert_eq!(ev["payload"]["host"], "h1");
    // Reported, never killed by pam.
    assert!(w.sessions().contains(&"pam-deadbeef".to_string()));
}

/// `pamd --local-worker`: pamd creates the worker token (0600 file), starts
/// pam-worker from next to its own executable, and runs get done on it;
/// SIGTERM to pamd stops the worker too.
#[tokio::test]
async fn local_worker_runs_runs_and_stops_with_pamd() {
    use std::os::unix::fs::PermissionsExt;
    let sock_dir = tempfile::Builder::new().prefix("pamlw").tempdir().unwrap();
    let socket = sock_dir.path().join("tmux.sock");
    let mut pamd = Pamd::start(PamdOptions {
        config_toml: FAST_PAMD_TOML.to_string(),
        args: vec!["--local-worker".into()],
        worker_toml: Some(format!(
            "tmux_socket = {:?}\n{}",
            socket.display().to_string(),
            pam_tests::worker::FAST_WORKER_TOML
        )),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let token = pamd.data_dir.join("local-worker.token");
    let mode = std::fs::metadata(&token).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "token file mode {mode:o}");
    let host_name = eventually(T, "local host online", || async {
        let hosts = pamd.get("/api/v1/hosts").await.ok()?;
        let h = hosts["items"].as_array()?.first()?.clone();
        (h["status"]["phase"] == "online")
            .then(|| h["metadata"]["name"].as_str().unwrap().to_string())
    })
    .await;
    let cwd = sock_dir.path().to_path_buf();
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("rl", &cwd, &fake(&["--lines", "1"]), "")
        ),
    );
    let r = wait_phase(&pamd, "rl", "exited", T).await;
    assert_eq!(r["status"]["host"], host_name);
    assert!(pamd
        .data_dir
        .join("worker/runs")
        .join(run_id(&r))
        .join("1.log")
        .exists());
    let pid: u32 = std::fs::read_to_string(pamd.data_dir.join("local-worker.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    pamd.terminate(Duration::from_secs(20))
        .expect("pamd exits on SIGTERM");
    let gone = !std::path::Path::new(&format!("/proc/{pid}")).exists()
        || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "));
    if !gone {
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .arg(pid.to_string())
            .status();
    }
    let _ = std::process::Command::new("tmux")
        .arg("-S")
        .arg(&socket)
        .arg("kill-server")
        .status();
    assert!(gone, "the local worker {pid} outlived pamd");
}

/// The worker exits promptly on SIGTERM (no long-poll keeps it alive), its
/// session lives on, and the restarted worker adopts it instead of
/// respawning (same pane process, attempt 1, one run.started); operator
/// signals reach the session through the desired set.
#[tokio::test]
async fn worker_sigterm_is_prompt_and_restart_adopts_running_sessions() {
    let pamd = pamd("").await;
    let mut w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let r = hanging_run(&pamd, &w).await;
    let session = r["status"]["sessionName"].as_str().unwrap().to_string();
    let pane_pid = |w: &Worker| {
        String::from_utf8_lossy(
            &w.tmux(&[
                "display-message",
                "-p",
                "-t",
                &format!("={session}:"),
                "#{pane_pid}",
            ])
            .stdout,
        )
        .trim()
        .to_string()
    };
    let pid_before = pane_pid(&w);
    assert!(!pid_before.is_empty());
    let t0 = std::time::Instant::now();
    sigterm_and_wait(&mut w).await;
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
    assert_eq!(
        w.sessions(),
        std::slice::from_ref(&session),
        "the session outlives the worker"
    );
    w.restart().unwrap();
    // Adopted: several ticks later the same process runs attempt 1.
    let id = run_id(&r);
    let deadline = std::time::Instant::now() + T;
    while w.log().matches("registered host_id").count() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the restarted worker did not register ({} seen); log:\n{:?}",
            w.log().matches("registered host_id").count(),
            w.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(pane_pid(&w), pid_before, "respawned instead of adopted");
    let evs = run_events(&pamd, &id).await;
    assert_eq!(
        topics(&evs).iter().filter(|t| *t == "run.started").count(),
        1,
        "{evs:#?}"
    );
    assert_eq!(phase(&pamd, "ra").await, "running");
    // An operator signal travels pamd → desired set → tmux → wrapper.
    ok(&pamd.pamctl(&["-p", "e2e", "signal", "ra", "--signal", "INT"]));
    let r = wait_phase(&pamd, "ra", "failed", T).await;
    assert_eq!(r["status"]["exitCode"], 130, "{r}");
}

/// An operator signal accepted while the run's worker is away survives a
/// pamd crash: pamd reads it back from the journal when it starts, the
/// returning worker (which adopts the session) delivers it, and the run
/// ends on it. Journaled once.
#[tokio::test]
async fn operator_signal_survives_a_pamd_crash() {
    // Offline only after 30 s: the host must stay online across the restarts.
    let mut pamd = pamd_with("[hosts]\nheartbeat_seconds = 1\noffline_after_seconds = 30\n").await;
    let mut w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let r = hanging_run(&pamd, &w).await;
    sigterm_and_wait(&mut w).await;
    ok(&pamd.pamctl(&["-p", "e2e", "signal", "ra", "--signal", "INT"]));
    pamd.restart().await.unwrap();
    w.restart().unwrap();
    let done = wait_phase(&pamd, "ra", "failed", T).await;
    assert_eq!(done["status"]["exitCode"], 130, "{done}");
    let evs = run_events(&pamd, &run_id(&r)).await;
    assert_eq!(
        topics(&evs)
            .iter()
            .filter(|t| *t == "run.signal_received")
            .count(),
        1,
        "{evs:#?}"
    );
}

/// Two workers on one tmux socket. Attempt 1 runs on h1, h1
/// dies (its session lives on), the run is requeued as attempt 2 to h2 on
/// the same socket. h2 must not take attempt 1's session (same name) for
/// attempt 2: it replaces the stale incarnation and runs attempt 2 itself.
#[tokio::test]
async fn a_new_attempt_on_a_shared_socket_never_adopts_the_old_attempts_session() {
    let pamd = pamd("").await;
    let mut w1 = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let r = hanging_run_named(&pamd, &w1, "rs", RESTART_2).await;
    let id = run_id(&r);
    let session = r["status"]["sessionName"].as_str().unwrap().to_string();
    w1.kill9();
    let w2 = Worker::start_sharing_socket(&pamd, "h2", &w1)
        .await
        .unwrap();
    let r = eventually(T, "attempt 2 running on h2", || async {
        let r = run(&pamd, "rs").await;
        (r["status"]["attempt"] == 2 && r["status"]["phase"] == "running").then_some(r)
    })
    .await;
    assert_eq!(r["status"]["host"], "h2");
    assert!(w2.run_log(&id, 2).exists(), "h2 ran attempt 2 itself");
    let tag = w2.tmux(&[
        "display-message",
        "-p",
        "-t",
        &format!("={session}:"),
        "#{@pam_attempt}",
    ]);
    assert_eq!(String::from_utf8_lossy(&tag.stdout).trim(), "2");
    let evs = run_events(&pamd, &id).await;
    assert!(
        !evs.iter()
            .any(|e| e["payload"]["failure_reason"] == "session_lost"),
        "{evs:#?}"
    );
}

/// Applies project e2e with run `ra` (the fake provider printing one line,
/// then hanging) and waits until it runs.
async fn hanging_run(pamd: &Pamd, w: &Worker) -> Value {
    hanging_run_named(pamd, w, "ra", "").await
}

/// Applies project e2e with a hanging run `name` (`extra_spec` added to its
/// spec) and waits until it runs.
async fn hanging_run_named(pamd: &Pamd, w: &Worker, name: &str, extra_spec: &str) -> Value {
    apply(
        pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml(
                name,
                w.tmp(),
                &fake(&["--lines", "1", "--hang"]),
                extra_spec
            )
        ),
    );
    wait_phase(pamd, name, "running", T).await
}

/// SIGTERMs the worker and waits (up to 5 s) until it exited.
async fn sigterm_and_wait(w: &mut Worker) {
    w.sigterm();
    eventually(Duration::from_secs(5), "worker exits on SIGTERM", || {
        let done = w.exited().is_some();
        async move { done.then_some(()) }
    })
    .await;
}

/// Attach: one holder (a second gets 409 naming the first), typed input
/// reaches the session (`cat` echoes it into the log and the pane
/// snapshot), release and expiry are journaled; `pamctl attach` relays
/// stdin and releases at end of input.
#[tokio::test]
async fn attach_lease_input_release_and_pamctl_attach() {
    let pamd = pamd("").await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project_yaml(),
            run_yaml("rc", w.tmp(), &["cat".to_string()], "")
        ),
    );
    let r = wait_phase(&pamd, "rc", "running", T).await;
    let id = run_id(&r);
    let base = "/api/v1/projects/e2e/runs/rc/attach";
    let (st, lease) = pamd
        .post(base, serde_json::json!({ "holder": "alice" }))
        .await;
    assert_eq!(st, 201, "{lease}");
    let lease_id = lease["leaseId"].as_str().unwrap().to_string();
    let (st, err) = pamd
        .post(base, serde_json::json!({ "holder": "bob" }))
        .await;
    assert_eq!(st, 409, "{err}");
    assert_eq!(err["error"]["code"], "lease_held");
    assert!(
        err["error"]["message"].as_str().unwrap().contains("alice"),
        "{err}"
    );
    // Input without the lease is refused; with it, it reaches the pane.
    let (st, _) = pamd
        .post(
            &format!("{base}/input"),
            serde_json::json!({ "leaseId": uuid_like(), "text": "nope" }),
        )
        .await;
    assert_eq!(st, 404);
    let (st, _) = pamd
        .post(
            &format!("{base}/input"),
            serde_json::json!({ "leaseId": lease_id, "text": "hello-attach" }),
        )
        .await;
    assert_eq!(st, 202);
    let log = w.run_log(&id, 1);
    eventually(T, "input echoed into the log", || {
        let hit = std::fs::read_to_string(&log).is_ok_and(|t| t.contains("hello-attach"));
        async move { hit.then_some(()) }
    })
    .await;
    eventually(T, "input visible in the pane snapshot", || async {
        let out = pamd.get("/api/v1/projects/e2e/runs/rc/output").await.ok()?;
        out["text"]
            .as_str()
            .is_some_and(|t| t.contains("hello-attach"))
            .then_some(())
    })
    .await;
    let (st, renewed) = pamd
        .post(
            &format!("{base}/renew"),
            serde_json::json!({ "leaseId": lease_id }),
        )
        .await;
    assert_eq!(st, 200, "{renewed}");
    let (st, _) = pamd
        .post(
            &format!("{base}/release"),
            serde_json::json!({ "leaseId": lease_id }),
        )
        .await;
    assert_eq!(st, 204);
    let evs = run_events(&pamd, &id).await;
    let acquired: Vec<_> = evs
        .iter()
        .filter(|e| e["topic"] == "run.lease_acquired")
        .collect();
    let released: Vec<_> = evs
        .iter()
        .filter(|e| e["topic"] == "run.lease_released")
        .collect();
    assert_eq!(acquired.len(), 1, "{evs:#?}");
    assert_eq!(released.len(), 1, "{evs:#?}");
    assert_eq!(released[0]["payload"]["attempt"], 1);
    assert_eq!(released[0]["payload"]["holder"], "alice");

    // pamctl attach: stdin lines are typed into the session; end of input
    // detaches and releases.
    let out = pamd.pamctl_stdin(&["-p", "e2e", "attach", "rc"], Some("from-pamctl\n"));
    assert!(out.status.success(), "{out:?}");
    eventually(T, "pamctl input echoed", || {
        let hit = std::fs::read_to_string(&log).is_ok_and(|t| t.contains("from-pamctl"));
        async move { hit.then_some(()) }
    })
    .await;
    // A lease nobody renews expires, journaled as such.
    let (st, _) = pamd
        .post(
            base,
            serde_json::json!({ "holder": "carol", "ttlSeconds": 1 }),
        )
        .await;
    assert_eq!(st, 201);
    eventually(T, "expiry journaled", || async {
        run_events(&pamd, &id)
            .await
            .iter()
            .any(|e| {
                e["topic"] == "run.lease_released"
                    && e["payload"]["holder"] == "carol"
                    && e["payload"]["reason"] == "expired"
            })
            .then_some(())
    })
    .await;
    let released = run_events(&pamd, &id)
        .await
        .into_iter()
        .filter(|e| e["topic"] == "run.lease_released")
        .count();
    assert_eq!(
        released, 3,
        "alice released, pamctl released, carol expired"
    );
    ok(&pamd.pamctl(&["-p", "e2e", "stop", "rc"]));
    wait_phase(&pamd, "rc", "stopped", T).await;
}

fn uuid_like() -> String {
    "00000000-0000-4000-8000-000000000000".to_string()
}
