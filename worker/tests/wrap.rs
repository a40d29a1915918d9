//! `pam-worker wrap` around the fake provider: real processes, real signals,
//! a real tmux server for the end-to-end case.

mod common;

use std::path::Path;
use std::process::Stdio;

use common::{desired, eventually, kinds, signals, PrivateTmux, FAKE, WORKER};
use nix::sys::signal::{kill, Signal as Sig};
use nix::unistd::Pid;
use pam_manifests::protocol::{Signal, SignalKind, REASON_PROVIDER_FAILED, REASON_SPAWN_FAILED};
use pam_worker::config::Config;
use pam_worker::outbox::Outbox;
use pam_worker::run_files::log_path;
use pam_worker::spawn;
use pam_worker::testdir::TestDir;
use uuid::Uuid;

use SignalKind::{Failed, Finished, Progress, Started};

fn wrap_cmd(
    data: &Path,
    run: Uuid,
    attempt: i32,
    provider: &str,
    cmd: &[&str],
) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(WORKER);
    c.args([
        "wrap",
        "--run",
        &run.to_string(),
        "--attempt",
        &attempt.to_string(),
    ])
    .arg("--data-dir")
    .arg(data)
    .args(["--provider", provider, "--stop-grace-seconds", "1", "--"])
    .args(cmd)
    .stdin(Stdio::null())
    .kill_on_drop(true);
    c
}

async fn run_wrap(
    data: &Path,
    run: Uuid,
    attempt: i32,
    provider: &str,
    cmd: &[&str],
) -> std::process::Output {
    wrap_cmd(data, run, attempt, provider, cmd)
        .output()
        .await
        .unwrap()
}

/// The texts of the agent's messages the progress signals carried.
fn activity_texts(sigs: &[Signal]) -> Vec<String> {
    sigs.iter()
        .flat_map(|s| &s.activity)
        .filter(|e| e.kind == pam_manifests::protocol::EntryKind::Message)
        .filter_map(|e| e.text.clone())
        .collect()
}

fn progress_seqs(sigs: &[Signal]) -> Vec<i64> {
    sigs.iter()
        .filter(|s| s.kind == Progress)
        .map(|s| s.seq.unwrap())
        .collect()
}

