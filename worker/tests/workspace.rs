//! Workspace faults on the worker, with real git: a worker killed in the
//! middle of preparing or finishing an attempt leaves nothing a later try
//! uses (a half clone, a stale worktree, a stale `index.lock`); runs of
//! one repository prepared at once share its clone safely; a ref shaped
//! like an option is never one; a long patch is cut at a line and marked.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use pam_manifests::protocol::WorkspaceOrder;
use pam_worker::testdir::TestDir;
use pam_worker::workspace::{self, result, Prepared, Settings};
use uuid::Uuid;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        // The decoy test below sets these for its whole process.
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A bare repository with `notes.txt` = "base\n" on `main`.
fn origin(tmp: &Path) -> String {
    let work = tmp.join("work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("notes.txt"), "base\n").unwrap();
    git(&work, &["add", "notes.txt"]);
    git(&work, &["commit", "-q", "-m", "base"]);
    let bare = tmp.join("origin.git");
    git(
        tmp,
        &["clone", "-q", "--bare", "work", bare.to_str().unwrap()],
    );
    format!("file://{}", bare.display())
}

fn settings(patch_max_bytes: usize) -> Settings {
    Settings {
        author_name: "pam-worker".into(),
        author_email: "pam@test".into(),
        patch_max_bytes,
        credentials_file: None,
    }
}

fn order(url: &str, branch: &str) -> WorkspaceOrder {
    WorkspaceOrder {
        url: url.into(),
        git_ref: "main".into(),
        branch: branch.into(),
        previous_branch: None,
        previous_base: None,
        previous_patch: None,
        auto_commit: true,
        run: "r1".into(),
        push: false,
        keep: pam_manifests::kinds::Keep::Always,
        credentials: None,
    }
}

fn run() -> pam_manifests::protocol::DesiredRun {
    common::desired(Uuid::new_v4(), Path::new("/"), "exec")
}

fn git_dir(p: &Prepared) -> PathBuf {
    PathBuf::from(git(&p.dir, &["rev-parse", "--absolute-git-dir"]).trim())
}

#[test]
fn a_killed_attempts_worktree_is_made_again_never_reused() {
    let tmp = TestDir::new("workspace");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    let (r, o) = (run(), order(&url, "pam/t/r1-a3"));
    let first = workspace::prepare(&data, &settings(1 << 20), &r, &o).unwrap();
    // The agent's leftovers and a git of its that died holding the lock.
    std::fs::write(first.dir.join("half-done.txt"), "x").unwrap();
    std::fs::write(git_dir(&first).join("index.lock"), "").unwrap();
    // The worker died; it spawns the same attempt again.
    let again = workspace::prepare(&data, &settings(1 << 20), &r, &o).unwrap();
    assert_eq!(again.dir, first.dir);
    assert_eq!(again.base, first.base);
    assert!(!again.dir.join("half-done.txt").exists());
    assert_eq!(
        std::fs::read_to_string(again.dir.join("notes.txt")).unwrap(),
        "base\n"
    );
    // The agent died mid-`git add`: its index.lock does not stop the
    // result's commit.
    std::fs::write(again.dir.join("notes.txt"), "base\nmine\n").unwrap();
    std::fs::write(git_dir(&again).join("index.lock"), "").unwrap();
    let res = result::finish(&again).unwrap();
    assert_eq!(
        (
            res.commits,
            res.files_changed,
            res.insertions,
            res.deletions
        ),
        (1, 1, 1, 0)
    );
    assert!(res.patch.contains("+mine\n"), "{}", res.patch);
    let msg = git(&again.dir, &["log", "-1", "--format=%an <%ae>|%s"]);
    assert_eq!(msg.trim(), "pam-worker <pam@test>|pam: run r1 attempt 3");
}

#[test]
fn a_half_clone_is_never_used() {
    let tmp = TestDir::new("workspace");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    let p = workspace::prepare(&data, &settings(1 << 20), &run(), &order(&url, "a")).unwrap();
    // A clone the worker was killed in: no ready mark, objects missing,
    // and the temporary it clones into left behind.
    std::fs::remove_file(p.mirror.join("pam-ready")).unwrap();
    std::fs::remove_dir_all(p.mirror.join("objects")).unwrap();
    std::fs::create_dir_all(p.mirror.with_extension("git.tmp").join("junk")).unwrap();
    let q = workspace::prepare(&data, &settings(1 << 20), &run(), &order(&url, "b")).unwrap();
    assert_eq!(q.mirror, p.mirror);
    assert!(q.mirror.join("pam-ready").exists());
    assert!(!q.mirror.with_extension("git.tmp").exists());
    assert_eq!(
        std::fs::read_to_string(q.dir.join("notes.txt")).unwrap(),
        "base\n"
    );
}

#[test]
fn runs_of_one_repository_prepared_at_once_share_its_clone() {
    let tmp = TestDir::new("workspace");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (url, data) = (url.clone(), data.clone());
            std::thread::spawn(move || {
                let o = order(&url, &format!("pam/t/r{i}-a1"));
                workspace::prepare(&data, &settings(1 << 20), &run(), &o)
            })
        })
        .collect();
    let prepared: Vec<Prepared> = threads
        .into_iter()
        .map(|t| t.join().unwrap().unwrap())
        .collect();
    let dirs: std::collections::BTreeSet<_> = prepared.iter().map(|p| &p.dir).collect();
    assert_eq!(dirs.len(), 8);
    let mirrors = std::fs::read_dir(data.join("workspaces/mirrors"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "git"))
        .count();
    assert_eq!(mirrors, 1);
    // Each sees only its own files.
    for (i, p) in prepared.iter().enumerate() {
        std::fs::write(p.dir.join(format!("own-{i}")), "x").unwrap();
    }
    for (i, p) in prepared.iter().enumerate() {
        let names: Vec<String> = std::fs::read_dir(&p.dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("own-"))
            .collect();
        assert_eq!(names, [format!("own-{i}")]);
    }
}

