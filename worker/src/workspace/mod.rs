//! Workspaces: each attempt of a run with a workspace gets a
//! git worktree of its own, on a new branch, as the provider's cwd; when
//! the provider exits the wrapper commits what it left and reports the
//! result with `finished` ([`result`]).
//!
//! Layout under the data dir:
//!
//! ```text
//! workspaces/mirrors/<16 hex of the URL>.git    bare clone, one per repository
//! workspaces/mirrors/<16 hex of the URL>.lock   flock: one preparer at a time
//! workspaces/trees/<run id>-a<attempt>/         the attempt's worktree
//! runs/<run id>/<attempt>.workspace.json        what the wrapper needs at exit
//! ```
//!
//! The repository is a bare clone whose fetch refspec files the remote's
//! branches under `refs/remotes/origin/` — not `git clone --mirror`, whose
//! `+refs/*:refs/*` would let a fetch overwrite (or, with `--prune`,
//! delete) the attempts' own branches in `refs/heads/`. It is cloned into
//! a temporary name and renamed, so a worker killed mid-clone leaves no
//! half mirror that a later run would use. Preparing holds the mirror's
//! lock (`flock`, released by the kernel when a killed worker dies), so
//! two runs of one repository on one host fetch and add worktrees one
//! after the other; git's own ref locks cover the wrappers' commits.

pub mod git;
pub mod result;
pub mod spare;

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::Context;
use pam_manifests::protocol::{DesiredRun, WorkspaceOrder};
use serde::{Deserialize, Serialize};

use git::{git, git_ok, git_with};

/// What the wrapper reads when the provider exits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prepared {
    /// The worktree.
    pub dir: PathBuf,
    /// The commit it started at.
    pub base: String,
    /// Its branch.
    pub branch: String,
    /// Commit what the agent left uncommitted.
    pub auto_commit: bool,
    /// For the commit message: run name and attempt.
    pub run: String,
    pub attempt: i32,
    /// The commits' author and committer.
    pub author_name: String,
    pub author_email: String,
    /// The most bytes of patch reported.
    pub patch_max_bytes: usize,
    /// Push the branch after the result.
    #[serde(default)]
    pub push: bool,
    /// When the worktree is removed once the attempt ended.
    #[serde(default)]
    pub keep: pam_manifests::kinds::Keep,
    /// The repository's bare clone (its lock is `<mirror>.lock`'s
    /// sibling, see [`lock`]).
    pub mirror: PathBuf,
    /// The worker's `[workspaces] credentials_file`, for the push.
    #[serde(default)]
    pub credentials_file: Option<PathBuf>,
    /// This file, touched when the attempt ended ([`sweep`]).
    #[serde(default)]
    pub state: PathBuf,
}

/// Holds `mirror`'s lock until dropped: one preparer or cleaner at a time.
pub fn lock(mirror: &Path) -> anyhow::Result<nix::fcntl::Flock<File>> {
    let path = mirror.with_extension("lock");
    let file = File::create(&path).with_context(|| format!("create {}", path.display()))?;
    nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
        .map_err(|(_, e)| anyhow::anyhow!("lock {}: {e}", path.display()))
}

/// Where the wrapper finds [`Prepared`].
pub fn state_file(data_dir: &Path, run: &DesiredRun) -> PathBuf {
    state_path(data_dir, run.run_id, run.attempt)
}

fn state_path(data_dir: &Path, run_id: uuid::Uuid, attempt: i32) -> PathBuf {
    crate::run_files::workspace_state(data_dir, run_id, attempt)
}

