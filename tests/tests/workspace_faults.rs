//! Workspace faults, end to end with real pamd, a real worker, real tmux
//! and a real repository: a worker killed while it checks out a run's
//! worktree, the wrapper killed in the middle of the result commit, and a
//! stale `index.lock` the agent's git left. In each case no half worktree
//! is used, the mirror stays sound (`git fsck`), the attempt ends or is
//! requeued once, and the result is reported once.
//!
//! The worker runs with a `PATH` whose `git` is a stand-in for the real
//! one that, once, on cue, hangs in the checkout or kills its parent (the
//! wrapper) after taking the index lock, as a dying git would leave it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pam_tests::git::git;
use pam_tests::git::workspaces::{origin, project, result, ws_run};
use pam_tests::worker::{
    apply, create_worker_token, events, fast_pamd, run, wait_online, wait_phase, Worker,
    FAST_WORKER_TOML,
};
use pam_tests::{eventually, Pamd};
use serde_json::Value;

const T: Duration = Duration::from_secs(180);

/// A directory holding the stand-in `git` and its cue files.
struct FakeGit {
    bin: PathBuf,
    ctl: PathBuf,
}

impl FakeGit {
    fn new(tmp: &Path) -> FakeGit {
        let real = String::from_utf8(
            std::process::Command::new("sh")
                .args(["-c", "command -v git"])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap()
        .trim()
        .to_string();
        let (bin, ctl) = (tmp.join("fakebin"), tmp.join("ctl"));
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&ctl).unwrap();
        let c = ctl.display();
        // `mkdir` as the once-only test: atomic, and it records the pid.
        let script = format!(
            "#!/bin/sh\n\
             for a in \"$@\"; do case \"$a\" in\n\
             reset) if [ -e {c}/hang-checkout ] && mkdir {c}/hung 2>/dev/null; then echo $$ > {c}/hung/pid; sleep 300; exit 1; fi;;\n\
             commit) if [ -e {c}/die-commit ] && mkdir {c}/died 2>/dev/null; then \
                 gd=$({real} rev-parse --absolute-git-dir) && : > \"$gd/index.lock\"; kill -9 $PPID; exit 1; fi;;\n\
             esac; done\n\
             exec {real} \"$@\"\n"
        );
        let path = bin.join("git");
        std::fs::write(&path, script).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        FakeGit { bin, ctl }
    }

    fn cue(&self, what: &str) {
        std::fs::write(self.ctl.join(what), "").unwrap();
    }

    fn path_env(&self) -> String {
        format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        )
    }
}

async fn start(pamd: &Pamd, fake: &FakeGit) -> Worker {
    let token = create_worker_token(pamd, "h1").await.unwrap();
    let path = fake.path_env();
    let w = Worker::start_with_env(
        &pamd.url,
        &token,
        "h1",
        FAST_WORKER_TOML,
        &[("PATH", path.as_str())],
    )
    .unwrap();
    wait_online(pamd, "h1").await;
    w
}

/// The worker's one mirror: sound, and listing no worktree whose
/// directory is gone.
fn mirror_is_sound(w: &Worker) -> PathBuf {
    let mirrors = w.data_dir.join("workspaces").join("mirrors");
    let mirror = std::fs::read_dir(&mirrors)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "git"))
        .expect("a mirror");
    git(&mirror, &["fsck", "--no-progress"]);
    let listed = git(&mirror, &["worktree", "list", "--porcelain"]);
    assert!(!listed.contains("prunable"), "{listed}");
    mirror
}

async fn results_recorded(pamd: &Pamd, r: &Value) -> usize {
    let id = r["metadata"]["uid"].as_str().unwrap_or("").to_string();
    events(pamd, Some("run.result_recorded"))
        .await
        .iter()
        .filter(|e| e["payload"]["run_id"] == id.as_str())
        .count()
}

