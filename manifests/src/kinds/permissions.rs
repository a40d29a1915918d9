//! What an agent may do without asking: a Run's `permissions` (defaulted
//! from its Task's, then its Project's). Each provider adapter of
//! pam-worker maps it to its CLI's own flags (docs/agents.md, "Permission
//! modes"); the policy is data, the mechanism is the CLI's.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How much an agent may do on its own.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub enum PermissionMode {
    /// Read and answer; no file change, no command that changes anything.
    ReadOnly,
    /// Change files in its working directory and run the commands a
    /// coding agent needs to build and test there (the default).
    #[default]
    Edits,
    /// Anything, without asking. Placed only on hosts that confine their
    /// runs and do not run agents as root, or whose operator accepted it
    /// (worker.toml `[agents] allow_unconfined_full`).
    Full,
}

impl PermissionMode {
    /// The value as written in manifests.
    pub const fn as_str(self) -> &'static str {
        match self {
            PermissionMode::ReadOnly => "readOnly",
            PermissionMode::Edits => "edits",
            PermissionMode::Full => "full",
        }
    }
}

impl fmt::Display for PermissionMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Most entries of `allowTools` or `denyTools`.
pub const PERMISSION_TOOLS_MAX: usize = 64;
/// Longest tool rule (`Bash(npm run test:*)`), in bytes.
pub const PERMISSION_TOOL_MAX_BYTES: usize = 256;

/// A run's permission policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Permissions {
    /// readOnly | edits | full; absent: edits.
    #[serde(default)]
    pub mode: PermissionMode,
    /// Tool rules allowed without asking, in the provider's own syntax
    /// (Claude `Bash(npm test:*)`, `WebFetch`; Gemini `run_shell_command(git)`),
    /// on top of what the mode allows. Providers without tool lists
    /// (Codex) ignore them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow_tools: Vec<String>,
    /// Tool rules never allowed, whatever the mode says.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny_tools: Vec<String>,
}

impl Permissions {
    /// Problems as (field path under `at`, message).
    pub fn problems(&self, at: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (field, list) in [
            ("allowTools", &self.allow_tools),
            ("denyTools", &self.deny_tools),
        ] {
            if list.len() > PERMISSION_TOOLS_MAX {
                out.push((
                    format!("{at}.{field}"),
                    format!(
                        "{} entries, expected at most {PERMISSION_TOOLS_MAX}",
                        list.len()
                    ),
                ));
            }
            for (i, rule) in list.iter().enumerate() {
                if let Some(why) = tool_rule_problem(rule) {
                    out.push((format!("{at}.{field}[{i}]"), why));
                }
            }
        }
        out
    }
}

/// Why `rule` is not a tool rule: empty, too long, or with control
/// characters (it becomes one argument of the provider's command line).
pub fn tool_rule_problem(rule: &str) -> Option<String> {
    if rule.trim().is_empty() {
        return Some("empty tool rule, expected a tool name such as Bash(git:*)".into());
    }
    if rule.len() > PERMISSION_TOOL_MAX_BYTES {
        return Some(format!(
            "tool rule of {} bytes, expected at most {PERMISSION_TOOL_MAX_BYTES}",
            rule.len()
        ));
    }
    if rule.chars().any(char::is_control) {
        return Some("tool rule with a control character".into());
    }
    None
}

/// Where a run's effective permissions came from (shown in its status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum PermissionsFrom {
    /// The run's own `spec.permissions`.
    Run,
    /// Its task's `spec.permissions`.
    Task,
    /// Its project's `spec.permissions`.
    Project,
    /// None of them: `mode: edits`.
    Default,
}

/// A run's permissions as they were settled when it was created (the
/// run's, else its task's, else its project's, else the default), and
/// where they came from. Fixed for the run's life, like the rest of what
/// it was admitted with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EffectivePermissions {
    #[serde(flatten)]
    pub permissions: Permissions,
    /// run | task | project | default.
    pub from: PermissionsFrom,
}

impl EffectivePermissions {
    /// The first of `run`, `task`, `project` that is set, else the default.
    pub fn resolve(
        run: Option<&Permissions>,
        task: Option<&Permissions>,
        project: Option<&Permissions>,
    ) -> EffectivePermissions {
        let found = [
            (run, PermissionsFrom::Run),
            (task, PermissionsFrom::Task),
            (project, PermissionsFrom::Project),
        ]
        .into_iter()
        .find_map(|(p, from)| p.map(|p| (p.clone(), from)));
        let (permissions, from) =
            found.unwrap_or((Permissions::default(), PermissionsFrom::Default));
        EffectivePermissions { permissions, from }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nearest_declaration_wins_whole() {
        let full = Permissions {
            mode: PermissionMode::Full,
            ..Permissions::default()
        };
        let ro = Permissions {
            mode: PermissionMode::ReadOnly,
            deny_tools: vec!["WebFetch".into()],
            ..Permissions::default()
        };
        let e = EffectivePermissions::resolve(None, Some(&ro), Some(&full));
        assert_eq!(
            (e.permissions.mode, e.from),
            (PermissionMode::ReadOnly, PermissionsFrom::Task)
        );
        assert_eq!(e.permissions.deny_tools, ["WebFetch"]);
        let e = EffectivePermissions::resolve(None, None, None);
        assert_eq!(
            (e.permissions.mode, e.from),
            (PermissionMode::Edits, PermissionsFrom::Default)
        );
        let e = EffectivePermissions::resolve(Some(&full), Some(&ro), None);
        assert_eq!(e.from, PermissionsFrom::Run);
    }

    #[test]
    fn modes_read_as_written_and_default_to_edits() {
        let p: Permissions = serde_json::from_str(r#"{"mode":"readOnly"}"#).unwrap();
        assert_eq!(p.mode, PermissionMode::ReadOnly);
        let p: Permissions = serde_json::from_str(r#"{"allowTools":["Bash(make:*)"]}"#).unwrap();
        assert_eq!(p.mode, PermissionMode::Edits);
        assert!(serde_json::from_str::<Permissions>(r#"{"mode":"yolo"}"#).is_err());
        assert!(serde_json::from_str::<Permissions>(r#"{"modes":"full"}"#).is_err());
    }

    #[test]
    fn bad_tool_rules_are_named_by_field() {
        let p = Permissions {
            allow_tools: vec!["Bash(ls:*)".into(), "".into()],
            deny_tools: vec!["a\nb".into(), "x".repeat(300)],
            ..Permissions::default()
        };
        let fields: Vec<String> = p
            .problems("spec.permissions")
            .into_iter()
            .map(|(f, _)| f)
            .collect();
        assert_eq!(
            fields,
            [
                "spec.permissions.allowTools[1]",
                "spec.permissions.denyTools[0]",
                "spec.permissions.denyTools[1]"
            ]
        );
    }
}
