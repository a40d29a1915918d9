//! The only code in pam that runs tmux.
//!
//! Every call goes to one dedicated server ([`Socket`]: `tmux -L NAME` or
//! `tmux -S PATH`), so pam never sees or touches the user's own sessions and
//! tests run on a private server each. Session targets use tmux's exact-match
//! form (`=NAME`): `pam-1234` must never match `pam-12345678`.
//!
//! # Guarantees
//!
//! * A session created with a [`SessionTag`] carries it (the user options
//!   `@pam_run_id` and `@pam_attempt`) from its first moment: the tag is
//!   set by the same tmux command list that creates it, which tmux runs
//!   without another client's command in between, and when `new-session`
//!   fails (e.g. the name is taken) the rest of that list is skipped, so an
//!   existing session's tag is never overwritten.
//!
//! # Caveats
//!
//! * `new-session -e` needs tmux ≥ 3.2; [`Tmux::check_version`] says so.
//! * Sessions end when their command exits (pam does not set
//!   remain-on-exit): the wrapper's log, not the pane, is the record.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::process::Command;
use uuid::Uuid;

/// Which tmux server to talk to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Socket {
    /// `tmux -L NAME`: a socket named NAME in tmux's per-user directory.
    Name(String),
    /// `tmux -S PATH`: an explicit socket path.
    Path(PathBuf),
}

/// The prefix of every session pam creates.
pub const SESSION_PREFIX: &str = "pam-";

/// What went wrong running tmux.
#[derive(Debug, thiserror::Error)]
pub enum TmuxError {
    /// The `tmux` binary is not on PATH.
    #[error("tmux is not installed (or not on PATH): install tmux 3.2 or newer (e.g. `apt-get install tmux`, `brew install tmux`)")]
    NotInstalled,
    /// tmux is older than 3.2 (no `new-session -e`).
    #[error("tmux {found} is too old: pam needs tmux 3.2 or newer")]
    TooOld { found: String },
    /// The named session does not exist.
    #[error("no tmux session {0}")]
    NoSession(String),
    /// `new-session`: a session of that name already exists.
    #[error("a tmux session named {0} already exists")]
    DuplicateSession(String),
    /// tmux ran and failed.
    #[error("tmux {args} failed ({status}): {stderr}")]
    Failed {
        args: String,
        status: String,
        stderr: String,
    },
    /// Something else: spawning tmux, sending a signal, parsing its output.
    #[error("{0}")]
    Other(String),
}

/// What a new session runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSpec {
    /// Session name (`pam-xxxxxxxx`).
    pub name: String,
    /// Working directory of the command.
    pub cwd: PathBuf,
    /// Extra environment for the command (`new-session -e K=V`).
    pub env: BTreeMap<String, String>,
    /// The command, program first; run directly, not through a shell.
    pub argv: Vec<String>,
    /// What the session is for, set on it at creation.
    pub tag: Option<SessionTag>,
}

/// Which run and attempt a session was created for (the user options
/// `@pam_run_id` and `@pam_attempt`). A `pam-*` session without one was
/// not created by pam for a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SessionTag {
    pub run_id: Uuid,
    pub attempt: i32,
}

impl std::fmt::Display for SessionTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "run {} attempt {}", self.run_id, self.attempt)
    }
}

const TAG_RUN: &str = "@pam_run_id";
const TAG_ATTEMPT: &str = "@pam_attempt";

/// A live `pam-*` session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub name: String,
    /// None when the session carries no (or no well-formed) tag.
    pub tag: Option<SessionTag>,
}

/// A handle on one tmux server.
#[derive(Debug, Clone)]
pub struct Tmux {
    socket: Socket,
}

impl Tmux {
    /// A handle on the server at `socket` (started on first session).
    pub fn new(socket: Socket) -> Tmux {
        Tmux { socket }
    }

    /// The socket this handle uses.
    pub fn socket(&self) -> &Socket {
        &self.socket
    }

