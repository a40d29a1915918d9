//! A git Source end to end against a real git repository served over
//! git's dumb HTTP protocol (a static file server), with a real pamd:
//! per-object status after a sync; an owned run that ends turns the Source
//! Healthy without a sync; substitution from a Secret and from a Project;
//! `diff source` previews the next revision without applying it; a bad
//! signature syncs nothing while a signed GitHub push syncs at once
//! (interval 1 h); suspend and resume.

use std::path::Path;
use std::time::{Duration, Instant};

use pam_tests::git::{commit, git, hub_signature, serve_dumb_http, write};
use pam_tests::{eventually, fails, ok, Pamd, PamdOptions};
use serde_json::{json, Value};

const SECRET: &str = "hook-key-over-http";

fn sign(body: &[u8]) -> String {
    hub_signature(SECRET, body)
}

/// Commits `work` and pushes it to the served bare repository.
fn publish(work: &Path, bare: &Path, message: &str) -> String {
    let c = commit(work, message);
    git(
        work,
        &["push", "-q", &bare.display().to_string(), "HEAD:main"],
    );
    git(bare, &["update-server-info"]);
    c
}

async fn source(pamd: &Pamd) -> Value {
    pamd.get("/api/v1/sources/repo").await.unwrap()
}

fn object<'a>(s: &'a Value, kind: &str, name: &str) -> &'a Value {
    s["status"]["objects"]
        .as_array()
        .and_then(|os| os.iter().find(|o| o["kind"] == kind && o["name"] == name))
        .unwrap_or(&Value::Null)
}

