//! The `Source` kind (GitOps): where desired state lives — a directory on
//! pamd's host (`spec.path`) or a git repository (`spec.git`) — which
//! projects it may write, and how pamd keeps the cluster in sync with it.
//!
//! A Source is cluster-scoped, like a Project or a Host. Its status is the
//! sync loop's: the revision applied, sync (Synced | OutOfSync | Failed),
//! health (Healthy | Progressing | Degraded), drift, the last errors with
//! file:line, and the inventory size.

use std::fmt;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::names::Name;

/// A git repository to pull desired state from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GitSource {
    /// The repository: `https://`, `http://`, `ssh://`, `git://`,
    /// `file://`, scp-like `user@host:path` or a local path (never a
    /// `<transport>::` form such as `ext::`). Credentials never come from
    /// a manifest.
    pub url: String,
    /// A branch, tag or commit; the remote's HEAD by default.
    #[serde(default = "default_ref", rename = "ref")]
    pub reference: String,
    /// The directory inside the repository holding the manifests (the
    /// whole tree by default).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub path: String,
}

fn default_ref() -> String {
    "HEAD".into()
}

fn default_interval() -> String {
    "1m".into()
}

fn yes() -> bool {
    true
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Desired state of a Source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceSpec {
    /// A directory on pamd's host (absolute), watched for changes. Exactly
    /// one of `path` and `git`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// A git repository. Exactly one of `path` and `git`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<GitSource>,
    /// How often to fetch and re-check (Go duration: `30s`, `1m`, `1h`).
    #[serde(default = "default_interval")]
    pub interval: String,
    /// The projects this Source may write; a document outside them is
    /// refused (with its file and line).
    pub projects: Vec<Name>,
    /// Delete the objects this Source owns when they leave its tree.
    #[serde(default = "yes")]
    pub prune: bool,
    /// Put owned fields changed by another path back on the next sync.
    #[serde(default, skip_serializing_if = "is_false")]
    pub self_heal: bool,
    /// Stop syncing (the objects stay).
    #[serde(default, skip_serializing_if = "is_false")]
    pub suspend: bool,
    /// Push notifications from the git host: a push for the
    /// Source's ref to `POST /api/v1/sources/{name}/hooks/{provider}`,
    /// verified with this secret, syncs it at once. `spec.git` only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receiver: Option<Receiver>,
    /// Variables substituted in the Source's manifests before they are
    /// read (Flux's `postBuild.substitute`): `${NAME}`,
    /// `${NAME:=default}`, `$${NAME}` for a literal; in string values only
    /// (docs/gitops.md, "Substitution").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub substitute: Option<Substitute>,
}

/// A Source's variables.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Substitute {
    /// `NAME: value`; these win over the Secrets'.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub vars: std::collections::BTreeMap<String, String>,
    /// Secrets of the Source's projects, each key a variable (a later one
    /// wins over an earlier one, and over the projects').
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_secrets: Vec<ProjectSecret>,
    /// Projects of the Source's, each annotation `vars.pam.dev/NAME` a
    /// variable `NAME` (Flux's `substituteFrom` a ConfigMap): values an
    /// operator keeps on the Project, not secret. A later project wins
    /// over an earlier one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from_projects: Vec<Name>,
}

/// The annotation prefix of a Project's substitution variables
/// ([`Substitute::from_projects`]).
pub const VARS_ANNOTATION_PREFIX: &str = "vars.pam.dev/";

/// A Secret of a project, by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectSecret {
    pub project: Name,
    pub name: Name,
}

/// A Source's push receiver: where the shared secret the git host signs
/// (or sends) with lives.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Receiver {
    /// A key of a Secret in one of the Source's projects.
    pub secret_ref: super::SecretKeyRef,
}

impl SourceSpec {
    /// `spec.interval` as a duration (checked on load).
    pub fn interval(&self) -> Duration {
        crate::duration::parse(&self.interval).unwrap_or(Duration::from_secs(60))
    }

