//! The spare worktree (issue 32's benchmark: claim → provider started in
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
    FILLING.lock().unwrap().retain(|m| m != mirror);
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

/// Removes worktree `dir` of `mirror`, whatever state it is in.
fn discard(mirror: &Path, dir: &Path) {
    let text = dir.to_string_lossy().into_owned();
    let _ = git(
        Some(mirror),
        &["worktree", "remove", "--force", "--force", "--", &text],
    );
    if dir.exists() {
        let _ = std::fs::remove_dir_all(dir);
    }
    let _ = git(Some(mirror), &["worktree", "prune"]);
}

#[cfg(test)]
mod tests {
    use super::super::{prepare, Settings};
    use super::*;
    use pam_manifests::protocol::{DesiredRun, WorkspaceOrder};

    fn sh(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// A run takes the spare made at an older commit: it gets the commit
    /// it asked for on its own branch, clean, and the spare is gone (made
    /// again by the next fill, never shared).
    #[test]
    fn a_run_takes_the_spare_at_its_own_commit_and_clean() {
        let tmp = crate::testdir::TestDir::new("spare");
        let origin = tmp.path().join("origin");
        std::fs::create_dir_all(&origin).unwrap();
        sh(&origin, &["init", "-q", "-b", "main"]);
        std::fs::write(origin.join("f"), "one\n").unwrap();
        std::fs::write(origin.join("gone"), "x\n").unwrap();
        sh(&origin, &["add", "-A"]);
        sh(&origin, &["commit", "-q", "-m", "one"]);
        let first = sh(&origin, &["rev-parse", "HEAD"]);
        let data = tmp.path().join("data");
        let settings = Settings {
            author_name: "t".into(),
            author_email: "t@t".into(),
            patch_max_bytes: 1000,
            credentials_file: None,
        };
        let order = |branch: &str| WorkspaceOrder {
            url: origin.to_string_lossy().into_owned(),
            git_ref: "main".into(),
            branch: branch.into(),
            previous_branch: None,
            auto_commit: true,
            run: "r".into(),
            push: false,
            keep: pam_manifests::kinds::Keep::Always,
        };
        let desired = || -> DesiredRun {
            serde_json::from_value(serde_json::json!({
                "run_id": uuid::Uuid::new_v4(), "attempt": 1, "provider": "exec",
                "prompt": "", "cwd": "", "session_name": "pam-x",
            }))
            .unwrap()
        };
        let a = prepare(&data, &settings, &desired(), &order("a")).unwrap();
        assert!(!path(&a.mirror).exists(), "no spare before a fill");
        fill(&a.mirror, &first).unwrap();
        let spare = path(&a.mirror);
        assert_eq!(std::fs::read_to_string(spare.join("f")).unwrap(), "one\n");
        // The repository moves on; run b starts at the new commit.
        std::fs::write(origin.join("f"), "two\n").unwrap();
        sh(&origin, &["rm", "-q", "gone"]);
        sh(&origin, &["commit", "-qam", "two"]);
        let second = sh(&origin, &["rev-parse", "HEAD"]);
        let b = prepare(&data, &settings, &desired(), &order("b")).unwrap();
        assert!(!spare.exists(), "taken");
        assert_eq!(b.base, second);
        assert_eq!(std::fs::read_to_string(b.dir.join("f")).unwrap(), "two\n");
        assert!(!b.dir.join("gone").exists());
        assert_eq!(sh(&b.dir, &["branch", "--show-current"]), "b");
        assert_eq!(sh(&b.dir, &["status", "--porcelain"]), "");
        // Run a's tree is its own still.
        assert_eq!(std::fs::read_to_string(a.dir.join("f")).unwrap(), "one\n");
    }
}
