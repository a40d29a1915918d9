//! The `Run` kind: one execution of a task by a provider CLI on a host.

use super::*;

/// The CLI a run executes.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// Claude Code (`claude -p --output-format stream-json`).
    Claude,
    /// Codex CLI (`codex exec --json`).
    Codex,
    /// Gemini CLI (`gemini -p --output-format stream-json`).
    Gemini,
    /// Grok CLI (`grok -p`).
    Grok,
    /// An arbitrary argv given in `spec.command`.
    Exec,
}

impl Provider {
    /// The value as written in manifests and stored.
    pub const fn as_str(self) -> &'static str {
        match self {
            Provider::Claude => "claude",
            Provider::Codex => "codex",
            Provider::Gemini => "gemini",
            Provider::Grok => "grok",
            Provider::Exec => "exec",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a run may be dispatched: one named host, or any host whose labels
/// match every `key: value` of the selector. No target: any eligible host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum Target {
    /// `host: NAME` — only this host.
    Host(Name),
    /// `selector: {k: v}` — hosts whose labels contain all these pairs.
    Selector(Labels),
}

impl Target {
    /// The selector's pairs, for callers that build a target from
    /// `key=value` text.
    pub fn selector<I: IntoIterator<Item = (LabelKey, LabelValue)>>(pairs: I) -> Target {
        Target::Selector(pairs.into_iter().collect())
    }
}

/// When a failed run is requeued (failed → pending).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestartPolicy {
    /// Attempts in all, the first included (≥ 1; 1 = never restart).
    #[serde(
        default = "default_max_attempts",
        deserialize_with = "bounded::nonzero_i32"
    )]
    #[schemars(range(min = 1, max = 2147483647))]
    pub max_attempts: NonZeroU32,
    /// Wait before the first requeue; doubles per attempt.
    #[serde(default = "default_backoff", deserialize_with = "bounded::u32_i32")]
    #[schemars(range(max = 2147483647))]
    pub backoff_seconds: u32,
    /// Upper bound of the doubling wait.
    #[serde(default = "default_backoff_max", deserialize_with = "bounded::u32_i32")]
    #[schemars(range(max = 2147483647))]
    pub backoff_max_seconds: u32,
}

fn default_max_attempts() -> NonZeroU32 {
    NonZeroU32::MIN
}
fn default_backoff() -> u32 {
    10
}
fn default_backoff_max() -> u32 {
    300
}

impl Default for RestartPolicy {
    fn default() -> Self {
        RestartPolicy {
            max_attempts: default_max_attempts(),
            backoff_seconds: default_backoff(),
            backoff_max_seconds: default_backoff_max(),
        }
    }
}

/// Desired state of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunSpec {
    /// The task or subtask (a name in the run's project). Immutable.
    pub task: Name,
    /// The CLI to run. Immutable.
    pub provider: Provider,
    /// The provider version a host must report for it: a
    /// semver requirement such as `>=1.2` or `^2`, matched against the
    /// first x.y.z of the CLI's `--version` output. Absent: any host that
    /// has the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_version: Option<String>,
    /// The prompt given to the provider. Immutable.
    #[serde(default)]
    pub prompt: String,
    /// Working directory on the worker host. Immutable. Required unless
    /// the run has a workspace (its own or its task's default), and
    /// refused with one: the workspace is the provider's cwd.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub cwd: String,
    /// A git worktree of the project's repository on a new branch, made
    /// by the worker before the provider starts and its cwd.
    /// Absent with no `cwd`: the task's `spec.workspace`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// Where it may run; absent = any eligible host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<Target>,
    /// Restart policy for failed attempts.
    #[serde(default)]
    pub restart_policy: RestartPolicy,
    /// Seconds a pending run waits for a host before failing; absent = the
    /// controller's `[dispatch] timeout_seconds`.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "bounded::opt_nonzero_i32"
    )]
    #[schemars(range(min = 1, max = 2147483647))]
    pub dispatch_timeout_seconds: Option<NonZeroU32>,
    /// Desired stop: true stops the run and keeps it from restarting.
    #[serde(default, skip_serializing_if = "is_false")]
    pub stopped: bool,
    /// The argv for provider `exec` (required there, refused otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// What all attempts together may use: reaching it stops
    /// the run, which fails with `budget_exceeded`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Environment variables of the provider process: a
    /// literal `value`, or `valueFrom.secretKeyRef` — one key of a Secret
    /// of the run's project. Over `envFrom` for a name in both.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<EnvVar>,
    /// Every key of these Secrets (of the run's project) as an environment
    /// variable of the same name; keys that are not valid variable names
    /// are left out.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env_from: Vec<EnvFromSource>,
    /// What the agent may do without asking (`mode: readOnly | edits |
    /// full`, tool rules). Absent: its task's, else its project's, else
    /// `mode: edits`; settled when the run is created
    /// (`status.permissions`). Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
}

