//! Workspaces: a Project's git repository and a Run's (or a
//! Task's default) workspace — a worktree of its own on a new branch,
//! prepared by the worker before the provider starts.
//!
//! Everything a manifest says here reaches a `git` command line on a
//! worker, so it is checked at apply, in Rust, with no git process: the
//! URL by [`crate::urls`] (Sources' rules), refs and branch names by
//! [`ref_name_problem`] (`git check-ref-format`'s rules, and never a
//! leading `-` that git would read as an option).

use super::*;

/// A Project's git repository (`spec.repository`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Repository {
    /// What the workers fetch: `https://`, `http://`, `ssh://`, `git://`,
    /// `file://`, `user@host:path` or a path on the worker hosts. Never
    /// with credentials in it.
    pub url: String,
    /// The ref a workspace starts from when the run names none: a branch
    /// of the repository, a tag or a commit. Default `HEAD` (the
    /// repository's default branch).
    #[serde(default = "default_ref")]
    pub default_ref: String,
    /// http(s) credentials from a Secret of the project (never in the
    /// manifest): pamd opens it when it hands a spawning run to its
    /// worker, as it does a run's environment, and the worker uses it for
    /// that attempt's clone, fetch and push only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_ref: Option<RepositorySecretRef>,
}

fn default_ref() -> String {
    "HEAD".into()
}

/// A Project's repository credentials: two keys of one of its Secrets.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepositorySecretRef {
    /// The Secret's name, in the project.
    pub name: Name,
    /// The key holding the user name (default `username`).
    #[serde(default = "default_username_key")]
    pub username_key: String,
    /// The key holding the password or token (default `password`).
    #[serde(default = "default_password_key")]
    pub password_key: String,
}

fn default_username_key() -> String {
    "username".into()
}

fn default_password_key() -> String {
    "password".into()
}

/// Where attempt 2 and later start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum FromAttempt {
    /// A new worktree at the commit attempt 1 started from.
    #[default]
    Fresh,
    /// A new worktree at the previous attempt's branch (its work kept).
    Previous,
}

impl FromAttempt {
    /// As written in manifests.
    pub const fn as_str(self) -> &'static str {
        match self {
            FromAttempt::Fresh => "fresh",
            FromAttempt::Previous => "previous",
        }
    }
}

/// When the worktree is removed once the run is terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum Keep {
    /// Kept when the attempt failed (to look at), removed otherwise.
    #[default]
    OnFailure,
    /// Always kept.
    Always,
    /// Always removed.
    Never,
}

/// A run's workspace (`spec.workspace`, or a Task's default for its runs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Workspace {
    /// The branch, tag or commit to start from; absent: the project's
    /// `repository.defaultRef`.
    #[serde(rename = "ref", default, skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
    /// The new branch's name; absent: `pam/<task>/<run>-a<attempt>`.
    /// Attempt 2 and later add `-a<attempt>` to a given name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Where attempt 2 and later start: `fresh` (default) or `previous`.
    #[serde(default)]
    pub from_attempt: FromAttempt,
    /// When the worktree is removed: `onFailure` (default), `always`,
    /// `never`.
    #[serde(default)]
    pub keep: Keep,
    /// Commit what the agent left uncommitted when it exits (default
    /// true).
    #[serde(default = "yes")]
    pub auto_commit: bool,
    /// Push the branch to the repository after the result (default
    /// false).
    #[serde(default)]
    pub push: bool,
}

fn yes() -> bool {
    true
}

/// What an attempt's workspace came to (`status.result`, `pamctl result`):
/// the worker's report when the provider exited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunResult {
    /// The attempt it is of.
    pub attempt: u32,
    /// The attempt's branch.
    pub branch: String,
    /// The commit the worktree started at.
    pub base_commit: String,
    /// The branch's commit at the end (after the automatic commit).
    pub head_commit: String,
    /// Commits from base to head.
    pub commits: u32,
    /// Files changed from base to head.
    pub files_changed: u32,
    /// Lines added.
    pub insertions: u64,
    /// Lines removed.
    pub deletions: u64,
    /// Bytes of the stored patch (`pamctl result --patch`).
    pub patch_bytes: u64,
    /// Whether the patch was longer than the worker's
    /// `[workspaces] patch_max_bytes` and is stored cut.
    #[serde(default, skip_serializing_if = "is_false")]
    pub patch_truncated: bool,
    /// With `push: true`: whether the repository took the branch (a
    /// refused push is a result, not a failure of the run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pushed: Option<bool>,
    /// Why the push was refused, in git's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub push_message: Option<String>,
}

