//! What an attempt's worktree came to, computed by the wrapper once the
//! provider exited and sent with `finished` (one outbox entry: the result
//! is applied once with the signal, exactly as the exit is).

use std::io::Read;
use std::path::Path;

use anyhow::Context;
use pam_manifests::protocol::WorkspaceResult;

use super::git::{command, git, git_with};
use super::Prepared;

/// Reads the [`Prepared`] the spawn wrote.
pub fn load(path: &Path) -> anyhow::Result<Prepared> {
    let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    Ok(serde_json::from_slice(&bytes)?)
}

/// Commits what is left (when asked) and measures base..head.
pub fn finish(p: &Prepared) -> anyhow::Result<WorkspaceResult> {
    let dir = Some(p.dir.as_path());
    if p.auto_commit {
        commit_leftovers(p)?;
    }
    let head = git(dir, &["rev-parse", "--verify", "HEAD"])?
        .trim()
        .to_string();
    let range = format!("{}..{head}", p.base);
    let commits = git(dir, &["rev-list", "--count", "--end-of-options", &range])?
        .trim()
        .parse()
        .unwrap_or(0);
    let (files_changed, insertions, deletions) = shortstat(&git(
        dir,
        &[
            "diff",
            "--shortstat",
            "--no-ext-diff",
            "--end-of-options",
            &p.base,
            &head,
        ],
    )?);
    let (patch, patch_truncated) = patch(p, &head)?;
    let (pushed, push_message) = if p.push { push(p) } else { (None, None) };
    Ok(WorkspaceResult {
        branch: p.branch.clone(),
        base_commit: p.base.clone(),
        head_commit: head,
        commits,
        files_changed,
        insertions,
        deletions,
        patch,
        patch_truncated,
        pushed,
        push_message,
    })
}

/// Pushes the branch to the repository (the bare clone's `origin`). A
/// refusal is part of the result, in git's words, never an error: the
/// attempt's work is done and kept on the branch either way.
fn push(p: &Prepared) -> (Option<bool>, Option<String>) {
    let refspec = format!("refs/heads/{0}:refs/heads/{0}", p.branch);
    match git_with(
        Some(&p.mirror),
        p.credentials_file.as_deref(),
        &["push", "--quiet", "--porcelain", "origin", &refspec],
    ) {
        Ok(_) => (Some(true), None),
        Err(e) => {
            let text = pam_manifests::protocol::truncate_message(&format!("{e:#}"), 1024);
            (Some(false), Some(text))
        }
    }
}

/// Removes the worktree once the attempt ended, per `keep`: `never`
/// always, `onFailure` when the attempt exited 0. Its branch stays (a
/// later `previous` attempt and the result name it).
pub fn cleanup(p: &Prepared, exit_code: i32) -> anyhow::Result<()> {
    use pam_manifests::kinds::Keep;
    // The Project's credentials were for this attempt only.
    let own = p.state.with_extension("git-credentials");
    if own.exists() {
        let _ = std::fs::remove_file(&own);
    }
    let remove = match p.keep {
        Keep::Always => false,
        Keep::Never => true,
        Keep::OnFailure => exit_code == 0,
    };
    if !remove {
        // When it ended, for the `retain_hours` sweep.
        if let Ok(f) = std::fs::File::options().write(true).open(&p.state) {
            let _ = f.set_modified(std::time::SystemTime::now());
        }
        return Ok(());
    }
    // Under the lock only a rename and git's bookkeeping; the files are
    // deleted after it, so a run of the repository starting now does not
    // wait for a large tree to be deleted.
    let trash = p.dir.with_file_name(format!(
        ".trash-{}",
        p.dir
            .file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default()
    ));
    {
        let _held = super::lock(&p.mirror)?;
        if std::fs::rename(&p.dir, &trash).is_err() {
            return super::remove_tree(&p.mirror, &p.dir);
        }
        git(Some(&p.mirror), &["worktree", "prune"])?;
    }
    std::fs::remove_dir_all(&trash).with_context(|| format!("remove {}", trash.display()))?;
    Ok(())
}

/// `git add -A` and a commit naming the run and attempt, when anything is
/// left; the author from the worker's config, given on the command line
/// so no global git config is needed (and none is read for signing).
fn commit_leftovers(p: &Prepared) -> anyhow::Result<()> {
    let dir = Some(p.dir.as_path());
    // A git process of the agent's that died holding the index lock (the
    // agent has exited: nothing of its own is still writing).
    let git_dir = git(dir, &["rev-parse", "--absolute-git-dir"])?;
    let lock = Path::new(git_dir.trim()).join("index.lock");
    if lock.exists() {
        eprintln!(
            "pam-worker wrap: removing a stale {} left by the agent",
            lock.display()
        );
        std::fs::remove_file(&lock).with_context(|| format!("remove {}", lock.display()))?;
    }
    git(dir, &["add", "--all"])?;
    let staged = git(dir, &["diff", "--cached", "--quiet"]).is_err();
    if !staged {
        return Ok(());
    }
    let message = format!("pam: run {} attempt {}", p.run, p.attempt);
    super::git::commit(&p.dir, (&p.author_name, &p.author_email), &message)?;
    Ok(())
}

/// `N files changed, I insertions(+), D deletions(-)` (each part optional).
fn shortstat(text: &str) -> (u32, u64, u64) {
    let mut out = (0, 0, 0);
    for part in text.trim().split(", ") {
        let mut words = part.split_whitespace();
        let n: u64 = words.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        match words.next() {
            Some(w) if w.starts_with("file") => out.0 = u32::try_from(n).unwrap_or(u32::MAX),
            Some(w) if w.starts_with("insertion") => out.1 = n,
            Some(w) if w.starts_with("deletion") => out.2 = n,
            _ => {}
        }
    }
    out
}

/// `git diff base head`, read up to `patch_max_bytes` (then cut at a
/// line, and marked) so a huge diff is never held whole.
fn patch(p: &Prepared, head: &str) -> anyhow::Result<(String, bool)> {
    let mut child = command(
        Some(&p.dir),
        &[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--binary",
            "--end-of-options",
            &p.base,
            head,
        ],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::null())
    .spawn()
    .context("run git diff")?;
    let mut out = Vec::new();
    let stdout = child.stdout.take().expect("piped");
    let max = p.patch_max_bytes as u64;
    stdout.take(max + 1).read_to_end(&mut out)?;
    let truncated = out.len() as u64 > max;
    // Stop git if it has more to say: its pipe is no longer read.
    let _ = child.kill();
    let _ = child.wait();
    if truncated {
        out.truncate(p.patch_max_bytes);
        let cut = out.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        out.truncate(cut);
    }
    Ok((String::from_utf8_lossy(&out).into_owned(), truncated))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortstat_parts() {
        assert_eq!(
            shortstat(" 3 files changed, 10 insertions(+), 2 deletions(-)\n"),
            (3, 10, 2)
        );
        assert_eq!(shortstat(" 1 file changed, 1 insertion(+)\n"), (1, 1, 0));
        assert_eq!(shortstat(" 1 file changed, 4 deletions(-)\n"), (1, 0, 4));
        assert_eq!(shortstat(""), (0, 0, 0));
    }
}
