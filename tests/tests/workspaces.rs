//! Workspaces end to end: real pamd, real workers, real tmux and a real git
//! repository (a bare repo served over `file://`). Every run works in a
//! worktree of its own on its own branch; its result (commits, diff
//! stats, the patch) reaches pamd with `finished`, `status.result`,
//! `pamctl result` and `describe`; attempt 2 starts clean (`fresh`) or
//! from attempt 1's branch (`previous`); a repository that cannot be
//! fetched fails the spawn with git's words.

use std::time::Duration;

use std::path::Path;

use pam_tests::git::workspaces::{notes_on, origin, project, result, ws_run};
use pam_tests::git::{git, serve_dumb_http};
use pam_tests::ok;
use pam_tests::worker::{apply, fast_pamd, run, wait_online, wait_phase, Worker};
use serde_json::Value;

const T: Duration = Duration::from_secs(180);

/// 20 exec runs on 2 workers, all at once, each appending its line to
/// the same file of `url`'s repository (`bare` on disk); with `push`,
/// every even one pushes its branch. Each gets its own branch holding
/// exactly its line, a result with its stats and patch, and (pushed) its
/// branch in the bare repository.
async fn twenty_at_once(bare: &Path, url: &str, push: bool) -> (pam_tests::Pamd, Worker, Worker) {
    const N: usize = 20;
    let pamd = fast_pamd().await;
    let w1 = Worker::start(&pamd, "h1").await.unwrap();
    let w2 = Worker::start(&pamd, "h2").await.unwrap();
    wait_online(&pamd, "h1").await;
    wait_online(&pamd, "h2").await;
    let pushes = |i: usize| push && i.is_multiple_of(2);
    let mut yaml = project(url);
    for i in 0..N {
        yaml.push_str("---\n");
        let ws = if pushes(i) {
            "  workspace:\n    push: true\n"
        } else {
            "  workspace: {}\n"
        };
        yaml.push_str(&ws_run(
            &format!("w{i}"),
            &format!("echo line-{i} >> notes.txt"),
            ws,
        ));
    }
    apply(&pamd, &yaml);
    for i in 0..N {
        let name = format!("w{i}");
        let r = wait_phase(&pamd, &name, "exited", T).await;
        let res = &r["status"]["result"];
        let branch = format!("pam/t1/{name}-a1");
        assert_eq!(res["branch"], branch.as_str(), "{r}");
        assert_eq!(res["attempt"], 1, "{r}");
        assert_eq!(res["commits"], 1, "{r}");
        assert_eq!(res["filesChanged"], 1, "{r}");
        assert_eq!(res["insertions"], 1, "{r}");
        assert_eq!(res["deletions"], 0, "{r}");
        assert_ne!(res["baseCommit"], res["headCommit"], "{r}");
        // Exactly its own line, on its own branch.
        assert_eq!(notes_on(&[&w1, &w2], &branch), format!("base\nline-{i}\n"));
        let full = result(&pamd, &name, None).await;
        let patch = full["patch"].as_str().unwrap_or("");
        assert!(patch.contains(&format!("+line-{i}\n")), "{full}");
        assert_eq!(patch.matches("\n+line-").count(), 1, "{patch}");
        assert_eq!(full["patchTruncated"], Value::Null, "{full}");
        let in_bare = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(bare)
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{branch}"),
            ])
            .output()
            .unwrap();
        if pushes(i) {
            assert_eq!(res["pushed"], true, "{r}");
            assert_eq!(
                String::from_utf8_lossy(&in_bare.stdout).trim(),
                res["headCommit"].as_str().unwrap(),
                "{branch} pushed"
            );
        } else {
            assert_eq!(res["pushed"], Value::Null, "{r}");
            assert!(!in_bare.status.success(), "{branch} not pushed");
        }
    }
    // Both hosts took some: they shared the repository, not one worktree.
    let hosts: std::collections::BTreeSet<String> = {
        let mut s = std::collections::BTreeSet::new();
        for i in 0..N {
            let r = run(&pamd, &format!("w{i}")).await;
            s.insert(r["status"]["host"].as_str().unwrap_or("").to_string());
        }
        s
    };
    assert_eq!(hosts.len(), 2, "{hosts:?}");
    let recorded = pam_tests::worker::events(&pamd, Some("run.result_recorded")).await;
    assert_eq!(recorded.len(), N, "{recorded:#?}");
    (pamd, w1, w2)
}

