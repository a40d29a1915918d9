//! The spare worktree (bench-workspace's target: claim → provider started in
//! a 100 MB repository ≤ 1.5 s). Writing a large checkout is most of a
//! spawn's time (about 3 s for 100 MB on a 2-core machine under load), so
//! each repository keeps one pristine worktree, detached at the commit the
//! last run started from, made in the background after a spawn. The next
//! run of that repository takes it ([`take`]: a rename and a switch that
//! rewrites only the files that differ) instead of checking out anew.
//!
//! A spare is never a run's: it is made from the repository only and
//! handed out once, so no attempt starts from another's files. It lives at
//! `workspaces/spares/<key>`; it is filled under `<key>.tmp` outside the
//! mirror's lock and renamed when complete, so a worker killed while
//! filling leaves no half spare that a run would take (the `.tmp` is
//! removed by the next fill).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::git::git;
use super::lock;

/// Mirrors being filled by this process (one fill per mirror at a time).
static FILLING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// `mirror`'s spare worktree.
pub fn path(mirror: &Path) -> PathBuf {
    let root = mirror
        .parent()
        .and_then(Path::parent)
        .expect("mirrors live in workspaces/mirrors");
    let key = mirror.file_stem().expect("a mirror has a name");
    root.join("spares").join(key)
}

/// Moves `mirror`'s spare (if it has one) to `dir` as branch `branch` at
/// `start`: true when it did. Called with the mirror's lock held. A spare
/// that cannot be used is removed, and the caller checks out anew.
pub fn take(mirror: &Path, dir: &Path, branch: &str, start: &str) -> bool {
    let spare = path(mirror);
    if !spare.join(".git").exists() {
        return false;
    }
    let (spare_text, dir_text) = (
        spare.to_string_lossy().into_owned(),
        dir.to_string_lossy().into_owned(),
    );
    let moved = git(
        Some(mirror),
        &["worktree", "move", "--", &spare_text, &dir_text],
    );
    if moved.is_err() {
        discard(mirror, &spare);
        return false;
    }
    // Rewrites only what differs between the spare's commit and `start`.
    match git(
        Some(dir),
        &["switch", "--quiet", "--no-guess", "-c", branch, start],
    ) {
        Ok(_) => true,
        Err(e) => {
            tracing::warn!(error = %format!("{e:#}"), "the spare worktree could not switch; checking out anew");
            discard(mirror, dir);
            false
        }
    }
}

/// Makes `mirror`'s spare at `start` unless it has one or one is being
/// made (blocking; run it off the spawn's path). The checkout is written
/// outside the mirror's lock, so runs of the repository are not held up.
pub fn fill(mirror: &Path, start: &str) -> anyhow::Result<()> {
    {
        let mut filling = FILLING.lock().unwrap();
        if filling.iter().any(|m| m == mirror) {
            return Ok(());
        }
        filling.push(mirror.to_path_buf());
    }
    let result = fill_now(mirror, start);
    FILLING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .retain(|m| m != mirror);
    result
}

fn fill_now(mirror: &Path, start: &str) -> anyhow::Result<()> {
    let spare = path(mirror);
    let tmp = spare.with_extension("tmp");
    let tmp_text = tmp.to_string_lossy().into_owned();
    {
        let _held = lock(mirror)?;
        if spare.join(".git").exists() {
            return Ok(());
        }
        // A fill a killed worker left (this process fills one at a time).
        discard(mirror, &tmp);
        crate::private::dir(spare.parent().expect("spares dir"))?;
        git(
            Some(mirror),
            &[
                "worktree",
                "add",
                "--quiet",
                "--detach",
                "--no-checkout",
                "--",
                &tmp_text,
                start,
            ],
        )?;
    }
    // The long part, with nobody waiting on the lock: only the spare's own
    // index and files are written.
    git(Some(&tmp), &["reset", "--hard", "--quiet"])?;
    let _held = lock(mirror)?;
    let spare_text = spare.to_string_lossy().into_owned();
    git(
        Some(mirror),
        &["worktree", "move", "--", &tmp_text, &spare_text],
    )?;
    Ok(())
}

/// Removes worktree `dir` of `mirror` (a spare that cannot be used, or a
/// fill a killed worker left); a failure leaves it to the next fill.
fn discard(mirror: &Path, dir: &Path) {
    let _ = super::remove_tree(mirror, dir);
}