/// One environment variable of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVar {
    /// The variable's name: a letter or `_`, then letters, digits, `_`.
    pub name: String,
    /// A literal value (not secret: it is stored and printed as is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Where the value comes from instead of `value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
}

/// Where an environment variable's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvVarSource {
    /// One key of a Secret of the run's project.
    pub secret_key_ref: SecretKeySelector,
}

/// One key of a Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeySelector {
    /// The Secret's name.
    pub name: Name,
    /// The key in it.
    pub key: String,
    /// The Secret's project, when written: it must be the run's own (a
    /// run never reads another project's Secrets).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<Name>,
}

/// A Secret whose every key becomes an environment variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EnvFromSource {
    /// The Secret.
    pub secret_ref: SecretRef,
}

/// A Secret, by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretRef {
    /// The Secret's name.
    pub name: Name,
    /// The Secret's project, when written: it must be the run's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<Name>,
}

/// Whether `name` is a valid environment variable name.
pub fn valid_env_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

impl RunSpec {
    /// Problems of `env`/`envFrom` as (field path, message), for a run of
    /// `project`: names, one source per variable, no other project's
    /// Secret, a valid key.
    pub fn env_problems(&self, project: &Name) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let other = |p: &Option<Name>| p.as_ref().filter(|p| *p != project).cloned();
        for (i, var) in self.env.iter().enumerate() {
            let at = format!("spec.env[{i}]");
            if !valid_env_name(&var.name) {
                out.push((format!("{at}.name"), format!("invalid variable name {:?}, expected a letter or '_' then letters, digits or '_'", var.name)));
            }
            match (&var.value, &var.value_from) {
                (Some(_), Some(_)) => out.push((
                    at.clone(),
                    "both value and valueFrom, expected one of them".into(),
                )),
                (None, None) => out.push((
                    at.clone(),
                    "neither value nor valueFrom, expected one of them".into(),
                )),
                _ => {}
            }
            if let Some(from) = &var.value_from {
                let r = &from.secret_key_ref;
                if let Some(p) = other(&r.project) {
                    out.push((format!("{at}.valueFrom.secretKeyRef.project"), format!("Secret {:?} of project {p:?}: a run reads only its own project's Secrets, expected project {project:?} or no project", r.name.as_str())));
                }
                if !valid_secret_key(&r.key) {
                    out.push((format!("{at}.valueFrom.secretKeyRef.key"), format!("invalid key {:?}, expected 1 to {SECRET_KEY_MAX_BYTES} letters, digits, '-', '_' or '.'", r.key)));
                }
            }
        }
        for (i, from) in self.env_from.iter().enumerate() {
            if let Some(p) = other(&from.secret_ref.project) {
                out.push((format!("spec.envFrom[{i}].secretRef.project"), format!("Secret {:?} of project {p:?}: a run reads only its own project's Secrets, expected project {project:?} or no project", from.secret_ref.name.as_str())));
            }
        }
        out
    }

    /// The Secrets the run's environment reads, by name (each once).
    pub fn secret_names(&self) -> std::collections::BTreeSet<&Name> {
        self.env
            .iter()
            .filter_map(|v| v.value_from.as_ref().map(|f| &f.secret_key_ref.name))
            .chain(self.env_from.iter().map(|f| &f.secret_ref.name))
            .collect()
    }
}

/// Observed state of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedRun {
    /// The run's status (`runs.status`).
    pub phase: RunStatus,
    /// The current attempt (incarnation epoch), from 1.
    pub attempt: u32,
    /// The host it was dispatched to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// tmux session name (`pam-<8 hex>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    /// Exit code of the last attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Why it failed, when the failure has a distinct reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<FailureReason>,
    /// Why, in words (a spawn failure's cause as the worker saw it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// RFC 3339: the dispatch-timeout anchor (OQ-15).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_since: Option<String>,
    /// Token usage and cost; absent until the provider
    /// reported any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<RunUsageStatus>,
    /// The permissions the run was created with, and where they came
    /// from (its own spec, its task's, its project's, the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<EffectivePermissions>,
    /// The provider's session id of the current attempt (claude's
    /// `session_id`, codex's `thread_id`), once the provider reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The newest thing the agent did in the current attempt (`describe
    /// run` shows the last few: `GET …/runs/{name}/activity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity: Option<crate::protocol::Entry>,
    /// The latest attempt's workspace result: its branch,
    /// commits and diff stats; absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<RunResult>,
    /// Who asked for the stop (`spec.stopped`), when a request did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<Actor>,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Who made a request (the audit trail, the `actor` of events):
/// the token's name and role, and the OIDC subject when signed in that way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Actor {
    pub name: String,
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
}