#[tokio::test]
async fn runs_at_once_on_two_workers_each_get_their_own_branch_and_result() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    let (pamd, _w1, _w2) = twenty_at_once(&bare, &format!("file://{}", bare.display()), true).await;
    let printed = ok(&pamd.pamctl(&["-p", "e2e", "result", "w3"]));
    assert!(printed.contains("Branch:   pam/t1/w3-a1"), "{printed}");
    assert!(printed.contains("Changed:  1 files, +1 -0"), "{printed}");
    let patch = ok(&pamd.pamctl(&["-p", "e2e", "result", "w3", "--patch"]));
    assert!(
        patch.contains("+line-3\n") && !patch.contains('\x1b'),
        "{patch}"
    );
    let described = ok(&pamd.pamctl(&["-p", "e2e", "describe", "run", "w3"]));
    assert!(
        described.contains("branch pam/t1/w3-a1: 1 commits, 1 files changed, +1 -0 (attempt 1)"),
        "{described}"
    );
    let missing = pamd.pamctl(&["-p", "e2e", "result", "w3", "--attempt", "2"]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("no workspace result for attempt 2"),
        "{missing:?}"
    );
}

/// The same over git's dumb HTTP protocol (a static file server; dumb
/// HTTP takes no push).
#[tokio::test]
async fn runs_at_once_over_dumb_http() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    let port = serve_dumb_http(&bare, &[]).await;
    twenty_at_once(&bare, &format!("http://127.0.0.1:{port}/origin.git"), false).await;
}

/// Attempt 1 writes its line and exits 1; attempt 2 writes its own.
const TWICE: &str = "echo attempt-$PAM_ATTEMPT >> notes.txt; test \"$PAM_ATTEMPT\" = 2 || exit 1";

#[tokio::test]
async fn attempt_two_starts_clean_or_from_attempt_one() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    let pamd = fast_pamd().await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let policy = "  restartPolicy:\n    maxAttempts: 2\n    backoffSeconds: 0\n";
    let yaml = format!(
        "{}---\n{}---\n{}",
        project(&format!("file://{}", bare.display())),
        ws_run("fresh", TWICE, &format!("  workspace: {{}}\n{policy}")),
        ws_run(
            "prev",
            TWICE,
            &format!("  workspace:\n    fromAttempt: previous\n    branch: work/prev\n{policy}")
        ),
    );
    apply(&pamd, &yaml);
    for name in ["fresh", "prev"] {
        let r = wait_phase(&pamd, name, "exited", T).await;
        assert_eq!(r["status"]["attempt"], 2, "{r}");
    }
    let (f1, f2) = (
        result(&pamd, "fresh", Some(1)).await,
        result(&pamd, "fresh", Some(2)).await,
    );
    // fresh: the same base, none of attempt 1's files.
    assert_eq!(f1["baseCommit"], f2["baseCommit"], "{f1} {f2}");
    assert_eq!(notes_on(&[&w], "pam/t1/fresh-a1"), "base\nattempt-1\n");
    assert_eq!(notes_on(&[&w], "pam/t1/fresh-a2"), "base\nattempt-2\n");
    assert_eq!(f2["commits"], 1, "{f2}");
    // previous: attempt 2 starts at attempt 1's head, on its own branch.
    let (p1, p2) = (
        result(&pamd, "prev", Some(1)).await,
        result(&pamd, "prev", Some(2)).await,
    );
    assert_eq!(p1["branch"], "work/prev", "{p1}");
    assert_eq!(p2["branch"], "work/prev-a2", "{p2}");
    assert_eq!(p2["baseCommit"], p1["headCommit"], "{p1} {p2}");
    assert_eq!(
        notes_on(&[&w], "work/prev-a2"),
        "base\nattempt-1\nattempt-2\n"
    );
    // The run's status shows the latest attempt's.
    let r = run(&pamd, "prev").await;
    assert_eq!(r["status"]["result"]["attempt"], 2, "{r}");
}

