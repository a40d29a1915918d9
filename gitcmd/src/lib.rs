//! The one way pam runs git — pamd for its Sources' mirrors, pam-worker
//! for its repositories' mirrors and each run's worktree. Every command:
//! argv only, no shell; `-c protocol.ext.allow=never` and
//! `GIT_ALLOW_PROTOCOL` (no `ext::` or other command-running transport,
//! whatever a config says); no system or global git config (what pam
//! sets, it sets on the command line); none of the environment that would
//! point git at another repository, index or object store; no terminal
//! prompt, askpass, pager or editor (a missing credential fails instead
//! of waiting for a terminal nobody watches); stdin closed; credentials
//! for http(s) read from a git-credential-store file and never written
//! back; and a time limit, after which the command is killed ([`run`], or
//! the async caller's own timeout of [`TIMEOUT`]).

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The transports git may use: the schemes a repository URL may name
/// (`pam_manifests::urls::git_url_problem`), none of which runs a command.
pub const ALLOWED_PROTOCOLS: &str = "file:https:http:ssh:git";

/// How long one git command may take — a clone of a large repository
/// included; then it is killed, instead of holding the repository's lock,
/// a worker's reconcile pass or pamd's sync.
pub const TIMEOUT: Duration = Duration::from_secs(600);

/// The environment git must not inherit: it would point the command at
/// another repository, index or object store than the one named.
const INHERITED: [&str; 8] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
];

/// `git` hardened as the module says, reading http(s) credentials from
/// the git-credential-store file `credentials` when given (its lookups
/// only: git would otherwise rewrite the file after a fetch, or erase from
/// it after a refusal — it is the operator's, pam only reads it). The
/// caller adds its arguments (after `--` or `--end-of-options` for refs
/// and paths), and `GIT_SSH_COMMAND` when it has an ssh key.
pub fn command(credentials: Option<&Path>) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(["-c", "protocol.ext.allow=never"]);
    if let Some(file) = credentials {
        cmd.arg("-c").arg(format!(
            "credential.helper=!f() {{ test \"$1\" = get && git credential-store --file={} get; }}; f",
            shell_quote(file)
        ));
    }
    cmd.env("GIT_ALLOW_PROTOCOL", ALLOWED_PROTOCOLS)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_ASKPASS", "/bin/false")
        .env("SSH_ASKPASS", "/bin/false")
        // No pager, no editor: nothing may wait for a human.
        .env("GIT_PAGER", "cat")
        .env("GIT_EDITOR", "true")
        .stdin(Stdio::null());
    for var in INHERITED {
        cmd.env_remove(var);
    }
    cmd
}

/// A path as one word for `sh` (git runs a credential helper and
/// `GIT_SSH_COMMAND` through it).
pub fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// What a finished git command said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Why [`run`] has no [`Output`].
#[derive(Debug)]
pub enum RunError {
    /// git could not be started (not installed?).
    Start(std::io::Error),
    /// It did not end within the time limit: killed.
    TimedOut(Duration),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunError::Start(e) => write!(f, "cannot run git (is it installed?): {e}"),
            RunError::TimedOut(t) => write!(f, "no answer in {}s, killed", t.as_secs()),
        }
    }
}

impl std::error::Error for RunError {}

/// Runs `cmd` to its end or `limit`, reading both pipes meanwhile (a full
/// pipe would stall git).
pub fn run(mut cmd: Command, limit: Duration) -> Result<Output, RunError> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(RunError::Start)?;
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) => {}
            Err(e) => return Err(RunError::Start(e)),
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(RunError::TimedOut(limit));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        success: status.success(),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_points_git_nowhere_else() {
        let c = command(Some(Path::new("/etc/pam/it's-creds")));
        let envs: Vec<(String, Option<String>)> = c
            .get_envs()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.map(|v| v.to_string_lossy().into_owned()),
                )
            })
            .collect();
        assert!(envs.contains(&("GIT_DIR".into(), None)), "removed");
        assert!(envs.contains(&("GIT_ALLOW_PROTOCOL".into(), Some(ALLOWED_PROTOCOLS.into()))));
        assert!(envs.contains(&("GIT_TERMINAL_PROMPT".into(), Some("0".into()))));
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[..2], ["-c", "protocol.ext.allow=never"]);
        assert!(
            args[3].contains("--file='/etc/pam/it'\\''s-creds'"),
            "{}",
            args[3]
        );
    }

    #[test]
    fn a_command_past_its_limit_is_killed() {
        let mut c = Command::new("sleep");
        c.arg("5");
        let e = run(c, Duration::from_millis(100)).unwrap_err();
        assert!(matches!(e, RunError::TimedOut(_)), "{e}");
        let mut git = command(None);
        git.arg("--version");
        let out = run(git, TIMEOUT).unwrap();
        assert!(
            out.success && out.stdout.starts_with("git version"),
            "{out:?}"
        );
    }
}