#[test]
fn a_ref_shaped_like_an_option_is_not_one() {
    let tmp = TestDir::new("workspace");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    let out = tmp.path().join("pwned");
    let mut o = order(&url, "b");
    o.git_ref = format!("--output={}", out.display());
    let e = workspace::prepare(&data, &settings(1 << 20), &run(), &o).unwrap_err();
    assert!(
        format!("{e:#}").contains("is not a branch, tag or commit"),
        "{e:#}"
    );
    assert!(!out.exists());
}

#[test]
fn a_long_patch_is_cut_at_a_line_and_marked() {
    let tmp = TestDir::new("workspace");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    let p = workspace::prepare(&data, &settings(300), &run(), &order(&url, "b")).unwrap();
    let lines: String = (0..100).map(|i| format!("line {i}\n")).collect();
    std::fs::write(p.dir.join("notes.txt"), format!("base\n{lines}")).unwrap();
    let res = result::finish(&p).unwrap();
    assert!(res.patch_truncated);
    assert!(
        res.patch.len() <= 300 && res.patch.ends_with('\n'),
        "{:?}",
        res.patch
    );
    assert_eq!(res.insertions, 100);
}

#[test]
fn git_never_follows_a_git_dir_from_the_environment() {
    let tmp = TestDir::new("workspace");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    // A repository the worker's environment points at (a worker started
    // from a git hook, say): it must not be what git works on.
    let decoy = tmp.path().join("decoy");
    std::fs::create_dir_all(&decoy).unwrap();
    git(&decoy, &["init", "-q", "-b", "main"]);
    git(&decoy, &["commit", "-q", "--allow-empty", "-m", "decoy"]);
    std::env::set_var("GIT_DIR", decoy.join(".git"));
    std::env::set_var("GIT_WORK_TREE", &decoy);
    let p = workspace::prepare(&data, &settings(1 << 20), &run(), &order(&url, "b")).unwrap();
    std::fs::write(p.dir.join("notes.txt"), "base\nmine\n").unwrap();
    let res = result::finish(&p).unwrap();
    assert_eq!(res.commits, 1);
    assert_eq!(git(&decoy, &["rev-list", "--count", "HEAD"]).trim(), "1");
    assert_eq!(
        git(&p.mirror, &["rev-parse", "refs/heads/b"]).trim(),
        res.head_commit
    );
}