#[tokio::test]
async fn a_repository_that_cannot_be_fetched_fails_the_spawn_with_gits_words() {
    let pamd = fast_pamd().await;
    let _w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let yaml = format!(
        "{}---\n{}",
        project("file:///nonexistent/pam-workspaces/origin.git"),
        ws_run("nofetch", "true", "  workspace: {}\n"),
    );
    apply(&pamd, &yaml);
    let r = wait_phase(&pamd, "nofetch", "failed", T).await;
    assert_eq!(r["status"]["failureReason"], "spawn_failed", "{r}");
    let msg = r["status"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("clone file:///nonexistent/pam-workspaces/origin.git")
            && msg.contains("git clone failed"),
        "{msg}"
    );
    // No result for an attempt that never started.
    assert_eq!(r["status"]["result"], Value::Null, "{r}");
    let none = result(&pamd, "nofetch", None).await;
    assert_eq!(none["error"]["code"], "not_found", "{none}");
}

/// `push: true` pushes the branch to the repository; a push the remote
/// refuses is a recorded result (run exited, `pushed: false` with git's
/// words), not a failure. The worktree goes per `keep`: removed after a
/// clean exit by default, kept with `always`; its branch stays.
#[tokio::test]
async fn push_and_keep() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    // The remote refuses any branch named *refused*.
    let hook = bare.join("hooks").join("pre-receive");
    std::fs::write(
        &hook,
        "#!/bin/sh\nwhile read old new ref; do case \"$ref\" in *refused*) echo \"no pushes to $ref\" >&2; exit 1;; esac; done\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
    let pamd = fast_pamd().await;
    let w = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    // A task's workspace is the default of its runs without one (or a cwd).
    let task_default = "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t2\n  project: e2e\nspec:\n  title: T2\n  workspace:\n    keep: always\n---\napiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: fromtask\n  project: e2e\nspec:\n  task: t2\n  provider: exec\n  command: [sh, -c, 'echo t >> notes.txt']\n";
    let yaml = format!(
        "{}---\n{}---\n{}---\n{}---\n{task_default}",
        project(&format!("file://{}", bare.display())),
        ws_run(
            "pushed",
            "echo p >> notes.txt",
            "  workspace:\n    branch: work/pushed\n    push: true\n"
        ),
        ws_run(
            "refused",
            "echo r >> notes.txt",
            "  workspace:\n    branch: work/refused\n    push: true\n"
        ),
        ws_run(
            "kept",
            "echo k >> notes.txt",
            "  workspace:\n    keep: always\n"
        ),
    );
    apply(&pamd, &yaml);
    let p = wait_phase(&pamd, "pushed", "exited", T).await;
    assert_eq!(p["status"]["result"]["pushed"], true, "{p}");
    let head = p["status"]["result"]["headCommit"].as_str().unwrap();
    assert_eq!(
        git(&bare, &["rev-parse", "refs/heads/work/pushed"]).trim(),
        head
    );

    let r = wait_phase(&pamd, "refused", "exited", T).await;
    assert_eq!(r["status"]["result"]["pushed"], false, "{r}");
    let why = r["status"]["result"]["pushMessage"].as_str().unwrap_or("");
    assert!(why.contains("no pushes to refs/heads/work/refused"), "{r}");
    let printed = ok(&pamd.pamctl(&["-p", "e2e", "result", "refused"]));
    assert!(printed.contains("Pushed:   no: "), "{printed}");
    // Not pushed where not asked.
    let k = wait_phase(&pamd, "kept", "exited", T).await;
    assert_eq!(k["status"]["result"]["pushed"], Value::Null, "{k}");

    let tree = |r: &Value| {
        w.data_dir
            .join("workspaces")
            .join("trees")
            .join(format!("{}-a1", r["metadata"]["uid"].as_str().unwrap()))
    };
    pam_tests::eventually(
        Duration::from_secs(30),
        "pushed's worktree removed",
        || async { (!tree(&p).exists()).then_some(()) },
    )
    .await;
    assert!(tree(&k).join("notes.txt").exists(), "keep: always");
    let t = wait_phase(&pamd, "fromtask", "exited", T).await;
    assert_eq!(t["status"]["result"]["branch"], "pam/t2/fromtask-a1", "{t}");
    assert!(
        tree(&t).join("notes.txt").exists(),
        "the task's keep: always"
    );
    assert_eq!(notes_on(&[&w], "pam/t2/fromtask-a1"), "base\nt\n");
    assert_eq!(notes_on(&[&w], "work/pushed"), "base\np\n");
}

