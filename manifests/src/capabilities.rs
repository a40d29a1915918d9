//! What a host can run, as its worker reports it in the
//! protocol's `RegisterRequest` and pamd shows it in a Host's
//! `status.capabilities`.

use serde::{Deserialize, Serialize};

/// What a worker reports it can run: sent at registration and
/// again whenever it changes (the worker checks on a cadence and on
/// SIGHUP). Dispatch gives a host only runs whose provider is listed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Capabilities {
    /// The providers whose command was found and started (`exec` always:
    /// a run brings its own command).
    #[serde(default)]
    pub providers: Vec<ProviderCapability>,
    /// Free bytes on the volume of the worker's data dir, where the runs'
    /// logs live; absent when it could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_free_bytes: Option<u64>,
    /// The worker's `[workspaces] min_free_bytes`: below it the
    /// host takes no run with a workspace ([`Capabilities::workspace_low`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_min_free_bytes: Option<u64>,
    /// The worker starts agents as root (uid 0). Claude Code refuses to
    /// skip its permission prompts as root, and nothing an agent does
    /// there is out of reach.
    #[serde(default, skip_serializing_if = "is_false")]
    pub runs_as_root: bool,
    /// The host's operator accepts runs with `permissions: full` although
    /// the host does not confine them (worker.toml `[agents]
    /// allow_unconfined_full = true`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub unconfined_full: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Capabilities {
    /// The entry for `provider`, if the host has it.
    pub fn provider(&self, provider: &str) -> Option<&ProviderCapability> {
        self.providers.iter().find(|p| p.name == provider)
    }

    /// Whether a run with `permissions: full` may be placed here: the one
    /// rule, read by dispatch and by the scheduling explanation. Only an
    /// operator who accepted unconfined full autonomy on this host allows
    /// it (a host that reported no capabilities does not).
    pub fn allows_full_permissions(&self) -> bool {
        self.unconfined_full
    }

    /// Whether the workspace volume is below the worker's threshold
    /// (such a host takes no run with a workspace). Unknown free
    /// bytes or no threshold: not low.
    pub fn workspace_low(&self) -> bool {
        matches!(
            (self.workspace_free_bytes, self.workspace_min_free_bytes),
            (Some(free), Some(min)) if free < min
        )
    }
}

/// One provider a host can start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderCapability {
    /// The provider's name (`claude`, `codex`, `gemini`, `grok`, `exec`).
    pub name: String,
    /// The first x.y.z of its `--version` output; absent when it printed
    /// none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}