/// `[workspaces] retain_hours`: a worktree whose attempt ended longer ago
/// than that goes (its branch stays); a younger one, or one of a session
/// still running, stays.
#[test]
fn the_sweep_removes_old_ended_worktrees_only() {
    let tmp = TestDir::new("sweep");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    let (old, young, running) = (run(), run(), run());
    let mut made = Vec::new();
    for (r, b) in [(&old, "old"), (&young, "young"), (&running, "running")] {
        made.push(workspace::prepare(&data, &settings(1000), r, &order(&url, b)).unwrap());
    }
    let hour = std::time::Duration::from_secs(3600);
    let now = std::time::SystemTime::now();
    // The old one ended two hours ago; so did the running one's state.
    for p in [&made[0], &made[2]] {
        let f = std::fs::File::options().write(true).open(&p.state).unwrap();
        f.set_modified(now - 2 * hour).unwrap();
    }
    let live = [(running.run_id, running.attempt)];
    assert_eq!(workspace::sweep(&data, hour, now, &live).unwrap(), 1);
    assert!(!made[0].dir.exists(), "old removed");
    assert!(
        made[1].dir.exists() && made[2].dir.exists(),
        "young and running stay"
    );
    let listed = git(&made[0].mirror, &["worktree", "list"]);
    assert!(
        !listed.contains(&*made[0].dir.to_string_lossy()),
        "{listed}"
    );
    git(
        &made[0].mirror,
        &["show-ref", "--verify", "--quiet", "refs/heads/old"],
    );
    assert_eq!(workspace::sweep(&data, hour, now, &live).unwrap(), 0);
}

/// A run takes the spare made at an older commit: it gets the commit it
/// asked for on its own branch, clean, and the spare is gone (made again
/// by the next fill, never shared).
#[test]
fn a_run_takes_the_spare_at_its_own_commit_and_clean() {
    use pam_worker::workspace::spare;
    let tmp = TestDir::new("spare");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    let a = workspace::prepare(&data, &settings(1000), &run(), &order(&url, "a")).unwrap();
    assert!(!spare::path(&a.mirror).exists(), "no spare before a fill");
    spare::fill(&a.mirror, &a.base).unwrap();
    let spare_dir = spare::path(&a.mirror);
    assert_eq!(
        std::fs::read_to_string(spare_dir.join("notes.txt")).unwrap(),
        "base\n"
    );
    // The repository moves on; run b starts at the new commit.
    let work = tmp.path().join("work");
    std::fs::write(work.join("notes.txt"), "two\n").unwrap();
    git(&work, &["commit", "-qam", "two"]);
    git(&work, &["push", "-q", &url, "main"]);
    let second = git(&work, &["rev-parse", "HEAD"]).trim().to_string();
    let b = workspace::prepare(&data, &settings(1000), &run(), &order(&url, "b")).unwrap();
    assert!(!spare_dir.exists(), "taken");
    assert_eq!(b.base, second);
    assert_eq!(
        std::fs::read_to_string(b.dir.join("notes.txt")).unwrap(),
        "two\n"
    );
    assert_eq!(git(&b.dir, &["branch", "--show-current"]).trim(), "b");
    assert_eq!(git(&b.dir, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(a.dir.join("notes.txt")).unwrap(),
        "base\n"
    );
}

/// A Project's `secretRef` credentials are written for the attempt only
/// (a file only the worker's user reads) and removed when it ended.
#[test]
fn the_projects_credentials_live_as_long_as_the_attempt() {
    let tmp = TestDir::new("creds");
    let url = origin(tmp.path());
    let data = tmp.path().join("data");
    // file:// takes none: nothing written.
    let mut o = order(&url, "plain");
    o.credentials = Some(pam_manifests::protocol::GitCredentials {
        username: "u".into(),
        password: "pw".into(),
    });
    let p = workspace::prepare(&data, &settings(1000), &run(), &o).unwrap();
    assert_eq!(p.credentials_file, None);
    // An http URL that cannot be reached: the spawn fails, the file goes.
    let mut o = order("http://127.0.0.1:9/origin.git", "http");
    o.credentials = Some(pam_manifests::protocol::GitCredentials {
        username: "u".into(),
        password: "pw".into(),
    });
    let r = run();
    let err = workspace::prepare(&data, &settings(1000), &r, &o).unwrap_err();
    assert!(!format!("{err:#}").contains("pw"), "{err:#}");
    let file = workspace::state_file(&data, &r).with_extension("git-credentials");
    assert!(!file.exists(), "removed after the failed spawn");
}