/// A repository over (dumb) HTTP that wants a password: the worker with
/// `[workspaces] credentials_file` fetches it; the one without fails the
/// spawn with git's words, never waiting for a prompt.
#[tokio::test]
async fn an_http_repository_with_credentials_from_the_workers_file() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    // user:pw (the worker's file) or bot:s3cret-git-pw (a Secret).
    let port = serve_dumb_http(
        &bare,
        &["Basic dXNlcjpwdw==", "Basic Ym90OnMzY3JldC1naXQtcHc="],
    )
    .await;
    let creds = tmp.path().join("git-credentials");
    std::fs::write(&creds, format!("http://user:pw@127.0.0.1:{port}\n")).unwrap();

    let pamd = fast_pamd().await;
    let toml = format!(
        "{}\n[workspaces]\ncredentials_file = {:?}\n",
        pam_tests::worker::FAST_WORKER_TOML,
        creds.display().to_string()
    );
    let t1 = pam_tests::worker::create_worker_token(&pamd, "h1")
        .await
        .unwrap();
    let _w1 = Worker::start_with_token(&pamd.url, &t1, "h1", &toml).unwrap();
    let _w2 = Worker::start(&pamd, "h2").await.unwrap();
    wait_online(&pamd, "h1").await;
    wait_online(&pamd, "h2").await;
    let url = format!("http://127.0.0.1:{port}/origin.git");
    let yaml = format!(
        "{}---\n{}---\n{}",
        project(&url),
        ws_run(
            "withcreds",
            "echo c >> notes.txt",
            "  workspace: {}\n  target: {host: h1}\n"
        ),
        ws_run("nocreds", "true", "  workspace: {}\n  target: {host: h2}\n"),
    );
    apply(&pamd, &yaml);
    let r = wait_phase(&pamd, "withcreds", "exited", T).await;
    assert_eq!(r["status"]["result"]["insertions"], 1, "{r}");
    let r = wait_phase(&pamd, "nocreds", "failed", T).await;
    let msg = r["status"]["message"].as_str().unwrap_or("");
    assert!(msg.contains("could not read Username"), "{msg}");
    assert!(!msg.contains("pw"), "{msg}");

    // The Project's own credentials, from a Secret by reference: h2 (no
    // file of its own) fetches and pushes with them; a wrong key name is
    // the spawn's failure, naming the key, never a value.
    let with_secret = project(&url).replace(
        "    url:",
        "    secretRef:\n      name: git-creds\n    url:",
    );
    let yaml = format!(
        "apiVersion: pam.dev/v1\nkind: Secret\nmetadata:\n  name: git-creds\n  project: e2e\nspec:\n  stringData:\n    username: bot\n    password: s3cret-git-pw\n---\n{with_secret}---\n{}",
        ws_run("fromsecret", "echo s >> notes.txt", "  workspace: {}\n  target: {host: h2}\n"),
    );
    apply(&pamd, &yaml);
    let r = wait_phase(&pamd, "fromsecret", "exited", T).await;
    assert_eq!(r["status"]["result"]["insertions"], 1, "{r}");
    let leftovers: Vec<_> = walk(&_w2.data_dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().ends_with(".git-credentials"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    assert!(!_w2.log().contains("s3cret-git-pw"));
    let wrong_key = with_secret.replace(
        "name: git-creds",
        "name: git-creds\n      passwordKey: token",
    );
    apply(
        &pamd,
        &format!(
            "{wrong_key}---\n{}",
            ws_run(
                "wrongkey",
                "true",
                "  workspace: {}\n  target: {host: h2}\n"
            )
        ),
    );
    let r = wait_phase(&pamd, "wrongkey", "failed", T).await;
    let msg = r["status"]["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("the repository's credentials") && msg.contains("\"token\""),
        "{msg}"
    );
    assert!(!msg.contains("s3cret"), "{msg}");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A host whose data volume has less free than its worker's `[workspaces]
/// min_free_bytes` takes no run with a workspace — the run waits and its
/// `Scheduled` condition says why — and still takes runs without one.
#[tokio::test]
async fn a_host_low_on_disk_takes_no_workspace_run() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    let pamd = fast_pamd().await;
    // No volume here has 8 EB free.
    let toml = format!(
        "{}\n[workspaces]\nmin_free_bytes = 9000000000000000000\n",
        pam_tests::worker::FAST_WORKER_TOML
    );
    let token = pam_tests::worker::create_worker_token(&pamd, "low")
        .await
        .unwrap();
    let _w = Worker::start_with_token(&pamd.url, &token, "low", &toml).unwrap();
    wait_online(&pamd, "low").await;
    let yaml = format!(
        "{}---\n{}---\n{}",
        project(&format!("file://{}", bare.display())),
        ws_run("needs-ws", "echo x >> notes.txt", "  workspace: {}\n"),
        ws_run("plain", "true", "  cwd: /tmp\n"),
    );
    apply(&pamd, &yaml);
    let plain = wait_phase(&pamd, "plain", "exited", T).await;
    assert_eq!(plain["status"]["host"], "low", "{plain}");
    let want = "0/1 hosts can run it: 1 low on workspace disk";
    let r = pam_tests::eventually(T, "needs-ws's Scheduled condition", || async {
        let r = run(&pamd, "needs-ws").await;
        let said = r["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Scheduled").cloned())
            .unwrap_or(Value::Null);
        (said["message"] == want).then_some(r)
    })
    .await;
    assert_eq!(r["status"]["phase"], "pending", "{r}");
    let host = pamd.get("/api/v1/hosts/low").await.unwrap();
    let caps = &host["status"]["capabilities"];
    assert_eq!(
        caps["workspaceMinFreeBytes"], 9_000_000_000_000_000_000u64,
        "{host}"
    );
    assert!(caps["workspaceFreeBytes"].as_u64().is_some(), "{host}");
}

