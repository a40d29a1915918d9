//! worker.toml: every key optional, unknown keys are errors naming the key.
//!
//! ```toml
//! tmux_socket = "pam"          # tmux -L pam; a value with a '/' is a path (-S)
//! heartbeat_seconds = 30
//! tick_seconds = 5             # local tmux check (polling an older pamd: the reconcile tick)
//! resync_seconds = 300         # safety-net claim and read of the desired set while watching pamd
//! stop_grace_seconds = 10
//! snapshot_interval_ms = 1000
//! capacity = 4                 # runs at once on this host
//! capabilities_seconds = 300   # how often the providers are checked again (also on SIGHUP)
//! labels = { gpu = "no" }      # shown and selected as worker.pam.dev/gpu=no
//! ca_file = "/etc/pam/ca.pem"  # trust only this CA for https:// (--ca-file wins)
//!
//! [workspaces]                # runs with a git workspace
//! patch_max_bytes = 1048576    # the longest patch reported (cut, and said so, past it)
//! author_name = "pam-worker"   # author and committer of the automatic commit
//! author_email = "pam@HOST"    # default: pam@ this host's name
//! credentials_file = "/etc/pam/git-credentials"  # https://user:token@host lines, read only
//! min_free_bytes = 1073741824  # below this free on the data dir's volume, no workspace runs
//! retain_hours = 72            # worktrees kept (keep: always/onFailure) are removed after this
//!
//! [logs]
//! retain_days = 30             # runs/<run_id>/ (logs, transcripts) of runs no longer desired go after this
//!
//! [agents]
//! allow_unconfined_full = false  # accept `permissions: full` runs on this unconfined host
//!
//! [providers.claude]
//! program = "/opt/claude/bin/claude"   # the built-in arguments, another program
//! command = ["claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose", "{permissions}"]
//! env = { ANTHROPIC_LOG = "error" }
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Deserialize;

use crate::providers::ProvidersConfig;
use crate::tmux::Socket;

/// The worker's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The tmux socket all pam sessions live on: a name (`tmux -L`) or, when
    /// it contains a `/`, a path (`tmux -S`). Default `pam`, so pam's
    /// sessions never mix with the user's own.
    pub tmux_socket: String,
    /// Seconds between heartbeats, unless the controller says otherwise.
    pub heartbeat_seconds: u64,
    /// Seconds between local tmux checks (a pass that calls pamd only when
    /// a session appeared or vanished, or a stop, loss or orphan is being
    /// timed); against a pamd without the watch route, the
    /// polling reconcile tick.
    pub tick_seconds: u64,
    /// Seconds between safety-net reads of the desired set (and a claim)
    /// while pamd's watch stream is open. Every change reaches
    /// the worker through the watch, and every heartbeat's answer is the
    /// desired set too (checked against the last read), so this is the
    /// third net: 300 s (it was 60, two requests a minute per host that
    /// were a third of an idle 10,000-host fleet's requests).
    pub resync_seconds: u64,
    /// Seconds a stopped run gets after SIGTERM before its session is killed.
    pub stop_grace_seconds: u64,
    /// Minimum milliseconds between two output snapshots of one run.
    pub snapshot_interval_ms: u64,
    /// How many runs this host runs at once (reported at registration; a
    /// Host manifest's capacity wins).
    pub capacity: u32,
    /// Seconds between two checks of what this host can run (which providers'
    /// commands start, their versions, free bytes); a change is reported to
    /// pamd at once. SIGHUP checks now.
    pub capabilities_seconds: u64,
    /// Host labels reported at registration. pamd files each under
    /// `worker.pam.dev/` (a key with another prefix is refused), so they
    /// satisfy only selectors naming that key, never an operator's label
    /// (docs/operations.md, "Host labels").
    pub labels: BTreeMap<String, String>,
    /// Per-provider overrides.
    pub providers: ProvidersConfig,
    /// The CA file an https:// pamd must chain to (`--ca-file` wins).
    pub ca_file: Option<PathBuf>,
    /// Runs with a git workspace.
    pub workspaces: WorkspacesConfig,
    /// What agents may be allowed on this host.
    pub agents: AgentsConfig,
    /// Runs' logs and transcripts kept on this host.
    pub logs: LogsConfig,
}

/// `[logs]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogsConfig {
    /// A run's directory under `runs/` (its attempts' logs, time indexes
    /// and transcripts) is removed by the worker's hourly sweep once every
    /// file in it is older than this and the run is not in the desired set.
    pub retain_days: u64,
}

impl Default for LogsConfig {
    fn default() -> Self {
        LogsConfig { retain_days: 30 }
    }
}

/// `[agents]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentsConfig {
    /// Accept runs with `permissions: full` although this host does not
    /// confine them: every such agent may do anything this worker's user
    /// can (docs/agents.md, "Permission modes"). Off by default.
    pub allow_unconfined_full: bool,
}

/// `[workspaces]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WorkspacesConfig {
    /// The longest patch sent to pamd; a longer one is cut at a line and
    /// marked truncated. At most `protocol::RESULT_PATCH_MAX_BYTES`.
    pub patch_max_bytes: usize,
    /// Author and committer name of the automatic commit.
    pub author_name: String,
    /// Their email; absent: `pam@<host name>`.
    pub author_email: Option<String>,
    /// A git-credential-store file (`https://user:token@host`, one per
    /// line) for http(s) repositories: read for clone, fetch and push,
    /// never written. Credentials never come from a manifest.
    pub credentials_file: Option<PathBuf>,
    /// Below this many free bytes on the data dir's volume the host takes
    /// no run with a workspace (reported with its capabilities; dispatch
    /// says "low on workspace disk"). 0: no threshold.
    pub min_free_bytes: u64,
    /// A worktree left after its attempt ended (`keep: always`, or
    /// `onFailure` after a failure) is removed this long after it ended
    /// by the worker's sweep; its branch stays.
    pub retain_hours: u64,
}