    /// Per-document rules typing cannot express: `(field path, message)`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let url_problem = self
            .git
            .as_ref()
            .and_then(|g| crate::urls::git_url_problem(&g.url));
        match (&self.path, &self.git) {
            (None, None) => out.push((
                "spec",
                "missing source, expected exactly one of spec.path and spec.git".to_string(),
            )),
            (Some(_), Some(_)) => out.push((
                "spec.git",
                "both path and git given, expected exactly one of spec.path and spec.git"
                    .to_string(),
            )),
            (Some(p), None) if !p.starts_with('/') => out.push((
                "spec.path",
                format!("{p:?} is relative, expected an absolute directory on pamd's host"),
            )),
            (None, Some(_)) if url_problem.is_some() => {
                out.push(("spec.git.url", url_problem.unwrap_or_default()))
            }
            (None, Some(g)) if crate::urls::has_credentials(&g.url) => out.push((
                "spec.git.url",
                format!(
                    "{} (pamd's [git] credentials_file or ssh_key_file)",
                    crate::urls::CREDENTIALS_REFUSED
                ),
            )),
            (None, Some(g)) if g.reference.is_empty() || g.reference.starts_with('-') => {
                out.push((
                    "spec.git.ref",
                    "expected a branch, tag or commit".to_string(),
                ))
            }
            _ => {}
        }
        match crate::duration::parse(&self.interval) {
            Some(d) if d >= Duration::from_millis(100) => {}
            Some(_) => out.push((
                "spec.interval",
                format!("{:?} is too short, expected at least 100ms", self.interval),
            )),
            None => out.push((
                "spec.interval",
                format!(
                    "{:?} is not a duration, expected e.g. 30s, 1m, 1h30m",
                    self.interval
                ),
            )),
        }
        if self.projects.is_empty() {
            out.push((
                "spec.projects",
                "empty, expected the projects this Source may write".to_string(),
            ));
        }
        if let Some(sub) = &self.substitute {
            for name in sub.vars.keys() {
                if !crate::load::substitute::valid_name(name) {
                    out.push((
                        "spec.substitute.vars",
                        format!("{name:?} is not a variable name, expected letters, digits and '_', not starting with a digit"),
                    ));
                }
            }
            for p in &sub.from_projects {
                if !self.projects.contains(p) {
                    out.push((
                        "spec.substitute.fromProjects",
                        format!(
                            "{:?} is not one of spec.projects, expected a project this Source may write",
                            p.as_str()
                        ),
                    ));
                }
            }
            for s in &sub.from_secrets {
                if !self.projects.contains(&s.project) {
                    out.push((
                        "spec.substitute.fromSecrets",
                        format!(
                            "Secret {:?} of project {:?}: not one of spec.projects, expected a project this Source may write",
                            s.name.as_str(),
                            s.project.as_str()
                        ),
                    ));
                }
            }
        }
        if let Some(r) = &self.receiver {
            let at = "spec.receiver.secretRef.key";
            if self.git.is_none() {
                out.push((
                    "spec.receiver",
                    "a push receiver needs spec.git (a directory Source is watched)".to_string(),
                ));
            }
            if !self.projects.contains(&r.secret_ref.project) {
                out.push((
                    "spec.receiver.secretRef.project",
                    format!(
                        "{:?} is not one of spec.projects, expected a project this Source may write",
                        r.secret_ref.project.as_str()
                    ),
                ));
            }
            if !super::secret::valid_secret_key(&r.secret_ref.key) {
                out.push((
                    at,
                    format!(
                        "invalid key {:?}, expected 1 to {} letters, digits, '-', '_' or '.'",
                        r.secret_ref.key,
                        super::secret::SECRET_KEY_MAX_BYTES
                    ),
                ));
            }
        }
        out
    }
}

/// One positioned problem of a failed sync.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SourceError {
    /// The file, relative to the Source's root.
    pub file: String,
    /// 0-based document index in the file.
    #[serde(default)]
    pub document: usize,
    /// 1-based; 0 when unknown.
    #[serde(default)]
    pub line: usize,
    /// 1-based; 0 when unknown.
    #[serde(default)]
    pub column: usize,
    /// The field path (`spec.parent`).
    #[serde(default)]
    pub path: String,
    pub message: String,
}

/// An owned object whose owned fields were changed by another path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Drift {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub name: String,
    /// `spec.title`, `metadata.labels.team`; `(deleted)` when the object is
    /// gone.
    pub fields: Vec<String>,
}

/// Observed state of a Source (the sync loop's).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedSource {
    /// The last revision applied in full (commit SHA, or `sha256:` of a
    /// directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The last revision tried, good or bad.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempted_revision: Option<String>,
    /// RFC 3339: when a sync last applied or confirmed the revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_synced_at: Option<String>,
    /// RFC 3339: when a sync was last tried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_attempt_at: Option<String>,
    /// RFC 3339: a sync requested (`pamctl sync`) and not yet done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sync_requested_at: Option<String>,
    /// Unknown | Synced | OutOfSync | Failed.
    pub sync: SyncState,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sync_message: String,
    /// Unknown | Healthy | Progressing | Degraded.
    pub health: HealthState,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub health_message: String,
    /// The last failed sync's problems, positioned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<SourceError>,
    /// Owned objects changed by another path.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drift: Vec<Drift>,
    /// How many objects the Source owns.
    #[serde(default)]
    pub inventory: u32,
    /// In a get of one Source: each owned object's own sync and
    /// health as they stand now (read when asked, so they follow the
    /// objects without a sync), the first [`OBJECTS_SHOWN`] by kind and
    /// name; `objectsOmitted` counts the rest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects: Vec<OwnedState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects_omitted: Option<u32>,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Ready, Reconciling, Stalled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Owned objects listed in a Source's status at most.
