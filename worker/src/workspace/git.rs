//! The only code in the worker that runs git. Every command: no shell,
//! argv only; `-c protocol.ext.allow=never` and `GIT_ALLOW_PROTOCOL` (no
//! `ext::` or other command-running transport whatever a config says);
//! no system or global git config (the worker's own settings are given
//! on the command line; as pamd does for Sources); no `GIT_DIR` and the
//! like inherited from the worker's environment; `GIT_TERMINAL_PROMPT=0`
//! and no askpass (a missing credential fails instead of waiting for a
//! terminal nobody watches); stdin closed; a time limit. Refs and paths go
//! after `--` or `--end-of-options` at the call sites. Names reached here
//! were checked at apply (`pam_manifests::kinds::ref_name_problem`): this
//! is the second fence.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

/// The transports git may use: the schemes a repository URL may name
/// (`pam_manifests::urls::git_url_problem`), none of which runs a command.
const ALLOWED_PROTOCOLS: &str = "file:https:http:ssh:git";

/// How long one git command may take (a clone of a large repository
/// included); then it is killed and the spawn fails saying so, instead of
/// holding the repository's lock and the worker's reconcile pass.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(600);

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

/// Runs `git <args>` in `dir` (or the current directory); its stdout,
/// or an error with its stderr (trimmed) and the command named.
pub fn git(dir: Option<&Path>, args: &[&str]) -> anyhow::Result<String> {
    git_with(dir, None, args)
}

/// Commits what is staged in worktree `dir` as `author` (name, email),
/// given on the command line so no global git config is needed (and none
/// is read for signing or hooks): the wrapper's commit of what an agent
/// left, and a carried-over patch.
pub fn commit(dir: &Path, author: (&str, &str), message: &str) -> anyhow::Result<()> {
    let name = format!("user.name={}", author.0);
    let email = format!("user.email={}", author.1);
    git(
        Some(dir),
        &[
            "-c",
            &name,
            "-c",
            &email,
            "-c",
            "commit.gpgsign=false",
            "commit",
            "--quiet",
            "--no-verify",
            "--allow-empty",
            "-m",
            message,
        ],
    )?;
    Ok(())
}

/// [`git`] reading credentials for http(s) from a git-credential-store
/// file (the worker's `[workspaces] credentials_file`): clone, fetch and
/// push.
pub fn git_with(
    dir: Option<&Path>,
    credentials: Option<&Path>,
    args: &[&str],
) -> anyhow::Result<String> {
    let what = args
        .iter()
        .take_while(|a| !a.starts_with('-'))
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let (ok, stdout, stderr) = run(command_with(dir, credentials, args), &what)?;
    if !ok {
        anyhow::bail!("git {what} failed: {}", stderr.trim());
    }
    Ok(stdout)
}

/// Like [`git`], for a question whose "no" is a non-zero exit
/// (`rev-parse --verify --quiet`, `show-ref --verify --quiet`).
pub fn git_ok(dir: Option<&Path>, args: &[&str]) -> anyhow::Result<Option<String>> {
    let what = args.first().copied().unwrap_or("");
    let (ok, stdout, _) = run(command(dir, args), what)?;
    Ok(ok.then(|| stdout.trim().to_string()))
}

/// The raw command, for output read as it comes (a patch).
pub fn command(dir: Option<&Path>, args: &[&str]) -> Command {
    command_with(dir, None, args)
}

fn command_with(dir: Option<&Path>, credentials: Option<&Path>, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(["-c", "protocol.ext.allow=never"]);
    if let Some(file) = credentials {
        // The store helper's lookups only: git would otherwise rewrite the
        // file after a fetch, or erase from it after a refusal (Sources do
        // the same with pamd's `[git] credentials_file`).
        cmd.arg("-c").arg(format!(
            "credential.helper=!f() {{ test \"$1\" = get && git credential-store --file={} get; }}; f",
            shell_quote(file)
        ));
    }
    cmd.args(args)
        .env("GIT_ALLOW_PROTOCOL", ALLOWED_PROTOCOLS)
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
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd
}

fn shell_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// Runs `cmd` to its end or [`GIT_TIMEOUT`]: (success, stdout, stderr).
fn run(mut cmd: Command, what: &str) -> anyhow::Result<(bool, String, String)> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("run git {what}"))?;
    // Read both pipes while waiting: a full pipe would stall git.
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
    let deadline = Instant::now() + GIT_TIMEOUT;
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!(
                "git {what}: no answer in {}s, killed",
                GIT_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    Ok((status.success(), stdout, stderr))
}
