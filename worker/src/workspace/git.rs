//! The only code in the worker that runs git, through pam's one hardened
//! git command ([`pam_git`]: argv only, no command-running transport, no
//! system or global config, nothing inherited that points elsewhere, no
//! prompt, stdin closed, a time limit). Refs and paths go after `--` or
//! `--end-of-options` at the call sites. Names reached here were checked
//! at apply (`pam_manifests::kinds::ref_name_problem`): this is the second
//! fence.

use std::path::Path;
use std::process::Command;

use anyhow::Context;

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
    let mut cmd = pam_git::command(credentials);
    cmd.args(args);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd
}

/// Runs `cmd` to its end or [`pam_git::TIMEOUT`]: (success, stdout, stderr).
fn run(cmd: Command, what: &str) -> anyhow::Result<(bool, String, String)> {
    let out = pam_git::run(cmd, pam_git::TIMEOUT).with_context(|| format!("git {what}"))?;
    Ok((out.success, out.stdout, out.stderr))
}