pub const OBJECTS_SHOWN: usize = 100;

/// One owned object's state (Argo CD's resource tree).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OwnedState {
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub name: String,
    /// `Synced`, `OutOfSync` (an owned field changed by another path),
    /// `Missing` (deleted behind the Source's back); for an object that
    /// left the tree at the last sync that wrote, `Pruned` (deleted) or
    /// `Held` (kept: pruning would have cascaded to objects the tree does
    /// not own, or `spec.prune` is false and it was released).
    pub sync: String,
    /// Runs: `Progressing` (pending, spawning, running), `Healthy`
    /// (exited, stopped) or `Degraded` (failed); tasks: `Progressing`
    /// while doing, else `Healthy`; projects `Healthy` while they exist;
    /// `Missing` when gone (a `Pruned` object's too).
    pub health: String,
    /// The drifted fields, or the run's phase or the task's status.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// Whether the live objects are the Source's revision (Argo CD's sync
/// status).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
pub enum SyncState {
    /// No sync has finished yet.
    #[default]
    Unknown,
    /// The revision is applied and the owned fields are as it says.
    Synced,
    /// Owned fields were changed by another path and not put back.
    OutOfSync,
    /// The last revision tried could not be applied (nothing of it was).
    Failed,
}

/// How the Source's owned objects are doing (Argo CD's health).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, JsonSchema)]
pub enum HealthState {
    /// Nothing applied yet: no health to roll up.
    #[default]
    Unknown,
    /// Every owned run ended well (or none is owned).
    Healthy,
    /// An owned run is pending or running.
    Progressing,
    /// An owned run failed.
    Degraded,
}

macro_rules! text_enum {
    ($t:ident { $($v:ident),* }) => {
        impl $t {
            /// Every value.
            pub const ALL: &'static [$t] = &[$($t::$v),*];

            /// As stored and shown (`"OutOfSync"`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($t::$v => stringify!($v),)*
                }
            }

            /// The value written as [`Self::as_str`] gives it.
            pub fn parse(text: &str) -> Option<$t> {
                Self::ALL.iter().copied().find(|v| v.as_str() == text)
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}
text_enum!(SyncState {
    Unknown,
    Synced,
    OutOfSync,
    Failed
});
text_enum!(HealthState {
    Unknown,
    Healthy,
    Progressing,
    Degraded
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_problems() {
        let s: SourceSpec = serde_json::from_value(serde_json::json!({
            "git": {"url": "file:///r"}, "projects": ["web"]
        }))
        .unwrap();
        assert_eq!(s.interval(), Duration::from_secs(60));
        assert!(s.prune && !s.self_heal && !s.suspend);
        assert_eq!(s.git.as_ref().unwrap().reference, "HEAD");
        assert!(s.problems().is_empty());
        let bad: SourceSpec = serde_json::from_value(serde_json::json!({
            "path": "rel", "interval": "soon", "projects": []
        }))
        .unwrap();
        let fields: Vec<&str> = bad.problems().iter().map(|p| p.0).collect();
        assert_eq!(fields, ["spec.path", "spec.interval", "spec.projects"]);
    }

    #[test]
    fn a_url_with_a_secret_is_refused() {
        for url in [
            "https://user:tok@example.com/r.git",
            "https://ghp_token@example.com/r.git",
            "ssh://git:pw@example.com/r.git",
        ] {
            let s: SourceSpec = serde_json::from_value(serde_json::json!({
                "git": {"url": url}, "projects": ["web"]
            }))
            .unwrap();
            let p = s.problems();
            assert_eq!(p.len(), 1, "{url}: {p:?}");
            assert_eq!(p[0].0, "spec.git.url");
            assert!(p[0].1.contains("credentials never come from a manifest"));
        }
        for url in [
            "ssh://git@example.com/r.git",
            "git@example.com:r.git",
            "https://example.com/r.git",
            "file:///srv/r.git",
            "https://example.com/r@v1.git",
        ] {
            assert!(!crate::urls::has_credentials(url), "{url}");
        }
    }
}