/// Removes the worktrees whose attempt ended more than `retain` before
/// `now` (`[workspaces] retain_hours`), except the `live` (run, attempt)
/// pairs this worker runs; their branches stay. An attempt's end is when
/// the wrapper last touched its state file ([`result::cleanup`]), else
/// the worktree's own mtime. Returns how many were removed.
pub fn sweep(
    data_dir: &Path,
    retain: std::time::Duration,
    now: std::time::SystemTime,
    live: &[(uuid::Uuid, i32)],
) -> anyhow::Result<usize> {
    let root = data_dir.join("workspaces");
    let Ok(entries) = std::fs::read_dir(root.join("trees")) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // A tree a wrapper renamed to delete and died before it had.
        if name.starts_with(".trash-") {
            std::fs::remove_dir_all(entry.path())?;
            continue;
        }
        let Some((id, attempt)) = name
            .rsplit_once("-a")
            .and_then(|(id, a)| Some((id.parse::<uuid::Uuid>().ok()?, a.parse::<i32>().ok()?)))
        else {
            continue;
        };
        if live.contains(&(id, attempt)) {
            continue;
        }
        let state = state_path(data_dir, id, attempt);
        let ended = std::fs::metadata(&state)
            .or_else(|_| entry.metadata())
            .and_then(|m| m.modified())?;
        if now.duration_since(ended).unwrap_or_default() < retain {
            continue;
        }
        let dir = entry.path();
        match result::load(&state) {
            Ok(p) => {
                let _held = lock(&p.mirror)?;
                remove_tree(&p.mirror, &dir)?;
            }
            // No state: the spawn died before writing it; the mirror's
            // record of the tree goes with the next prepare's prune.
            Err(_) => std::fs::remove_dir_all(&dir)?,
        }
        removed += 1;
    }
    Ok(removed)
}