#[tokio::test]
async fn success_signals_log_and_tee() {
    let d = TestDir::new("wrap");
    let run = Uuid::new_v4();
    let out = run_wrap(
        d.path(),
        run,
        2,
        "claude",
        &[FAKE, "--lines", "4", "-p", "do it"],
    )
    .await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sigs = signals(&Outbox::open(d.path()).unwrap());
    let k = kinds(&sigs);
    assert_eq!((k[0], k[k.len() - 1]), (Started, Finished), "{k:?}");
    let seqs = progress_seqs(&sigs);
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    assert_eq!(
        activity_texts(&sigs),
        ["step 1", "step 2", "step 3", "step 4"],
        "what the agent said, in order"
    );
    let first = sigs.iter().find(|s| s.kind == Progress).unwrap();
    assert_eq!(first.session_id.as_deref(), Some("fake-session"));
    assert!(
        sigs.iter().all(|s| s.attempt == 2 && s.run_id == run),
        "{sigs:?}"
    );
    assert!(sigs.iter().all(|s| s.validate().is_ok()));
    let fin = sigs.last().unwrap();
    assert_eq!(fin.exit_code, Some(0));
    assert_eq!(fin.session_id.as_deref(), Some("fake-session"));
    let usage = fin
        .usage
        .as_ref()
        .expect("finished carries the final usage");
    assert_eq!(
        (usage.input_tokens, usage.output_tokens, usage.cost_usd),
        (40, 10, Some(0.25))
    );
    // While it runs, the attempt's usage so far: each step's call once.
    let after_two = sigs
        .iter()
        .filter(|s| s.kind == Progress)
        .filter_map(|s| s.attempt_usage.as_ref())
        .nth(1)
        .expect("usage so far on progress");
    assert_eq!((after_two.input_tokens, after_two.output_tokens), (20, 3));
    let transcript =
        std::fs::read_to_string(pam_worker::transcript::path(d.path(), run, 2)).unwrap();
    assert!(transcript.contains(r#""text":"step 4""#), "{transcript}");

    let log = std::fs::read_to_string(log_path(d.path(), run, 2)).unwrap();
    assert!(log.contains(r#""text":"step 4""#), "{log}");
    assert!(
        log.contains("fake provider starting"),
        "stderr is logged too: {log}"
    );
    assert!(log.contains("plain text between events"), "{log}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(r#""text":"step 1""#),
        "tee to own stdout: {stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("fake provider starting"));
}

#[tokio::test]
async fn codex_and_gemini_streams_give_progress() {
    for (provider, n) in [("codex", 3), ("gemini", 5)] {
        let d = TestDir::new("wrap");
        let run = Uuid::new_v4();
        let lines = n.to_string();
        let out = run_wrap(
            d.path(),
            run,
            1,
            provider,
            &[FAKE, "--format", provider, "--lines", &lines, "x"],
        )
        .await;
        assert_eq!(out.status.code(), Some(0));
        let sigs = signals(&Outbox::open(d.path()).unwrap());
        let want: Vec<String> = (1..=n).map(|i| format!("step {i}")).collect();
        assert_eq!(activity_texts(&sigs), want, "{provider}");
        let seqs = progress_seqs(&sigs);
        assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
        let fin = sigs.last().unwrap();
        assert_eq!((fin.kind, fin.exit_code), (Finished, Some(0)), "{provider}");
        assert_eq!(
            fin.usage.as_ref().unwrap().input_tokens,
            10 * n as u64,
            "{provider}"
        );
    }
}

#[tokio::test]
async fn exec_provider_logs_but_has_no_progress() {
    let d = TestDir::new("wrap");
    let run = Uuid::new_v4();
    let out = run_wrap(d.path(), run, 1, "exec", &[FAKE, "--lines", "2"]).await;
    assert_eq!(out.status.code(), Some(0));
    let sigs = signals(&Outbox::open(d.path()).unwrap());
    assert_eq!(kinds(&sigs), [Started, Finished]);
    assert!(std::fs::read_to_string(log_path(d.path(), run, 1))
        .unwrap()
        .contains("step 2"));
}

#[tokio::test]
async fn nonzero_exit_is_reported() {
    let d = TestDir::new("wrap");
    let run = Uuid::new_v4();
    let out = run_wrap(
        d.path(),
        run,
        1,
        "claude",
        &[FAKE, "--lines", "1", "--exit", "3"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    let sigs = signals(&Outbox::open(d.path()).unwrap());
    let k = kinds(&sigs);
    assert_eq!((k[0], k[k.len() - 1]), (Started, Finished), "{k:?}");
    assert!(!k.contains(&Failed), "a plain non-zero exit: finished only");
    let fin = sigs.last().unwrap();
    assert_eq!(fin.exit_code, Some(3));
    // The provider's last words on stderr say why.
    assert_eq!(
        fin.message.as_deref(),
        Some("fake provider starting (plain text on stderr)")
    );
}

#[tokio::test]
async fn provider_failure_adds_failed_before_finished() {
    let d = TestDir::new("wrap");
    let run = Uuid::new_v4();
    let out = run_wrap(
        d.path(),
        run,
        1,
        "claude",
        &[FAKE, "--lines", "1", "--fail-result", "--exit", "1"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let sigs = signals(&Outbox::open(d.path()).unwrap());
    let k = kinds(&sigs);
    assert_eq!(k[k.len() - 2..], [Failed, Finished], "{k:?}");
    let failed = &sigs[sigs.len() - 2];
    assert_eq!(failed.reason.as_deref(), Some(REASON_PROVIDER_FAILED));
    assert_eq!(
        failed.message.as_deref(),
        Some("done"),
        "the result's own text"
    );
    let fin = sigs.last().unwrap();
    assert_eq!(
        (fin.exit_code, fin.message.as_deref()),
        (Some(1), Some("done"))
    );
}

#[tokio::test]
async fn command_that_cannot_start_is_spawn_failed_only() {
    let d = TestDir::new("wrap");
    let run = Uuid::new_v4();
    let out = run_wrap(
        d.path(),
        run,
        1,
        "claude",
        &["/nonexistent/pam-no-such-provider", "-p", "x"],
    )
    .await;
    assert_eq!(out.status.code(), Some(127));
    let sigs = signals(&Outbox::open(d.path()).unwrap());
    assert_eq!(kinds(&sigs), [Failed], "no started, no finished: {sigs:?}");
    assert_eq!(sigs[0].reason.as_deref(), Some(REASON_SPAWN_FAILED));
    assert_eq!(sigs[0].attempt, 1);
    let log = std::fs::read_to_string(log_path(d.path(), run, 1)).unwrap();
    assert!(log.contains("cannot start"), "{log}");
}

/// Starts a hanging fake provider under wrap, waits until it runs, and
/// returns (wrapper, child pid).
async fn start_hanging(d: &Path, run: Uuid, extra: &[&str]) -> (tokio::process::Child, i32) {
    let pid_file = d.join("child.pid");
    let pf = pid_file.to_string_lossy().into_owned();
    let mut args = vec![FAKE, "--lines", "2", "--hang", "--pid-file", &pf];
    args.extend_from_slice(extra);
    let wrapper = wrap_cmd(d, run, 1, "claude", &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let ob = Outbox::open(d).unwrap();
    // Wait for both lines of progress: the child is running its hang.
    eventually(10, "both steps' progress", || {
        (activity_texts(&signals(&ob)).len() == 2).then_some(())
    })
    .await;
    let pid: i32 = eventually(5, "pid file", || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    })
    .await;
    (wrapper, pid)
}

#[tokio::test]
async fn sigterm_is_forwarded_and_reported_as_143() {
    let d = TestDir::new("wrap");
    let run = Uuid::new_v4();
    let (mut wrapper, child) = start_hanging(d.path(), run, &[]).await;
    kill(Pid::from_raw(wrapper.id().unwrap() as i32), Sig::SIGTERM).unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), wrapper.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(143));
    let sigs = signals(&Outbox::open(d.path()).unwrap());
    let k = kinds(&sigs);
    assert_eq!((k[0], k[k.len() - 1]), (Started, Finished), "{k:?}");
    let fin = sigs.last().unwrap();
    assert_eq!(fin.exit_code, Some(143));
    // Stopped before the provider's totals: each call it made, once.
    let u = fin.usage.as_ref().expect("the usage so far");
    assert_eq!((u.input_tokens, u.output_tokens), (20, 3));
    assert_eq!(
        kill(Pid::from_raw(child), None),
        Err(nix::errno::Errno::ESRCH),
        "child must be gone"
    );
}

#[tokio::test]
async fn a_child_ignoring_sigterm_is_killed_after_the_grace() {
    let d = TestDir::new("wrap");
    let run = Uuid::new_v4();
    let (mut wrapper, child) = start_hanging(d.path(), run, &["--ignore-term"]).await;
    kill(Pid::from_raw(wrapper.id().unwrap() as i32), Sig::SIGTERM).unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), wrapper.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(137), "SIGKILL after the 1 s grace");
    let fin = signals(&Outbox::open(d.path()).unwrap()).pop().unwrap();
    assert_eq!((fin.kind, fin.exit_code), (Finished, Some(137)));
    assert_eq!(
        kill(Pid::from_raw(child), None),
        Err(nix::errno::Errno::ESRCH)
    );
}

#[tokio::test]
async fn spawned_run_in_real_tmux_reports_everything() {
    let t = PrivateTmux::new();
    let d = TestDir::new("spawn");
    let data = d.path().join("data");
    let cwd = d.path().join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let config = Config::parse(
        &format!(
            "stop_grace_seconds = 1\n[providers.claude]\ncommand = [{FAKE:?}, \"--lines\", \"3\", \"--sleep-ms\", \"20\", \"-p\", \"{{prompt}}\"]\n"
        ),
        "test",
    )
    .unwrap();
    let run = Uuid::new_v4();
    let want = desired(run, &cwd, "claude");
    spawn::start(&t.tmux, Path::new(WORKER), &data, &config, &want)
        .await
        .unwrap();
    let ob = Outbox::open(&data).unwrap();
    let sigs = eventually(15, "finished signal", || {
        let s = signals(&ob);
        s.iter().any(|x| x.kind == Finished).then_some(s)
    })
    .await;
    let k = kinds(&sigs);
    assert_eq!((k[0], k[k.len() - 1]), (Started, Finished), "{k:?}");
    assert_eq!(activity_texts(&sigs), ["step 1", "step 2", "step 3"]);
    assert!(sigs.iter().all(|s| s.attempt == 3));
    assert_eq!(
        sigs[0].session_name.as_deref(),
        Some(want.session_name.as_str())
    );
    assert_eq!(sigs.last().unwrap().exit_code, Some(0));
    // The transcript opens with the prompt the spawn wrote.
    let transcript = std::fs::read_to_string(pam_worker::transcript::path(&data, run, 3)).unwrap();
    let first: pam_manifests::protocol::Entry =
        serde_json::from_str(transcript.lines().next().unwrap()).unwrap();
    assert_eq!(
        (first.role.as_deref(), first.text.as_deref()),
        (Some("user"), Some("fix it; don't $break;"))
    );
    let log = std::fs::read_to_string(log_path(&data, run, 3)).unwrap();
    assert!(
        log.contains(r#""prompt":"fix it; don't $break;""#),
        "prompt as one argument: {log}"
    );
    assert!(
        log.contains(r#""echo":"secret-ish""#),
        "run env reaches the provider: {log}"
    );
    assert!(
        log.contains(&format!(r#""cwd":"{}""#, cwd.display())),
        "{log}"
    );
    assert!(
        !spawn::env_file(&data, &want).exists(),
        "the wrapper deletes the env file"
    );
    wait_session_gone(&t, &want.session_name).await;
}

async fn wait_session_gone(t: &PrivateTmux, name: &str) {
    for _ in 0..250 {
        if !t.tmux.has_session(name).await.unwrap() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("session {name} still alive after its wrapper finished");
}

#[tokio::test]
async fn stopping_a_tmux_run_via_its_pane_pid() {
    let t = PrivateTmux::new();
    let d = TestDir::new("spawn");
    let data = d.path().join("data");
    let config = Config::parse(
        &format!("[providers.codex]\ncommand = [{FAKE:?}, \"--format\", \"codex\", \"--lines\", \"1\", \"--hang\", \"{{prompt}}\"]\n"),
        "test",
    )
    .unwrap();
    let run = Uuid::new_v4();
    let want = desired(run, d.path(), "codex");
    spawn::start(&t.tmux, Path::new(WORKER), &data, &config, &want)
        .await
        .unwrap();
    let ob = Outbox::open(&data).unwrap();
    eventually(10, "progress", || {
        signals(&ob)
            .iter()
            .any(|s| s.kind == Progress)
            .then_some(())
    })
    .await;
    t.tmux
        .send_signal(&want.session_name, Sig::SIGTERM)
        .await
        .unwrap();
    let sigs = eventually(10, "finished", || {
        let s = signals(&ob);
        s.iter().any(|x| x.kind == Finished).then_some(s)
    })
    .await;
    assert_eq!(sigs.last().unwrap().exit_code, Some(143));
    wait_session_gone(&t, &want.session_name).await;
}

#[tokio::test]
async fn spawn_rejects_a_missing_cwd_and_an_exec_run_without_command() {
    let d = TestDir::new("spawn");
    let config = Config::default();
    let run = Uuid::new_v4();
    let mut r = desired(run, &d.path().join("missing"), "claude");
    let e = spawn::session_spec(Path::new(WORKER), d.path(), &config, &r)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a directory"), "{e}");
    r.cwd = d.path().to_string_lossy().into_owned();
    r.provider = "exec".into();
    let e = spawn::session_spec(Path::new(WORKER), d.path(), &config, &r)
        .unwrap_err()
        .to_string();
    assert!(e.contains("has no command"), "{e}");
}

/// A stop reaches everything the command started, not only the command:
/// a provider CLI that runs as a second process (gemini relaunches
/// itself) or an agent's shell command would otherwise outlive the run.
#[tokio::test]
async fn a_stop_reaches_the_commands_own_children() {
    let d = TestDir::new("wrap");
    let run = Uuid::new_v4();
    let pid_file = d.path().join("grandchild.pid");
    let script = format!("sleep 300 & echo $! > {}; wait", pid_file.display());
    let mut wrapper = wrap_cmd(d.path(), run, 1, "exec", &["sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let grandchild: i32 = eventually(10, "the grandchild's pid", || {
        std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok()
    })
    .await;
    kill(Pid::from_raw(wrapper.id().unwrap() as i32), Sig::SIGTERM).unwrap();
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), wrapper.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(143));
    eventually(5, "the grandchild to be gone", || {
        (kill(Pid::from_raw(grandchild), None) == Err(nix::errno::Errno::ESRCH)).then_some(())
    })
    .await;
}
