//! What this host can run, as reported to pamd at registration
//! and again whenever it changes (checked every `capabilities_seconds` and
//! on SIGHUP): for each provider, whether its configured command (or the
//! built-in one) is found and starts, and the first x.y.z of what
//! `<program> --version` prints; the free bytes of the data dir's volume.
//! `exec` is always there: a run of it brings its own command.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use pam_manifests::protocol::{Capabilities, ProviderCapability};

use crate::config::Config;
use crate::providers::ProviderKind;

/// How long `<program> --version` may take: a CLI that hangs there is
/// taken as present, with no version.
const VERSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Output of `--version` read at most (the version is near the start).
const VERSION_OUTPUT_MAX: usize = 4096;

/// Probes every provider and the data volume.
pub async fn probe(config: &Config, data_dir: &Path) -> Capabilities {
    let mut providers = Vec::new();
    for kind in ProviderKind::ALL {
        if kind == ProviderKind::Exec {
            providers.push(ProviderCapability {
                name: kind.as_str().into(),
                version: None,
            });
            continue;
        }
        let own = config.providers.get(kind);
        let Some(program) = kind.program(own) else {
            continue;
        };
        let env = own.map(|p| p.env.clone()).unwrap_or_default();
        match version_of(&program, &env).await {
            Ok(version) => providers.push(ProviderCapability {
                name: kind.as_str().into(),
                version,
            }),
            Err(e) => {
                tracing::debug!(provider = %kind, program, error = %e, "provider not available")
            }
        }
    }
    let mut caps = Capabilities {
        providers,
        workspace_free_bytes: None,
        workspace_min_free_bytes: None,
        runs_as_root: nix::unistd::geteuid().is_root(),
        unconfined_full: config.agents.allow_unconfined_full,
    };
    disk(config, data_dir, &mut caps);
    caps
}

/// Reads the data volume's free bytes into `caps` (cheap: checked every
/// heartbeat interval, where the providers are checked every
/// `capabilities_seconds`), with the threshold they are held to.
pub fn disk(config: &Config, data_dir: &Path, caps: &mut Capabilities) {
    caps.workspace_free_bytes = free_bytes(data_dir);
    caps.workspace_min_free_bytes = Some(config.workspaces.min_free_bytes).filter(|&m| m > 0);
}

/// Whether `now` is worth reporting over `last`: another provider list or
/// version, free bytes moved by more than a tenth (they move with every
/// write; reporting each move would write the host row every check), or
/// crossed the threshold (dispatch must learn at once).
pub fn changed(last: &Capabilities, now: &Capabilities) -> bool {
    let far = match (last.workspace_free_bytes, now.workspace_free_bytes) {
        (Some(a), Some(b)) => a.abs_diff(b) > a / 10,
        (a, b) => a.is_some() != b.is_some(),
    };
    last.providers != now.providers
        || far
        || last.workspace_low() != now.workspace_low()
        || last.workspace_min_free_bytes != now.workspace_min_free_bytes
}

/// Starts `program --version`: `Err` when it cannot be started (not found,
/// not executable), else the version it printed, if any.
async fn version_of(
    program: &str,
    env: &std::collections::BTreeMap<String, String>,
) -> std::io::Result<Option<String>> {
    let child = tokio::process::Command::new(program)
        .arg("--version")
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let out = match tokio::time::timeout(VERSION_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        // Started, but no answer: present, version unknown.
        Ok(Err(_)) | Err(_) => return Ok(None),
    };
    let mut text = String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(VERSION_OUTPUT_MAX)])
        .into_owned();
    text.push('\n');
    text.push_str(&String::from_utf8_lossy(
        &out.stderr[..out.stderr.len().min(VERSION_OUTPUT_MAX)],
    ));
    Ok(pam_manifests::versions::lenient(&text).map(|v| v.to_string()))
}

/// Free bytes (for an unprivileged user) on the volume holding `dir`.
// The field types are u64 on Linux, narrower on macOS.
#[allow(clippy::unnecessary_cast)]
fn free_bytes(dir: &Path) -> Option<u64> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    Some((s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_command_is_left_out_and_exec_is_always_there() {
        let config = Config::parse(
            "[providers.claude]\ncommand = [\"/nonexistent/claude\"]\n[providers.codex]\ncommand = [\"sh\", \"-c\", \"x\"]\n",
            "t",
        )
        .unwrap();
        let caps = probe(&config, &std::env::temp_dir()).await;
        assert!(caps.provider("claude").is_none(), "{caps:?}");
        assert!(caps.provider("exec").is_some(), "{caps:?}");
        // sh starts (its --version answer is the shell's business).
        assert!(caps.provider("codex").is_some(), "{caps:?}");
        assert!(caps.workspace_free_bytes.is_some_and(|b| b > 0));
        assert_eq!(caps.workspace_min_free_bytes, Some(1 << 30));
    }

    #[test]
    fn crossing_the_threshold_is_a_change_however_small() {
        let at = |free: u64| Capabilities {
            providers: Vec::new(),
            workspace_free_bytes: Some(free),
            workspace_min_free_bytes: Some(1000),
            ..Capabilities::default()
        };
        assert!(!changed(&at(1001), &at(1000)), "a small move above it");
        assert!(changed(&at(1000), &at(999)), "crossed");
        assert!(changed(&at(999), &at(1000)), "crossed back");
        assert!(changed(&at(2000), &at(1000)), "a far move");
    }
}