/// A stable name for a repository URL (FNV-1a, 64 bits): the mirror's
/// directory. Not a security boundary: two URLs that collide would share
/// a mirror, which is just a clone of the first.
fn url_key(url: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in url.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Who writes the commits, from the worker's `[workspaces]` config.
#[derive(Debug, Clone)]
pub struct Settings {
    pub author_name: String,
    pub author_email: String,
    pub patch_max_bytes: usize,
    /// A git-credential-store file for http(s) repositories.
    pub credentials_file: Option<PathBuf>,
}

/// Prepares `run`'s worktree (blocking: git runs in this thread) and
/// writes its [`Prepared`] for the wrapper. An error is the spawn's
/// failure, its text the run's `status.message`.
pub fn prepare(
    data_dir: &Path,
    settings: &Settings,
    run: &DesiredRun,
    order: &WorkspaceOrder,
) -> anyhow::Result<Prepared> {
    // The Project's own credentials (its `secretRef`), for this attempt
    // only, over the worker's file; gone again if the spawn fails.
    let own_creds = write_credentials(data_dir, run, order)?;
    let prepared = prepare_with(data_dir, settings, run, order, own_creds.clone());
    if let (Err(_), Some(file)) = (&prepared, &own_creds) {
        let _ = std::fs::remove_file(file);
    }
    prepared
}

fn prepare_with(
    data_dir: &Path,
    settings: &Settings,
    run: &DesiredRun,
    order: &WorkspaceOrder,
    own_creds: Option<PathBuf>,
) -> anyhow::Result<Prepared> {
    let root = data_dir.join("workspaces");
    let mirrors = root.join("mirrors");
    let trees = root.join("trees");
    crate::private::dir(&mirrors)?;
    crate::private::dir(&trees)?;
    let key = url_key(&order.url);
    let mirror = mirrors.join(format!("{key}.git"));
    let creds_file = own_creds
        .clone()
        .or_else(|| settings.credentials_file.clone());
    let held = lock(&mirror)?;
    let creds = creds_file.as_deref();
    ensure_mirror(&mirror, &order.url, creds)?;
    git_with(
        Some(&mirror),
        creds,
        &["fetch", "--quiet", "--prune", "--tags", "origin"],
    )
    .with_context(|| format!("fetch {}", pam_manifests::urls::redacted(&order.url)))?;
    let (start, carry) = start_commit(&mirror, order)?;
    let dir = trees.join(format!("{}-a{}", run.run_id, run.attempt));
    let stale = clear_stale(&mirror, &dir)?;
    let branch_ref = format!("refs/heads/{}", order.branch);
    let exists = git_ok(
        Some(&mirror),
        &[
            "show-ref",
            "--verify",
            "--quiet",
            "--end-of-options",
            &branch_ref,
        ],
    )?
    .is_some();
    if exists && stale {
        // This very attempt made it before its worker died: its branch
        // holds nothing the new try wants.
        git(Some(&mirror), &["branch", "-D", "--", &order.branch])?;
    }
    let dir_text = dir.to_string_lossy().into_owned();
    let checkout = || format!("check out {} as branch {}", order.git_ref, order.branch);
    if !spare::take(&mirror, &dir, &order.branch, &start) {
        // Registered under the lock; its files are written after it
        // (only this worktree's index and files: other runs of the
        // repository need not wait). A worker killed before they are
        // complete leaves a stale tree that the next try removes.
        git(
            Some(&mirror),
            &[
                "worktree",
                "add",
                "--quiet",
                "--no-checkout",
                "-b",
                &order.branch,
                "--",
                &dir_text,
                &start,
            ],
        )
        .with_context(checkout)?;
        drop(held);
        git(Some(&dir), &["reset", "--hard", "--quiet"]).with_context(checkout)?;
    }
    if let Some(patch) = carry {
        carry_over(data_dir, &dir, settings, run, order, patch)?;
    }
    let base = git(Some(&dir), &["rev-parse", "--verify", "HEAD"])?
        .trim()
        .to_string();
    let prepared = Prepared {
        dir,
        base,
        branch: order.branch.clone(),
        auto_commit: order.auto_commit,
        run: order.run.clone(),
        attempt: run.attempt,
        author_name: settings.author_name.clone(),
        author_email: settings.author_email.clone(),
        patch_max_bytes: settings.patch_max_bytes,
        push: order.push,
        keep: order.keep,
        mirror: mirror.clone(),
        credentials_file: creds_file.clone(),
        state: state_file(data_dir, run),
    };
    let file = &prepared.state;
    crate::private::dir(file.parent().expect("state file has a parent"))?;
    std::fs::write(file, serde_json::to_vec(&prepared)?)
        .with_context(|| format!("write {}", file.display()))?;
    Ok(prepared)
}

/// Writes the order's credentials (if any, for an http(s) URL) as a
/// git-credential-store file only the worker's user reads, beside the
/// attempt's state; the wrapper removes it when the attempt ended
/// ([`result::cleanup`]).
fn write_credentials(
    data_dir: &Path,
    run: &DesiredRun,
    order: &WorkspaceOrder,
) -> anyhow::Result<Option<PathBuf>> {
    let Some(line) = order
        .credentials
        .as_ref()
        .and_then(|c| c.store_line(&order.url))
    else {
        return Ok(None);
    };
    let path = state_file(data_dir, run).with_extension("git-credentials");
    crate::private::dir(path.parent().expect("state file has a parent"))?;
    crate::private::write(&path, line.as_bytes())
        .with_context(|| format!("write {}", path.display()))?;
    Ok(Some(path))
}

/// Applies the previous attempt's patch (made on another host) in the new
/// worktree and commits it, so this attempt starts from that work and its
/// own result counts only what it adds.
fn carry_over(
    data_dir: &Path,
    dir: &Path,
    settings: &Settings,
    run: &DesiredRun,
    order: &WorkspaceOrder,
    patch: &str,
) -> anyhow::Result<()> {
    if patch.is_empty() {
        return Ok(());
    }
    // Beside the attempt's state (a private dir), gone once applied.
    let file = state_file(data_dir, run).with_extension("carry.patch");
    crate::private::dir(file.parent().expect("state file has a parent"))?;
    crate::private::write(&file, patch.as_bytes())?;
    let file_text = file.to_string_lossy().into_owned();
    let applied = git(
        Some(dir),
        &[
            "apply",
            "--index",
            "--binary",
            "--whitespace=nowarn",
            "--",
            &file_text,
        ],
    );
    let _ = std::fs::remove_file(&file);
    applied.context("apply the previous attempt's patch")?;
    let message = format!(
        "pam: run {} attempt {}'s work, carried over from the host that ran it",
        order.run,
        run.attempt - 1
    );
    git::commit(
        dir,
        (&settings.author_name, &settings.author_email),
        &message,
    )?;
    Ok(())
}

/// Clones `url` into `mirror` unless a finished clone is there.
fn ensure_mirror(mirror: &Path, url: &str, creds: Option<&Path>) -> anyhow::Result<()> {
    if mirror.join("pam-ready").exists() {
        return Ok(());
    }
    let tmp = mirror.with_extension("git.tmp");
    // A clone a killed worker left half done.
    for d in [&tmp, &mirror.to_path_buf()] {
        if d.exists() {
            std::fs::remove_dir_all(d).with_context(|| format!("remove {}", d.display()))?;
        }
    }
    let tmp_text = tmp.to_string_lossy().into_owned();
    git_with(
        None,
        creds,
        &["clone", "--bare", "--quiet", "--", url, &tmp_text],
    )
    .with_context(|| format!("clone {}", pam_manifests::urls::redacted(url)))?;
    git(
        Some(&tmp),
        &[
            "config",
            "remote.origin.fetch",
            "+refs/heads/*:refs/remotes/origin/*",
        ],
    )?;
    // The remote's default branch, as origin/HEAD (defaultRef `HEAD`).
    if let Some(head) = git_ok(Some(&tmp), &["symbolic-ref", "--quiet", "HEAD"])? {
        if let Some(name) = head.strip_prefix("refs/heads/") {
            let target = format!("refs/remotes/origin/{name}");
            git(
                Some(&tmp),
                &["symbolic-ref", "refs/remotes/origin/HEAD", &target],
            )?;
        }
    }
    std::fs::write(tmp.join("pam-ready"), b"")?;
    std::fs::rename(&tmp, mirror)
        .with_context(|| format!("rename {} to {}", tmp.display(), mirror.display()))?;
    Ok(())
}

/// The commit the worktree starts at: the previous attempt's branch for
/// `previous`, else the ref as the remote's branch, a tag, or a commit;
/// with the patch to carry over onto it, for a `previous` attempt whose
/// branch is on another host.
fn start_commit<'o>(
    mirror: &Path,
    order: &'o WorkspaceOrder,
) -> anyhow::Result<(String, Option<&'o str>)> {
    let resolve = |name: &str| {
        git_ok(
            Some(mirror),
            &[
                "rev-parse",
                "--verify",
                "--quiet",
                "--end-of-options",
                &format!("{name}^{{commit}}"),
            ],
        )
    };
    if let Some(prev) = &order.previous_branch {
        // Its branch here; or its head commit (pushed, and fetched with
        // the repository); or, made on another host, its patch on its base.
        if let Some(c) = resolve(&format!("refs/heads/{prev}"))? {
            return Ok((c, None));
        }
        if let Some(c) = resolve(&order.git_ref)? {
            return Ok((c, None));
        }
        if let (Some(base), Some(patch)) = (&order.previous_base, &order.previous_patch) {
            if let Some(c) = resolve(base)? {
                return Ok((c, Some(patch.as_str())));
            }
        }
        anyhow::bail!(
            "the previous attempt's branch {prev} is not on this host, was not pushed, and its patch was cut (over patch_max_bytes): run it where the previous attempt ran"
        );
    }
    let r = &order.git_ref;
    for candidate in [
        format!("refs/remotes/origin/{r}"),
        format!("refs/tags/{r}"),
        r.clone(),
    ] {
        if let Some(c) = resolve(&candidate)? {
            return Ok((c, None));
        }
    }
    anyhow::bail!(
        "ref {r} is not a branch, tag or commit of {}",
        pam_manifests::urls::redacted(&order.url)
    )
}