impl Default for WorkspacesConfig {
    fn default() -> Self {
        WorkspacesConfig {
            patch_max_bytes: 1 << 20,
            author_name: "pam-worker".into(),
            author_email: None,
            credentials_file: None,
            min_free_bytes: 1 << 30,
            retain_hours: 72,
        }
    }
}

impl WorkspacesConfig {
    /// What [`crate::workspace::prepare`] needs.
    pub fn settings(&self) -> crate::workspace::Settings {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "localhost".into());
        crate::workspace::Settings {
            author_name: self.author_name.clone(),
            author_email: self
                .author_email
                .clone()
                .unwrap_or_else(|| format!("pam@{host}")),
            patch_max_bytes: self.patch_max_bytes,
            credentials_file: self.credentials_file.clone(),
        }
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            tmux_socket: "pam".into(),
            heartbeat_seconds: 30,
            tick_seconds: 5,
            resync_seconds: 300,
            stop_grace_seconds: 10,
            snapshot_interval_ms: 1000,
            capacity: 4,
            capabilities_seconds: 300,
            labels: BTreeMap::new(),
            providers: ProvidersConfig::default(),
            ca_file: None,
            workspaces: WorkspacesConfig::default(),
            agents: AgentsConfig::default(),
            logs: LogsConfig::default(),
        }
    }
}

impl Config {
    /// Parses worker.toml text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> anyhow::Result<Config> {
        let cfg: Config =
            toml::from_str(text).with_context(|| format!("parse worker config {origin}"))?;
        cfg.validate()
            .with_context(|| format!("check worker config {origin}"))?;
        Ok(cfg)
    }

    /// Reads `path`, or returns the defaults when `path` is `None`.
    pub fn load(path: Option<&Path>) -> anyhow::Result<Config> {
        match path {
            None => Ok(Config::default()),
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("read worker config {}", p.display()))?;
                Config::parse(&text, &p.display().to_string())
            }
        }
    }

    /// The tmux socket to use.
    pub fn socket(&self) -> Socket {
        if self.tmux_socket.contains('/') {
            Socket::Path(PathBuf::from(&self.tmux_socket))
        } else {
            Socket::Name(self.tmux_socket.clone())
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        for (key, v) in [
            ("heartbeat_seconds", self.heartbeat_seconds),
            ("tick_seconds", self.tick_seconds),
            ("resync_seconds", self.resync_seconds),
            ("snapshot_interval_ms", self.snapshot_interval_ms),
            ("capacity", u64::from(self.capacity)),
            ("capabilities_seconds", self.capabilities_seconds),
            ("workspaces.retain_hours", self.workspaces.retain_hours),
            ("logs.retain_days", self.logs.retain_days),
        ] {
            anyhow::ensure!(v > 0, "{key} must be greater than 0");
        }
        anyhow::ensure!(
            !self.tmux_socket.is_empty(),
            "tmux_socket must not be empty"
        );
        let max = pam_manifests::protocol::RESULT_PATCH_MAX_BYTES;
        anyhow::ensure!(
            (1..=max).contains(&self.workspaces.patch_max_bytes),
            "workspaces.patch_max_bytes must be 1 to {max}"
        );
        anyhow::ensure!(
            !self.workspaces.author_name.trim().is_empty(),
            "workspaces.author_name must not be empty"
        );
        self.providers.validate()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults() {
        let c = Config::parse("", "test").unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.heartbeat_seconds, 30);
        assert_eq!(c.stop_grace_seconds, 10);
        assert_eq!(c.socket(), Socket::Name("pam".into()));
    }

    #[test]
    fn full_file() {
        let c = Config::parse(
            r#"
            tmux_socket = "/tmp/pam.sock"
            heartbeat_seconds = 5
            tick_seconds = 1
            stop_grace_seconds = 2
            snapshot_interval_ms = 250
            [providers.claude]
            command = ["claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose"]
            env = { A = "1" }
            "#,
            "test",
        )
        .unwrap();
        assert_eq!(c.socket(), Socket::Path("/tmp/pam.sock".into()));
        assert_eq!(c.providers.claude.unwrap().env["A"], "1");
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = format!(
            "{:#}",
            Config::parse("heartbeat_secs = 3", "w.toml").unwrap_err()
        );
        assert!(e.contains("heartbeat_secs"), "{e}");
        let e = format!(
            "{:#}",
            Config::parse("[providers.copilot]\ncommand=[\"x\"]", "w.toml").unwrap_err()
        );
        assert!(e.contains("copilot"), "{e}");
        let e = format!(
            "{:#}",
            Config::parse("[providers.claude]\ncmd=[\"x\"]", "w.toml").unwrap_err()
        );
        assert!(e.contains("cmd"), "{e}");
        let e = format!(
            "{:#}",
            Config::parse("[providers.codex]\ncommand=[]", "w.toml").unwrap_err()
        );
        assert!(e.contains("providers.codex.command"), "{e}");
        let e = format!(
            "{:#}",
            Config::parse("tick_seconds = 0", "w.toml").unwrap_err()
        );
        assert!(e.contains("tick_seconds"), "{e}");
    }
}