/// Bytes in a ref or branch name of a workspace.
pub const REF_MAX_BYTES: usize = 255;

/// Why git would not take `name` as a ref or branch name, or None:
/// `git check-ref-format --branch`'s rules, checked without git — no
/// `..`, `@{`, `//`, control characters, space, `~ ^ : ? * [ \`; no
/// component starting with `.` or ending in `.lock`; not `@`; not
/// starting or ending with `/` or ending with `.` — and never starting
/// with `-` (git would read it as an option).
pub fn ref_name_problem(name: &str) -> Option<String> {
    const EXPECTED: &str = "expected a git branch, tag or commit name (git check-ref-format)";
    let bad = |why: &str| Some(format!("{why}, {EXPECTED}"));
    if name.is_empty() {
        return bad("empty");
    }
    if name.len() > REF_MAX_BYTES {
        return Some(format!(
            "{} bytes, expected at most {REF_MAX_BYTES} bytes",
            name.len()
        ));
    }
    if name.starts_with('-') {
        return bad("starts with '-' (git would read it as an option)");
    }
    if name == "@" {
        return bad("is '@'");
    }
    if let Some(c) = name
        .chars()
        .find(|c| c.is_control() || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\'))
    {
        return bad(&format!("holds {c:?}"));
    }
    if name.contains("..") || name.contains("@{") || name.contains("//") {
        return bad("holds '..', '@{' or '//'");
    }
    if name.starts_with('/') || name.ends_with('/') || name.ends_with('.') {
        return bad("starts or ends with '/' or ends with '.'");
    }
    if name
        .split('/')
        .any(|c| c.starts_with('.') || c.ends_with(".lock"))
    {
        return bad("has a part starting with '.' or ending in '.lock'");
    }
    None
}

impl Repository {
    /// Problems as (field path under `at`, message): the URL's (no
    /// credentials, no command-running transport) and the default ref's.
    pub fn problems(&self, at: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if crate::urls::has_credentials(&self.url) {
            out.push((format!("{at}.url"), crate::urls::CREDENTIALS_REFUSED.into()));
        } else if let Some(why) = crate::urls::git_url_problem(&self.url) {
            out.push((format!("{at}.url"), why));
        }
        if let Some(why) = ref_name_problem(&self.default_ref) {
            out.push((format!("{at}.defaultRef"), why));
        }
        if let Some(r) = &self.secret_ref {
            for (field, key) in [
                ("usernameKey", &r.username_key),
                ("passwordKey", &r.password_key),
            ] {
                if !super::secret::valid_secret_key(key) {
                    out.push((
                        format!("{at}.secretRef.{field}"),
                        format!(
                            "invalid key {key:?}, expected 1 to {} letters, digits, '-', '_' or '.'",
                            super::secret::SECRET_KEY_MAX_BYTES
                        ),
                    ));
                }
            }
        }
        out
    }
}

impl Workspace {
    /// Problems as (field path under `at`, message): the ref and branch
    /// names.
    pub fn problems(&self, at: &str) -> Vec<(String, String)> {
        let names = [("ref", &self.git_ref), ("branch", &self.branch)];
        names
            .into_iter()
            .filter_map(|(field, v)| {
                let why = ref_name_problem(v.as_deref()?)?;
                Some((format!("{at}.{field}"), why))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ref_names_follow_check_ref_format() {
        for ok in [
            "main",
            "HEAD",
            "v1.2.3",
            "feature/x",
            "pam/t/r-a1",
            "0123456789abcdef0123456789abcdef01234567",
            "a.b",
        ] {
            assert_eq!(ref_name_problem(ok), None, "{ok}");
        }
        for bad in [
            "",
            "-b",
            "--upload-pack=x",
            "@",
            "a b",
            "a..b",
            "a@{1}",
            "a//b",
            "/a",
            "a/",
            "a.",
            ".a",
            "a/.b",
            "a.lock",
            "a/b.lock/c",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[",
            "a\\b",
            "a\u{7f}",
            "a\tb",
        ] {
            assert!(ref_name_problem(bad).is_some(), "{bad:?}");
        }
        assert!(ref_name_problem(&"x".repeat(256)).is_some());
    }
}