/// Removes a worktree a killed worker left at `dir` (never reused: its
/// files are a dead attempt's); true when there was one.
fn clear_stale(mirror: &Path, dir: &Path) -> anyhow::Result<bool> {
    if !dir.exists() {
        // Its dir may be gone while git still lists it.
        git(Some(mirror), &["worktree", "prune"])?;
        return Ok(false);
    }
    remove_tree(mirror, dir)?;
    Ok(true)
}

/// Removes worktree `dir` of `mirror` whatever state it is in (whole,
/// half written, locked, already unregistered): git's removal, then what
/// is left of the files, then git's record of it. Called with the mirror's
/// lock held.
pub(crate) fn remove_tree(mirror: &Path, dir: &Path) -> anyhow::Result<()> {
    let dir_text = dir.to_string_lossy().into_owned();
    let _ = git(
        Some(mirror),
        &["worktree", "remove", "--force", "--force", "--", &dir_text],
    );
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    git(Some(mirror), &["worktree", "prune"])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_keys_are_stable_and_distinct() {
        assert_eq!(url_key("file:///srv/a.git"), url_key("file:///srv/a.git"));
        assert_ne!(url_key("file:///srv/a.git"), url_key("file:///srv/b.git"));
        assert_eq!(url_key("x").len(), 16);
    }
}