async fn hook(pamd: &Pamd, signature: &str, delivery: &str, body: &[u8]) -> u16 {
    pamd.http()
        .post(format!("{}/api/v1/sources/repo/hooks/github", pamd.url))
        .header("content-type", "application/json")
        .header("x-github-event", "push")
        .header("x-github-delivery", delivery)
        .header("x-hub-signature-256", format!("sha256={signature}"))
        .body(body.to_vec())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

// Multi-threaded: the git server runs on the test's runtime while the
// test blocks in pamctl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_over_dumb_http_syncs_previews_and_takes_signed_pushes() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bare = tmp.path().join("origin.git");
    git(tmp.path(), &["init", "-q", "--bare", "origin.git"]);
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q"]);
    write(
        &work,
        "project.yaml",
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {}\n",
    );
    write(&work, "tasks/t.yaml", "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: t, project: web}\nspec: {title: '${TITLE}', description: 'for ${OWNER}'}\n");
    write(&work, "runs/r1.yaml", "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: web}\nspec: {task: t, provider: claude, prompt: hi, cwd: /tmp}\n");
    let c1 = publish(&work, &bare, "one");
    let port = serve_dumb_http(&bare, &[]).await;

    // The operator's side: a project for the Secrets, the variables and
    // the receiver's key; the Source polls hourly.
    let setup = format!(
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: ops, annotations: {{vars.pam.dev/OWNER: team-web}}}}\nspec: {{}}\n---\n\
         apiVersion: pam.dev/v1\nkind: Secret\nmetadata: {{name: vars, project: ops}}\nspec:\n  stringData:\n    TITLE: From the secret\n---\n\
         apiVersion: pam.dev/v1\nkind: Secret\nmetadata: {{name: hook, project: ops}}\nspec:\n  stringData:\n    token: {SECRET}\n---\n\
         apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: repo}}\nspec:\n  git: {{url: 'http://127.0.0.1:{port}/origin.git', ref: main}}\n  interval: 1h\n  projects: [web, ops]\n  substitute:\n    fromSecrets: [{{project: ops, name: vars}}]\n    fromProjects: [ops]\n  receiver:\n    secretRef: {{project: ops, name: hook, key: token}}\n"
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&setup)));
    let s = eventually(Duration::from_secs(30), "the first sync", || async {
        let s = source(&pamd).await;
        (s["status"]["revision"] == c1.as_str()).then_some(s)
    })
    .await;

    // Per-object status after the sync.
    assert_eq!(s["status"]["sync"], "Synced", "{s}");
    assert_eq!(object(&s, "Project", "web")["sync"], "Synced", "{s}");
    let t = object(&s, "Task", "t");
    assert_eq!(
        (&t["sync"], &t["health"]),
        (&json!("Synced"), &json!("Healthy")),
        "{s}"
    );
    let r = object(&s, "Run", "r1");
    assert_eq!(
        (&r["sync"], &r["health"]),
        (&json!("Synced"), &json!("Progressing")),
        "{s}"
    );
    assert_eq!(s["status"]["health"], "Progressing", "{s}");
    // Substitution from a Secret.
    let task = pamd.get("/api/v1/projects/web/tasks/t").await.unwrap();
    assert_eq!(task["spec"]["title"], "From the secret", "{task}");
    // And from the Project (its `vars.pam.dev/` annotations).
    assert_eq!(task["spec"]["description"], "for team-web", "{task}");

    // The owned run ends: Healthy within a second, with no sync.
    let attempted = s["status"]["lastAttemptAt"].clone();
    ok(&pamd.pamctl(&["-p", "web", "stop", "r1"]));
    let stopped = Instant::now();
    let s = eventually(Duration::from_secs(5), "Healthy", || async {
        let s = source(&pamd).await;
        (s["status"]["health"] == "Healthy" && object(&s, "Run", "r1")["health"] == "Healthy")
            .then_some(s)
    })
    .await;
    println!("run stopped → Source Healthy in {:?}", stopped.elapsed());
    assert!(
        stopped.elapsed() < Duration::from_secs(1),
        "{:?}",
        stopped.elapsed()
    );
    assert_eq!(s["status"]["lastAttemptAt"], attempted, "no sync ran: {s}");

    // The next revision, previewed and not applied.
    write(
        &work,
        "tasks/u.yaml",
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: u, project: web}\nspec: {title: U}\n",
    );
    let c2 = publish(&work, &bare, "two");
    let diffed = pamd.pamctl(&["diff", "source", "repo"]);
    let out = String::from_utf8_lossy(&diffed.stdout).to_string();
    fails(&diffed, 1);
    assert!(out.contains("task.pam.dev/web/u created"), "{out}");
    assert_eq!(source(&pamd).await["status"]["revision"], c1.as_str());
    let names = ok(&pamd.pamctl(&["get", "tasks", "-p", "web", "-o", "name"]));
    assert_eq!(names, "task/t\n", "nothing applied");

    // A push with a bad signature syncs nothing.
    let body = serde_json::to_vec(&json!({"ref": "refs/heads/main", "after": c2})).unwrap();
    assert_eq!(hook(&pamd, &sign(b"forged"), "d0", &body).await, 401);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(source(&pamd).await["status"]["revision"], c1.as_str());

    // A signed push syncs now (the interval is an hour).
    let sent = Instant::now();
    assert_eq!(hook(&pamd, &sign(&body), "d1", &body).await, 202);
    eventually(Duration::from_secs(10), "the pushed revision", || async {
        (source(&pamd).await["status"]["revision"] == c2.as_str()).then_some(())
    })
    .await;
    println!("push → synced in {:?}", sent.elapsed());
    assert!(
        sent.elapsed() < Duration::from_secs(1),
        "{:?}",
        sent.elapsed()
    );

    // Suspend: shown, and a sync fails at once saying so; resume.
    ok(&pamd.pamctl(&["suspend", "source", "repo"]));
    let listed = ok(&pamd.pamctl(&["get", "sources"]));
    assert!(
        listed.lines().nth(1).is_some_and(|l| l.contains("true")),
        "{listed}"
    );
    let asked = Instant::now();
    let refused = fails(&pamd.pamctl(&["sync", "repo"]), 3);
    assert!(refused.contains("suspended"), "{refused}");
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "{:?}",
        asked.elapsed()
    );
    ok(&pamd.pamctl(&["resume", "source", "repo"]));
    ok(&pamd.pamctl(&["sync", "repo"]));
}
