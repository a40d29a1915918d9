//! The `Host` kind: a worker host.

use super::*;

/// Desired state of a worker host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HostSpec {
    /// macos | linux.
    pub platform: Platform,
    /// Excluded from dispatch when true.
    #[serde(default)]
    pub disabled: bool,
    /// Operator-set labels, like `metadata.labels`: with them and the
    /// worker's own report (kept under `worker.pam.dev/`) they make
    /// `status.labels`, the one set Run `target.selector` and `pamctl get
    /// hosts -l` match. Keys under `worker.pam.dev/` are refused here.
    #[serde(default, skip_serializing_if = "Labels::is_empty")]
    pub labels: Labels,
    /// Runs it may hold at once (spawning + running).
    #[serde(default = "default_capacity", deserialize_with = "bounded::u32_i32")]
    #[schemars(range(max = 2147483647))]
    pub capacity: u32,
}

fn default_capacity() -> u32 {
    4
}

/// Observed state of a host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedHost {
    /// registered | online | offline | disabled.
    pub phase: HostStatus,
    /// The pinned instance id disagrees with a recent presenter (OQ-14).
    #[serde(default)]
    pub instance_suspect: bool,
    /// RFC 3339: when `instanceSuspect` last became true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_flagged_at: Option<String>,
    /// RFC 3339: last heartbeat.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seen_at: Option<String>,
    /// Runs spawning or running on it now.
    #[serde(default)]
    pub running_runs: u32,
    /// The host's one label set: metadata.labels with spec.labels over
    /// them (set by operators), and the labels its worker reports, each
    /// under `worker.pam.dev/`. Run target selectors and `pamctl get hosts
    /// -l` match these; a selector matches a worker's report only by
    /// naming a `worker.pam.dev/` key.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub labels: std::collections::BTreeMap<String, String>,
    /// What its worker last reported it can run: the providers
    /// whose command it found and started, with their versions, and the
    /// free bytes of its data volume. Absent until a worker that reports
    /// them registers (such a host is given any provider's runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<crate::protocol::Capabilities>,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