    /// Checks that tmux is installed and new enough (≥ 3.2); returns its
    /// version string.
    pub async fn check_version() -> Result<String, TmuxError> {
        let out = Command::new("tmux")
            .arg("-V")
            .stdin(Stdio::null())
            .output()
            .await
            .map_err(spawn_error)?;
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        // "tmux 3.3a", "tmux next-3.4", "tmux master"
        let ver = text
            .rsplit(' ')
            .next()
            .unwrap_or("")
            .trim_start_matches("next-");
        let mut parts = ver
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty());
        let major: u32 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or(u32::MAX);
        let minor: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(0);
        if (major, minor) < (3, 2) {
            return Err(TmuxError::TooOld { found: text });
        }
        Ok(text)
    }

    fn command(&self) -> Command {
        let mut c = Command::new("tmux");
        match &self.socket {
            Socket::Name(n) => c.arg("-L").arg(n),
            Socket::Path(p) => c.arg("-S").arg(p),
        };
        c.stdin(Stdio::null()).kill_on_drop(true);
        c
    }

    /// Runs `tmux <args>`, returning stdout on success.
    async fn run(&self, args: &[&str]) -> Result<String, TmuxError> {
        let out = self
            .command()
            .args(args)
            .output()
            .await
            .map_err(spawn_error)?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if let Some(name) = stderr.strip_prefix("duplicate session: ") {
            return Err(TmuxError::DuplicateSession(name.to_string()));
        }
        if let Some(t) = args
            .iter()
            .position(|a| *a == "-t")
            .and_then(|i| args.get(i + 1))
        {
            if no_such_session(&stderr) {
                return Err(TmuxError::NoSession(session_of(t).to_string()));
            }
        }
        Err(TmuxError::Failed {
            args: args.join(" "),
            status: out.status.to_string(),
            stderr,
        })
    }

    /// Creates a detached session running `spec.argv` in `spec.cwd`, tagged
    /// with `spec.tag`. A taken name is [`TmuxError::DuplicateSession`].
    pub async fn new_session(&self, spec: &SessionSpec) -> Result<(), TmuxError> {
        if spec.argv.is_empty() {
            return Err(TmuxError::Other("new_session: empty command".into()));
        }
        let cwd = arg(&spec.cwd.to_string_lossy());
        let mut args: Vec<String> = vec![
            "new-session".into(),
            "-d".into(),
            "-s".into(),
            spec.name.clone(),
            "-c".into(),
            cwd,
            "-x".into(),
            "200".into(),
            "-y".into(),
            "50".into(),
        ];
        for (k, v) in &spec.env {
            args.push("-e".into());
            args.push(arg(&format!("{k}={v}")));
        }
        args.push("--".into());
        if spec.argv.len() == 1 {
            // tmux hands a single argument to `sh -c`; quote it so it still
            // runs as one program name, not as shell code.
            args.push(arg(&shell_quote(&spec.argv[0])));
        } else {
            args.extend(spec.argv.iter().map(|a| arg(a)));
        }
        if let Some(tag) = spec.tag {
            // ";" as an argument of its own separates tmux commands (argv
            // items ending in ";" are escaped by `arg`).
            for (key, value) in [
                (TAG_RUN, tag.run_id.to_string()),
                (TAG_ATTEMPT, tag.attempt.to_string()),
            ] {
                args.extend([";", "set-option", "-t"].map(String::from));
                args.extend([pane(&spec.name), key.into(), value]);
            }
        }
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        self.run(&refs).await.map(drop)
    }

    /// Whether session `name` exists (exact name).
    pub async fn has_session(&self, name: &str) -> Result<bool, TmuxError> {
        match self.run(&["has-session", "-t", &exact(name)]).await {
            Ok(_) => Ok(true),
            Err(TmuxError::NoSession(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Names of the sessions starting with `pam-`, sorted. No server yet
    /// means no sessions.
    pub async fn list_sessions(&self) -> Result<Vec<String>, TmuxError> {
        Ok(self.sessions().await?.into_iter().map(|s| s.name).collect())
    }

    /// The session named `name` with its tag, if it exists.
    pub async fn session(&self, name: &str) -> Result<Option<Session>, TmuxError> {
        Ok(self.sessions().await?.into_iter().find(|s| s.name == name))
    }

    /// The sessions starting with `pam-` with their tags, sorted by name.
    /// No server yet means no sessions.
    pub async fn sessions(&self) -> Result<Vec<Session>, TmuxError> {
        let format = format!("#{{session_name}}\t#{{{TAG_RUN}}}\t#{{{TAG_ATTEMPT}}}");
        let out = self
            .command()
            .args(["list-sessions", "-F", &format])
            .output()
            .await
            .map_err(spawn_error)?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if no_server(&stderr) {
                return Ok(Vec::new());
            }
            return Err(TmuxError::Failed {
                args: "list-sessions".into(),
                status: out.status.to_string(),
                stderr: stderr.trim().to_string(),
            });
        }
        let mut sessions: Vec<Session> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with(SESSION_PREFIX))
            .map(parse_session_line)
            .collect();
        sessions.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(sessions)
    }

    /// Kills session `name`; returns false when it did not exist.
    pub async fn kill_session(&self, name: &str) -> Result<bool, TmuxError> {
        match self.run(&["kill-session", "-t", &exact(name)]).await {
            Ok(_) => Ok(true),
            Err(TmuxError::NoSession(_)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Types `text` literally into the session's pane, then Enter.
    pub async fn send_keys(&self, name: &str, text: &str) -> Result<(), TmuxError> {
        let target = pane(name);
        self.run(&["send-keys", "-t", &target, "-l", "--", &arg(text)])
            .await?;
        self.run(&["send-keys", "-t", &target, "Enter"])
            .await
            .map(drop)
    }

    /// The pid of the process the pane runs (the wrapper).
    pub async fn pane_pid(&self, name: &str) -> Result<u32, TmuxError> {
        let out = self
            .run(&["display-message", "-p", "-t", &pane(name), "#{pane_pid}"])
            .await?;
        out.trim()
            .parse()
            .map_err(|_| TmuxError::Other(format!("tmux gave no pane pid for {name}: {out:?}")))
    }

    /// Sends `signal` to the pane's process (the wrapper, which forwards it
    /// to the provider).
    pub async fn send_signal(&self, name: &str, signal: Signal) -> Result<(), TmuxError> {
        let pid = self.pane_pid(name).await?;
        let pid = i32::try_from(pid)
            .map_err(|_| TmuxError::Other(format!("pane pid {pid} out of range")))?;
        kill(Pid::from_raw(pid), signal)
            .map_err(|e| TmuxError::Other(format!("kill -{signal} {pid} ({name}): {e}")))
    }

    /// The last `lines` non-blank-tail lines of the pane (screen plus
    /// scrollback), wrapped lines joined.
    pub async fn capture_pane(&self, name: &str, lines: usize) -> Result<String, TmuxError> {
        let start = format!("-{lines}");
        let out = self
            .run(&["capture-pane", "-p", "-J", "-t", &pane(name), "-S", &start])
            .await?;
        let all: Vec<&str> = out.lines().collect();
        let end = all
            .iter()
            .rposition(|l| !l.trim().is_empty())
            .map_or(0, |i| i + 1);
        let from = end.saturating_sub(lines);
        let mut text = all[from..end].join("\n");
        if !text.is_empty() {
            text.push('\n');
        }
        Ok(text)
    }

    /// Stops the whole server (all its sessions). For tests and shutdown.
    pub async fn kill_server(&self) -> Result<(), TmuxError> {
        match self.command().arg("kill-server").output().await {
            Ok(_) => Ok(()),
            Err(e) => Err(spawn_error(e)),
        }
    }

    /// The socket's argument pair for a tmux command line built elsewhere
    /// (e.g. a hint printed to an operator: `tmux -L pam attach -t …`).
    pub fn socket_args(&self) -> [String; 2] {
        match &self.socket {
            Socket::Name(n) => ["-L".into(), n.clone()],
            Socket::Path(p) => ["-S".into(), display(p)],
        }
    }
}

fn display(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// tmux's ways of saying there is no server (it may be exiting right now,
/// after its last session ended).
fn no_server(stderr: &str) -> bool {
    ["no server running", "error connecting", "server exited"]
        .iter()
        .any(|m| stderr.contains(m))
}

fn no_such_session(stderr: &str) -> bool {
    no_server(stderr)
        || ["can't find", "session not found", "no current target"]
            .iter()
            .any(|m| stderr.contains(m))
}

/// tmux reads an argument ending in `;` as a command separator, and one
/// ending in `\;` as a literal `;` (dropping the backslash): escape the end.
fn arg(s: &str) -> String {
    match s.strip_suffix(';') {
        Some(head) => format!("{head}\\;"),
        None => s.to_string(),
    }
}

/// `NAME\tRUN\tATTEMPT` from `list-sessions`; split from the right, so a
/// tab in a session name cannot shift the tag.
fn parse_session_line(line: &str) -> Session {
    let mut parts = line.rsplitn(3, '\t');
    let (attempt, run, name) = (parts.next(), parts.next(), parts.next());
    let Some(name) = name else {
        return Session {
            name: line.to_string(),
            tag: None,
        };
    };
    let tag = match (run.map(str::parse), attempt.map(str::parse)) {
        (Some(Ok(run_id)), Some(Ok(attempt))) => Some(SessionTag { run_id, attempt }),
        _ => None,
    };
    Session {
        name: name.to_string(),
        tag,
    }
}

fn exact(name: &str) -> String {
    format!("={name}")
}

/// The active pane of session `name`, matched exactly.
fn pane(name: &str) -> String {
    format!("={name}:")
}

fn session_of(target: &str) -> &str {
    target.trim_start_matches('=').trim_end_matches(':')
}

fn spawn_error(e: std::io::Error) -> TmuxError {
    if e.kind() == std::io::ErrorKind::NotFound {
        TmuxError::NotInstalled
    } else {
        TmuxError::Other(format!("run tmux: {e}"))
    }
}

/// POSIX single-quoting.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_targets() {
        assert_eq!(shell_quote("a b'c"), r"'a b'\''c'");
        assert_eq!(exact("pam-1"), "=pam-1");
        assert_eq!(pane("pam-1"), "=pam-1:");
        assert_eq!(session_of("=pam-1:"), "pam-1");
        assert_eq!(arg("a;"), "a\\;");
        assert_eq!(arg("a;b"), "a;b");
    }

    #[test]
    fn session_lines_parse_tags() {
        let id = Uuid::new_v4();
        assert_eq!(
            parse_session_line(&format!("pam-1\t{id}\t2")),
            Session {
                name: "pam-1".into(),
                tag: Some(SessionTag {
                    run_id: id,
                    attempt: 2
                })
            }
        );
        for untagged in [
            "pam-1\t\t",
            "pam-1\tnot-a-uuid\t2",
            &format!("pam-1\t{id}\tx"),
        ] {
            assert_eq!(
                parse_session_line(untagged),
                Session {
                    name: "pam-1".into(),
                    tag: None
                },
                "{untagged:?}"
            );
        }
        assert_eq!(parse_session_line("pam-odd").name, "pam-odd");
    }
}
