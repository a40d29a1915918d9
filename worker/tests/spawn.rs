//! The spawn path on a real tmux server: a spawn accepts only a
//! session it created for this very run and attempt. Another attempt's
//! session under the run's name is never taken for the new attempt.

mod common;

use std::path::Path;

use common::{desired, eventually, signals, PrivateTmux, FAKE, WORKER};
use pam_manifests::protocol::{session_name, DesiredRun, SignalKind};
use pam_worker::config::Config;
use pam_worker::outbox::Outbox;
use pam_worker::spawn;
use pam_worker::testdir::TestDir;
use uuid::Uuid;

/// A codex-format fake provider that prints one line and hangs.
fn hanging() -> Config {
    Config::parse(
        &format!("[providers.codex]\ncommand = [{FAKE:?}, \"--format\", \"codex\", \"--lines\", \"1\", \"--hang\", \"{{prompt}}\"]\n"),
        "test",
    )
    .unwrap()
}

fn attempt(run: Uuid, cwd: &Path, n: i32) -> DesiredRun {
    let mut d = desired(run, cwd, "codex");
    d.attempt = n;
    d
}

async fn start(t: &PrivateTmux, data: &Path, d: &DesiredRun) -> anyhow::Result<()> {
    spawn::start(&t.tmux, Path::new(WORKER), data, &hanging(), d).await
}

fn started_count(ob: &Outbox, run: Uuid, attempt: i32) -> usize {
    signals(ob)
        .iter()
        .filter(|s| s.kind == SignalKind::Started && s.run_id == run && s.attempt == attempt)
        .count()
}

async fn wait_started(ob: &Outbox, run: Uuid, attempt: i32) {
    eventually(15, &format!("started of attempt {attempt}"), || {
        (started_count(ob, run, attempt) > 0).then_some(())
    })
    .await;
}

/// Starts `d` and waits until its wrapper reports `started`; returns the
/// outbox and the pane's pid.
async fn running(t: &PrivateTmux, data: &Path, d: &DesiredRun) -> (Outbox, u32) {
    start(t, data, d).await.unwrap();
    let ob = Outbox::open(data).unwrap();
    wait_started(&ob, d.run_id, d.attempt).await;
    (ob, t.tmux.pane_pid(&d.session_name).await.unwrap())
}

#[tokio::test]
async fn attempt_2_replaces_attempt_1s_session_instead_of_adopting_it() {
    let t = PrivateTmux::new();
    let d = TestDir::new("spawn");
    let data = d.path().join("data");
    let run = Uuid::new_v4();
    let a1 = attempt(run, d.path(), 1);
    let (ob, pid1) = running(&t, &data, &a1).await;

    // Attempt 1's session is still alive (a worker that lost it, another
    // worker on the same socket): attempt 2 must run in a session of its
    // own, not inherit attempt 1's.
    start(&t, &data, &attempt(run, d.path(), 2))
        .await
        .expect("attempt 2 starts");
    wait_started(&ob, run, 2).await;
    let pid2 = t.tmux.pane_pid(&a1.session_name).await.unwrap();
    assert_ne!(pid1, pid2, "attempt 2 adopted attempt 1's wrapper");
}

#[tokio::test]
async fn a_name_held_by_another_run_or_by_an_untagged_session_fails_the_spawn() {
    let t = PrivateTmux::new();
    let d = TestDir::new("spawn");
    let data = d.path().join("data");

    // Another run whose id shares the first 8 hex digits: the same name.
    let run = Uuid::new_v4();
    let mut bytes = *run.as_bytes();
    bytes[15] ^= 0xff;
    let other = Uuid::from_bytes(bytes);
    assert_eq!(session_name(run), session_name(other));
    let (ob, pid) = running(&t, &data, &attempt(other, d.path(), 1)).await;
    let name = session_name(run);
    let mine = attempt(run, d.path(), 1);
    let err = start(&t, &data, &mine)
        .await
        .expect_err("another run's session must not be adopted");
    assert!(
        !spawn::env_file(&data, &mine).exists(),
        "the run's environment is not left behind"
    );
    let msg = format!("{err:#}");
    assert!(msg.contains(&other.to_string()), "names the holder: {msg}");
    assert_eq!(
        t.tmux.pane_pid(&name).await.unwrap(),
        pid,
        "another run's session is left alone"
    );

    // A `pam-*` session pam did not create (no tags): not ours either.
    let stranger = Uuid::new_v4();
    let name = session_name(stranger);
    let mut cmd = std::process::Command::new("tmux");
    cmd.args(t.tmux.socket_args())
        .args(["new-session", "-d", "-s", &name, "sleep", "60"]);
    assert!(cmd.status().unwrap().success());
    let err = start(&t, &data, &attempt(stranger, d.path(), 1))
        .await
        .expect_err("an untagged session must not be adopted");
    assert!(format!("{err:#}").contains(&name), "{err:#}");
    assert!(t.tmux.has_session(&name).await.unwrap(), "left alone");
    assert_eq!(started_count(&ob, run, 1), 0);
    assert_eq!(started_count(&ob, stranger, 1), 0);
}

#[tokio::test]
async fn a_repeated_spawn_of_the_same_attempt_accepts_its_own_session() {
    let t = PrivateTmux::new();
    let d = TestDir::new("spawn");
    let data = d.path().join("data");
    let run = Uuid::new_v4();
    let a = attempt(run, d.path(), 2);
    let (ob, pid) = running(&t, &data, &a).await;
    // An earlier try of this very spawn succeeded: accept, do not respawn.
    start(&t, &data, &a).await.expect("its own session");
    assert_eq!(t.tmux.pane_pid(&a.session_name).await.unwrap(), pid);
    assert_eq!(started_count(&ob, run, 2), 1);
}
