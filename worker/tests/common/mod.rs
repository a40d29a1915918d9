//! Shared helpers: a private tmux server per test, polling with a timeout.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use pam_manifests::protocol::{session_name, DesiredRun, Signal, SignalKind};
use pam_worker::outbox::Outbox;
use pam_worker::testdir::TestDir;
use pam_worker::tmux::{Socket, Tmux};
use uuid::Uuid;

pub const WORKER: &str = env!("CARGO_BIN_EXE_pam-worker");
pub const FAKE: &str = env!("CARGO_BIN_EXE_pam-fake-provider");

/// A tmux server on its own socket (`-S` in a temp dir), killed on drop;
/// the socket file goes with the directory.
pub struct PrivateTmux {
    pub tmux: Tmux,
    sock: std::path::PathBuf,
    _dir: TestDir,
}

impl PrivateTmux {
    pub fn new() -> PrivateTmux {
        let dir = TestDir::new("tmux-sock");
        let sock = dir.path().join("tmux.sock");
        PrivateTmux {
            tmux: Tmux::new(Socket::Path(sock.clone())),
            sock,
            _dir: dir,
        }
    }
}

impl Drop for PrivateTmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux")
            .arg("-S")
            .arg(&self.sock)
            .arg("kill-server")
            .output();
    }
}

/// Polls `f` every 20 ms until it returns Some, or panics after `secs`.
pub async fn eventually<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {secs}s waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub fn signals(ob: &Outbox) -> Vec<Signal> {
    ob.pending(usize::MAX)
        .unwrap()
        .into_iter()
        .map(|(_, s)| s)
        .collect()
}

pub fn kinds(sigs: &[Signal]) -> Vec<SignalKind> {
    sigs.iter().map(|s| s.kind).collect()
}

/// Attempt 3 of `run` on `provider` in `cwd`, with a prompt full of shell
/// and tmux metacharacters and one environment variable.
pub fn desired(run: Uuid, cwd: &Path, provider: &str) -> DesiredRun {
    DesiredRun {
        run_id: run,
        attempt: 3,
        session_name: session_name(run),
        provider: provider.into(),
        prompt: "fix it; don't $break;".into(),
        cwd: cwd.to_string_lossy().into_owned(),
        command: None,
        env: BTreeMap::from([("FAKE_ECHO_ENV".to_string(), "secret-ish".to_string())]),
        env_error: None,
        stop: false,
        signals: vec![],
        input: vec![],
        workspace: None,
        permissions: None,
    }
}
