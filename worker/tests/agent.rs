//! The agent entry point: config, instance id, prompt exit on SIGTERM.

mod common;

use common::WORKER;
use pam_worker::testdir::TestDir;

fn agent(data: &std::path::Path, token: &std::path::Path, extra: &[&str]) -> std::process::Output {
    std::process::Command::new(WORKER)
        .args(["--server", "http://127.0.0.1:9", "--name", "host-a"])
        .arg("--token-file")
        .arg(token)
        .arg("--data-dir")
        .arg(data)
        .args(extra)
        .output()
        .unwrap()
}

/// Starts the agent against a server that never answers, waits for its
/// instance id, then SIGTERMs it: it must exit promptly (a register retry
/// loop must not keep it alive) and report the id it uses.
fn start_and_terminate(
    data: &std::path::Path,
    token: &std::path::Path,
    sock: &std::path::Path,
) -> std::time::Duration {
    let log = sock.with_extension("log");
    let mut child = std::process::Command::new(WORKER)
        .args(["--server", "http://127.0.0.1:9", "--name", "host-a"])
        .arg("--token-file")
        .arg(token)
        .arg("--data-dir")
        .arg(data)
        .arg("--tmux-socket")
        .arg(sock)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    // Up and retrying its registration (the server never answers).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !std::fs::read_to_string(&log)
        .unwrap_or_default()
        .contains("register failed")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent never tried to register"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(data.join("instance_id").exists());
    let t0 = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "{status}");
            return t0.elapsed();
        }
        if t0.elapsed() > std::time::Duration::from_secs(10) {
            let _ = child.kill();
            panic!("the agent ignored SIGTERM for 10 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

#[test]
fn agent_persists_its_instance_id_and_exits_promptly_on_sigterm() {
    let d = TestDir::new("agent");
    let token = d.path().join("token");
    std::fs::write(&token, "tok\n").unwrap();
    let data = d.path().join("data");
    let sock = d.path().join("tmux.sock");
    let took = start_and_terminate(&data, &token, &sock);
    assert!(took < std::time::Duration::from_secs(3), "{took:?}");
    let id = std::fs::read_to_string(data.join("instance_id")).unwrap();
    start_and_terminate(&data, &token, &sock);
    assert_eq!(
        std::fs::read_to_string(data.join("instance_id")).unwrap(),
        id,
        "reused on restart"
    );
}

#[test]
fn agent_reports_config_errors_by_key() {
    let d = TestDir::new("agent");
    let token = d.path().join("token");
    std::fs::write(&token, "tok").unwrap();
    let cfg = d.path().join("worker.toml");
    std::fs::write(&cfg, "heartbeat_secondz = 3\n").unwrap();
    let out = agent(
        &d.path().join("data"),
        &token,
        &["--config", cfg.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("heartbeat_secondz"));
    let out = agent(&d.path().join("data"), &d.path().join("no-token"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("token file"));
}

#[test]
fn agent_without_required_flags_is_a_usage_error() {
    let out = std::process::Command::new(WORKER).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--server"));
}
