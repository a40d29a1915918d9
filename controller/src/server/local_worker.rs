//! `pamd --local-worker`: pamd runs a pam-worker for its own machine, so
//! one command gives a working single-host pam.
//!
//! - The host name is `$PAM_LOCAL_WORKER_NAME`, else this machine's host
//!   name made a valid pam name (lowercase, `[a-z0-9-]`, up to the first
//!   dot), else `localhost`.
//! - pamd creates the worker token itself (a worker token for that host,
//!   named `local-worker`) and keeps it in `<data_dir>/local-worker.token`
//!   (mode 0600); an existing unrevoked one is reused across restarts.
//! - With TLS on, it connects over https:// and trusts `<data_dir>/tls/ca.pem`
//!   (`--tls-self-signed`'s CA, or an operator's put there).
//! - The worker's data dir is `<data_dir>/worker`; `<data_dir>/worker.toml`
//!   is passed as its config when it exists.
//! - pam-worker is looked up next to pamd's own executable (then on PATH).
//! - A worker that exits is started again after a second; at shutdown pamd
//!   sends it SIGTERM. Its pid is kept in `<data_dir>/local-worker.pid`, so
//!   a worker left behind by a pamd that was killed is stopped (SIGTERM)
//!   before a new one starts (Linux: only if that pid still runs
//!   pam-worker).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;

use pam_store::TokenKind;

use super::secrets::ensure_token_file;
use crate::ctx::Ctx;

pub const TOKEN_FILE: &str = "local-worker.token";
const PID_FILE: &str = "local-worker.pid";
const TOKEN_NAME: &str = "local-worker";

/// The local host's pam name.
pub fn host_name() -> String {
    if let Ok(n) = std::env::var("PAM_LOCAL_WORKER_NAME") {
        if !n.trim().is_empty() {
            return n.trim().to_string();
        }
    }
    sanitize(&machine_host_name().unwrap_or_default())
}

/// The machine's host name as the system has it (trimmed), if any.
pub fn machine_host_name() -> Option<String> {
    let raw = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| {
            std::process::Command::new("hostname")
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        })?;
    let h = raw.trim();
    (!h.is_empty()).then(|| h.to_string())
}

fn sanitize(raw: &str) -> String {
    let first = raw
        .trim()
        .split('.')
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    let mut s: String = first
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    s = s.trim_matches('-').to_string();
    s.truncate(63);
    let s = s.trim_matches('-').to_string();
    if s.is_empty() || pam_manifests::Name::parse(&s).is_err() {
        "localhost".to_string()
    } else {
        s
    }
}

/// Makes sure `<data_dir>/local-worker.token` holds a valid worker token
/// for `host`; returns its path.
pub async fn ensure_token(ctx: &Ctx, data_dir: &Path, host: &str) -> anyhow::Result<PathBuf> {
    let path = data_dir.join(TOKEN_FILE);
    ensure_token_file(ctx, &path, TokenKind::Worker, TOKEN_NAME, Some(host)).await?;
    Ok(path)
}

/// The pam-worker binary: next to pamd, else `pam-worker` on PATH.
pub fn worker_exe() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("pam-worker")))
        .filter(|p| p.exists())
        .unwrap_or_else(|| PathBuf::from("pam-worker"))
}

/// Stops a worker a previous (killed) pamd left running.
fn stop_leftover(data_dir: &Path) {
    let Ok(text) = std::fs::read_to_string(data_dir.join(PID_FILE)) else {
        return;
    };
    let Ok(pid) = text.trim().parse::<i32>() else {
        return;
    };
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    if String::from_utf8_lossy(&cmdline).contains("pam-worker") {
        tracing::warn!(pid, "stopping a local worker left by an earlier pamd");
        let _ = nix_kill(pid);
    }
}

fn nix_kill(pid: i32) -> std::io::Result<()> {
    std::process::Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .map(drop)
}

/// Runs the local worker (restarting it when it exits) until the returned
/// handle's future is dropped; the child gets SIGTERM then.
pub struct LocalWorker {
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl LocalWorker {
    pub async fn start(
        ctx: &Ctx,
        data_dir: &Path,
        server_url: String,
        ca_file: Option<PathBuf>,
    ) -> anyhow::Result<LocalWorker> {
        let host = host_name();
        let token_file = ensure_token(ctx, data_dir, &host)
            .await
            .context("create the local worker's token")?;
        stop_leftover(data_dir);
        let worker_data = data_dir.join("worker");
        std::fs::create_dir_all(&worker_data)?;
        let config = data_dir.join("worker.toml");
        let exe = worker_exe();
        tracing::info!(%host, exe = %exe.display(), "starting the local worker");
        let (stop, mut stopped) = tokio::sync::watch::channel(false);
        let pid_file = data_dir.join(PID_FILE);
        let task = tokio::spawn(async move {
            loop {
                let mut cmd = tokio::process::Command::new(&exe);
                cmd.arg("--server")
                    .arg(&server_url)
                    .arg("--token-file")
                    .arg(&token_file)
                    .arg("--name")
                    .arg(&host)
                    .arg("--data-dir")
                    .arg(&worker_data)
                    .stdin(std::process::Stdio::null())
                    .kill_on_drop(true);
                if config.exists() {
                    cmd.arg("--config").arg(&config);
                }
                if let Some(ca) = &ca_file {
                    cmd.arg("--ca-file").arg(ca);
                }
                let mut child = match cmd.spawn() {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::error!(exe = %exe.display(), error = %e, "cannot start the local worker (build it: cargo build --workspace --bins)");
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                            _ = stopped.changed() => return,
                        }
                    }
                };
                if let Some(pid) = child.id() {
                    let _ = std::fs::write(&pid_file, pid.to_string());
                }
                tokio::select! {
                    status = child.wait() => {
                        tracing::warn!(?status, "the local worker exited; starting it again");
                        tokio::select! {
                            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                            _ = stopped.changed() => return,
                        }
                    }
                    _ = stopped.changed() => {
                        if let Some(pid) = child.id() {
                            let _ = nix_kill(pid as i32);
                        }
                        let _ = tokio::time::timeout(Duration::from_secs(3), child.wait()).await;
                        let _ = std::fs::remove_file(&pid_file);
                        return;
                    }
                }
            }
        });
        Ok(LocalWorker { stop, task })
    }

    /// SIGTERM to the worker, waiting briefly for it to exit.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(5), self.task).await;
    }
}

#[cfg(test)]
mod tests {
    use super::sanitize;

    #[test]
    fn host_names_become_valid_names() {
        assert_eq!(sanitize("Build-Box.example.com\n"), "build-box");
        assert_eq!(sanitize("my_mac"), "my-mac");
        assert_eq!(sanitize(""), "localhost");
        assert_eq!(sanitize("---"), "localhost");
    }
}