/// `fromAttempt: previous` when attempt 2 lands on another host than
/// attempt 1 (which neither pushed nor left its branch there): the new
/// host applies attempt 1's stored patch on its base and commits it, so
/// attempt 2 starts from that work and its result counts only its own.
#[tokio::test]
async fn previous_on_another_host_carries_the_patch_over() {
    let tmp = tempfile::tempdir().unwrap();
    let bare = origin(tmp.path());
    let pamd = fast_pamd().await;
    let _w1 = Worker::start(&pamd, "h1").await.unwrap();
    wait_online(&pamd, "h1").await;
    let policy = "  restartPolicy:\n    maxAttempts: 2\n    backoffSeconds: 5\n";
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            project(&format!("file://{}", bare.display())),
            ws_run(
                "moved",
                TWICE,
                &format!("  workspace:\n    fromAttempt: previous\n{policy}")
            )
        ),
    );
    // Attempt 1 failed on h1; before attempt 2 is due, h1 takes no more.
    pam_tests::eventually(T, "attempt 1's result", || async {
        let one = result(&pamd, "moved", Some(1)).await;
        one["headCommit"].is_string().then_some(())
    })
    .await;
    ok(&pamd.pamctl(&["host", "disable", "h1"]));
    let w2 = Worker::start(&pamd, "h2").await.unwrap();
    wait_online(&pamd, "h2").await;
    let r = wait_phase(&pamd, "moved", "exited", T).await;
    assert_eq!(r["status"]["attempt"], 2, "{r}");
    assert_eq!(r["status"]["host"], "h2", "{r}");
    let (p1, p2) = (
        result(&pamd, "moved", Some(1)).await,
        result(&pamd, "moved", Some(2)).await,
    );
    assert_eq!(
        notes_on(&[&w2], "pam/t1/moved-a2"),
        "base\nattempt-1\nattempt-2\n"
    );
    // Its own line only: attempt 1's arrived as the carried commit.
    assert_eq!(p2["commits"], 1, "{p2}");
    assert_eq!(p2["insertions"], 1, "{p2}");
    let patch = p2["patch"].as_str().unwrap_or("");
    assert!(
        patch.contains("+attempt-2\n") && !patch.contains("+attempt-1"),
        "{p2}"
    );
    assert_ne!(p2["baseCommit"], p1["baseCommit"], "{p1} {p2}");
}
