//! The only code that runs git. Every command: no shell, argv only;
//! `-c protocol.ext.allow=never` (no `ext::` transport whatever the
//! repository's config says); `GIT_TERMINAL_PROMPT=0` (a missing
//! credential fails instead of waiting for a terminal nobody watches);
//! stdin closed; refs and paths after `--` or `--end-of-options` at the
//! call sites. Names reached here were checked at apply
//! (`pam_manifests::kinds::ref_name_problem`), this is the second fence.

use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::Context;

/// Runs `git <args>` in `dir` (or the current directory); its stdout,
/// or an error with its stderr (trimmed) and the command named.
pub fn git(dir: Option<&Path>, args: &[&str]) -> anyhow::Result<String> {
    let out = command(dir, args)
        .output()
        .with_context(|| format!("run git {}", args.first().unwrap_or(&"")))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        anyhow::bail!(
            "git {} failed ({}): {}",
            args.iter()
                .take_while(|a| !a.starts_with('-'))
                .copied()
                .collect::<Vec<_>>()
                .join(" "),
            out.status,
            stderr.trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Like [`git`], for a question whose "no" is a non-zero exit
/// (`rev-parse --verify --quiet`, `show-ref --verify --quiet`).
pub fn git_ok(dir: Option<&Path>, args: &[&str]) -> anyhow::Result<Option<String>> {
    let out = command(dir, args)
        .output()
        .with_context(|| format!("run git {}", args.first().unwrap_or(&"")))?;
    Ok(out
        .status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string()))
}

/// The raw command, for output too large for a `String` twice (a patch).
pub fn command(dir: Option<&Path>, args: &[&str]) -> Command {
    let mut cmd = Command::new("git");
    cmd.args(["-c", "protocol.ext.allow=never"])
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        // No pager, no editor, no askpass: nothing may wait for a human.
        .env("GIT_PAGER", "cat")
        .env("GIT_EDITOR", "true")
        .env_remove("GIT_ASKPASS")
        .env_remove("SSH_ASKPASS")
        .stdin(Stdio::null());
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    cmd
}
