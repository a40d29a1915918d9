//! Shared helpers: a private tmux server per test, polling with a timeout.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use pam_manifests::protocol::{Signal, SignalKind};
use pam_worker::outbox::Outbox;
use pam_worker::testdir::TestDir;
use pam_worker::tmux::{Socket, Tmux};

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