/// The worker dies (SIGKILL) while it writes a run's worktree; the git
/// it started dies with the host. Restarted, it does not use the half
/// tree: the attempt gets a whole one at the same base, its result once.
#[tokio::test]
async fn a_worker_killed_during_the_checkout() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    let fake = FakeGit::new(tmp.path());
    fake.cue("hang-checkout");
    let pamd = fast_pamd().await;
    let mut w = start(&pamd, &fake).await;
    let yaml = format!(
        "{}---\n{}",
        project(&format!("file://{}", bare.display())),
        ws_run(
            "victim",
            "echo v >> notes.txt",
            "  workspace: {}\n  restartPolicy:\n    maxAttempts: 2\n    backoffSeconds: 0\n"
        ),
    );
    apply(&pamd, &yaml);
    let pid_file = fake.ctl.join("hung").join("pid");
    let pid = eventually(T, "the checkout to hang", || async {
        std::fs::read_to_string(&pid_file)
            .ok()
            .map(|p| p.trim().to_string())
    })
    .await;
    // Half written: registered, with no files yet.
    w.kill9();
    let _ = std::process::Command::new("kill")
        .args(["-9", &pid])
        .status();
    w.restart().unwrap();
    let r = wait_phase(&pamd, "victim", "exited", T).await;
    let res = &r["status"]["result"];
    assert_eq!(res["commits"], 1, "{r}");
    assert_eq!(res["insertions"], 1, "{r}");
    let full = result(&pamd, "victim", None).await;
    let patch = full["patch"].as_str().unwrap_or("");
    assert!(
        patch.contains("+v\n") && patch.contains(" base\n"),
        "{full}"
    );
    assert_eq!(results_recorded(&pamd, &r).await, 1, "{r}");
    let mirror = mirror_is_sound(&w);
    let branch = res["branch"].as_str().unwrap();
    assert_eq!(
        git(
            &mirror,
            &["show", &format!("refs/heads/{branch}:notes.txt")]
        ),
        "base\nv"
    );
}

/// The wrapper is killed in the middle of the result commit (its git
/// took the index lock, as a dying git leaves it) and the worker with it:
/// attempt 1 reports no result, the run is requeued once, attempt 2
/// starts clean and reports its result once. A stale `index.lock` of the
/// agent's own git does not stop the commit.
#[tokio::test]
async fn the_wrapper_killed_during_the_result_commit() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    let fake = FakeGit::new(tmp.path());
    fake.cue("die-commit");
    let pamd = fast_pamd().await;
    let mut w = start(&pamd, &fake).await;
    let policy = "  restartPolicy:\n    maxAttempts: 2\n    backoffSeconds: 0\n";
    let yaml = format!(
        "{}---\n{}",
        project(&format!("file://{}", bare.display())),
        ws_run(
            "victim",
            "echo attempt-$PAM_ATTEMPT >> notes.txt",
            &format!("  workspace: {{}}\n{policy}")
        ),
    );
    apply(&pamd, &yaml);
    eventually(T, "the commit to die", || async {
        fake.ctl.join("died").exists().then_some(())
    })
    .await;
    w.kill9();
    w.restart().unwrap();
    let r = wait_phase(&pamd, "victim", "exited", T).await;
    assert_eq!(r["status"]["attempt"], 2, "{r}");
    assert_eq!(r["status"]["result"]["attempt"], 2, "{r}");
    let none = result(&pamd, "victim", Some(1)).await;
    assert_eq!(none["error"]["code"], "not_found", "{none}");
    let two = result(&pamd, "victim", Some(2)).await;
    let patch = two["patch"].as_str().unwrap_or("");
    assert!(
        patch.contains("+attempt-2\n") && !patch.contains("attempt-1"),
        "{two}"
    );
    assert_eq!(results_recorded(&pamd, &r).await, 1, "{r}");
    mirror_is_sound(&w);

    // The agent's git died holding the index lock: the commit goes on.
    let yaml = ws_run(
        "locked",
        "echo l >> notes.txt; git add notes.txt; : > \"$(git rev-parse --absolute-git-dir)/index.lock\"",
        "  workspace: {}\n",
    );
    apply(&pamd, &yaml);
    let r = wait_phase(&pamd, "locked", "exited", T).await;
    assert_eq!(r["status"]["result"]["insertions"], 1, "{r}");
    assert_eq!(r["status"]["result"]["commits"], 1, "{r}");
    let _ = run(&pamd, "locked").await;
}
