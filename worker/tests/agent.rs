//! The agent entry point: config, instance id, and an honest refusal.

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

#[test]
fn agent_persists_its_instance_id_and_says_the_loop_is_missing() {
    let d = TestDir::new("agent");
    let token = d.path().join("token");
    std::fs::write(&token, "tok\n").unwrap();
    let data = d.path().join("data");
    let out = agent(&data, &token, &[]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("not implemented yet"), "{err}");
    let id = std::fs::read_to_string(data.join("instance_id")).unwrap();
    let out2 = agent(&data, &token, &[]);
    assert_eq!(out2.status.code(), Some(1));
    assert_eq!(
        std::fs::read_to_string(data.join("instance_id")).unwrap(),
        id,
        "reused on restart"
    );
    assert!(String::from_utf8_lossy(&out2.stderr).contains(id.trim()));
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
