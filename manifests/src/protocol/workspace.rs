//! Workspaces on the wire: the workspace a worker prepares before it spawns
//! a run ([`WorkspaceOrder`], in [`super::DesiredRun`]) and what the
//! attempt's worktree came to ([`WorkspaceResult`], in the `finished`
//! signal — one signal, so the result is applied exactly once with it
//! under the `finished` marker, and never without it).

use serde::{Deserialize, Serialize};

/// The most bytes of patch a `finished` signal may carry, whatever the
/// worker's `[workspaces] patch_max_bytes` says (pamd refuses more).
pub const RESULT_PATCH_MAX_BYTES: usize = 8 << 20;

/// What the worker prepares: a worktree of `url` on the new branch
/// `branch`, at `git_ref` — everything resolved by pamd (the run's or its
/// task's workspace, the project's repository, the previous attempt's
/// result), so a worker needs no other object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceOrder {
    /// The repository (the Project's `spec.repository.url`).
    pub url: String,
    /// What to start from: a branch of the repository, a tag or a commit
    /// (for attempt 2 `fresh`: attempt 1's base commit).
    pub git_ref: String,
    /// The new branch (`pam/<task>/<run>-a<attempt>` by default).
    pub branch: String,
    /// `previous`: start from this branch (the previous attempt's, made
    /// on the host that ran it) instead of `git_ref`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_branch: Option<String>,
    /// `previous`, for a host that has not got that branch (another host
    /// ran the previous attempt, and did not push it): the previous
    /// attempt's base commit and patch, applied on it and committed; absent
    /// when the stored patch was cut.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_base: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_patch: Option<String>,
    /// Commit what the agent left uncommitted when it exits.
    pub auto_commit: bool,
    /// The run's name and attempt, for the commit message.
    pub run: String,
    /// Push the branch to the repository after the result.
    #[serde(default)]
    pub push: bool,
    /// When the worktree is removed once the attempt ended.
    #[serde(default)]
    pub keep: crate::kinds::Keep,
    /// The repository's credentials from its Project's `secretRef`, sent
    /// only while the run is spawning (as its environment is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials: Option<GitCredentials>,
}

/// http(s) credentials for one repository. `Debug` leaves the password
/// out.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GitCredentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for GitCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitCredentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl GitCredentials {
    /// The git-credential-store line for `url`'s scheme and host, or
    /// `None` for a URL that is not http(s) (ssh and files take none).
    pub fn store_line(&self, url: &str) -> Option<String> {
        let (scheme, rest) = url.split_once("://")?;
        if !matches!(scheme, "http" | "https") {
            return None;
        }
        let host = rest.split(['/', '?', '#']).next()?;
        Some(format!(
            "{scheme}://{}:{}@{host}\n",
            encode(&self.username),
            encode(&self.password)
        ))
    }
}

/// Percent-encodes all but RFC 3986's unreserved characters (what git's
/// credential store decodes).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod credential_tests {
    use super::*;

    #[test]
    fn a_store_line_encodes_and_names_only_the_host() {
        let c = GitCredentials {
            username: "bot".into(),
            password: "p@ss:w/rd".into(),
        };
        assert_eq!(
            c.store_line("https://git.example.com:8443/org/repo.git")
                .as_deref(),
            Some("https://bot:p%40ss%3Aw%2Frd@git.example.com:8443\n")
        );
        assert_eq!(c.store_line("ssh://git@example.com/r.git"), None);
        assert_eq!(c.store_line("/srv/repo.git"), None);
        assert!(!format!("{c:?}").contains("p@ss"));
    }
}

/// The attempt's worktree when the provider exited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkspaceResult {
    /// The attempt's branch.
    pub branch: String,
    /// The commit the worktree started at.
    pub base_commit: String,
    /// The branch's commit at the end.
    pub head_commit: String,
    /// `git rev-list --count base..head`.
    pub commits: u32,
    /// `git diff --shortstat base..head`: files, insertions, deletions.
    pub files_changed: u32,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
    /// `git diff base..head`, cut at the worker's `patch_max_bytes`.
    pub patch: String,
    /// Whether `patch` was cut.
    #[serde(default)]
    pub patch_truncated: bool,
    /// With `push: true`: whether the remote took the branch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed: Option<bool>,
    /// Why the push was refused (git's words), at most 1024 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_message: Option<String>,
}

impl WorkspaceResult {
    /// Why pamd would not store it, or None: sizes only (the worker's
    /// words are otherwise data).
    pub fn problem(&self) -> Option<String> {
        let names = [
            ("branch", &self.branch),
            ("base_commit", &self.base_commit),
            ("head_commit", &self.head_commit),
        ];
        for (field, v) in names {
            if v.is_empty() || v.len() > crate::kinds::REF_MAX_BYTES {
                return Some(format!(
                    "result.{field}: {} bytes, expected 1 to {}",
                    v.len(),
                    crate::kinds::REF_MAX_BYTES
                ));
            }
        }
        if let Some(m) = self.push_message.as_ref().filter(|m| m.len() > 1024) {
            return Some(format!(
                "result.push_message: {} bytes, expected at most 1024",
                m.len()
            ));
        }
        (self.patch.len() > RESULT_PATCH_MAX_BYTES).then(|| {
            format!(
                "result.patch: {} bytes, expected at most {RESULT_PATCH_MAX_BYTES}",
                self.patch.len()
            )
        })
    }
}
