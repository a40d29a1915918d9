//! Push receivers end to end: a real pamd and a git Source
//! (interval 1 h) with `spec.receiver`; a signed GitHub push of its ref
//! syncs it at once, a GitLab token push too; a bad signature, no
//! signature, another ref, an unknown provider, a replayed delivery, a
//! body that is not JSON and a 10 MB body are refused and sync nothing;
//! every answer is counted in `/metrics`.

use std::time::{Duration, Instant};

use pam_tests::git::{commit, git, hub_signature, write};
use pam_tests::{eventually, ok, Pamd, PamdOptions};
use serde_json::{json, Value};

const SECRET: &str = "s3cret-hook-key";

fn sign(body: &[u8]) -> String {
    hub_signature(SECRET, body)
}

fn task(name: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {name}, project: web}}\nspec: {{title: {name}}}\n")
}

async fn revision(pamd: &Pamd) -> Value {
    pamd.get("/api/v1/sources/repo").await.unwrap()["status"]["revision"].clone()
}

/// Posts `body` to the `provider` hook with `headers`; the status and body.
async fn push(
    pamd: &Pamd,
    provider: &str,
    headers: &[(&str, String)],
    body: Vec<u8>,
) -> (u16, Value) {
    let mut req = pamd
        .http()
        .post(format!("{}/api/v1/sources/repo/hooks/{provider}", pamd.url))
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let r = match req.send().await {
        Ok(r) => r,
        // pamd answered 413 and closed while the 10 MB were still being
        // sent (the answer is counted all the same).
        Err(e) if e.is_request() => return (413, json!({"error": {"code": "closed early"}})),
        Err(e) => panic!("{e}"),
    };
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn github(delivery: &str, signature: &str) -> Vec<(&'static str, String)> {
    vec![
        ("x-github-event", "push".into()),
        ("x-github-delivery", delivery.into()),
        ("x-hub-signature-256", format!("sha256={signature}")),
    ]
}

#[tokio::test]
async fn a_signed_push_syncs_at_once_and_nothing_else_does() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    write(repo.path(), "tasks/a.yaml", &task("a"));
    let c1 = commit(repo.path(), "one");
    let setup = format!(
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: web}}\nspec: {{}}\n---\n\
         apiVersion: pam.dev/v1\nkind: Secret\nmetadata: {{name: hook, project: web}}\nspec:\n  stringData:\n    token: {SECRET}\n---\n\
         apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: repo}}\nspec:\n  git: {{url: 'file://{}', ref: main}}\n  interval: 1h\n  projects: [web]\n  receiver:\n    secretRef: {{project: web, name: hook, key: token}}\n",
        repo.path().display()
    );
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&setup)));
    eventually(Duration::from_secs(20), "first sync", || async {
        (revision(&pamd).await == c1.as_str()).then_some(())
    })
    .await;

    write(repo.path(), "tasks/b.yaml", &task("b"));
    let c2 = commit(repo.path(), "two");
    let body = serde_json::to_vec(&json!({
        "ref": "refs/heads/main", "after": c2,
        "repository": { "default_branch": "main" },
    }))
    .unwrap();
    let forged = sign(b"another body");
    let other_ref = serde_json::to_vec(&json!({ "ref": "refs/heads/dev" })).unwrap();
    // (what, provider, headers, body, the status wanted)
    type Case<'a> = (&'a str, &'a str, Vec<(&'a str, String)>, Vec<u8>, u16);
    let refused: Vec<Case> = vec![
        (
            "bad signature",
            "github",
            github("d0", &forged),
            body.clone(),
            401,
        ),
        (
            "no signature",
            "github",
            vec![("x-github-event", "push".into())],
            body.clone(),
            401,
        ),
        (
            "another ref",
            "github",
            github("d-other", &sign(&other_ref)),
            other_ref.clone(),
            400,
        ),
        (
            "not JSON",
            "github",
            github("d-bad", &sign(b"{not json")),
            b"{not json".to_vec(),
            400,
        ),
        (
            "not a push",
            "github",
            vec![
                ("x-github-event", "issues".into()),
                ("x-hub-signature-256", format!("sha256={}", sign(&body))),
            ],
            body.clone(),
            400,
        ),
        (
            "unknown provider",
            "bitbucket",
            github("d1", &sign(&body)),
            body.clone(),
            400,
        ),
        (
            "10 MB",
            "github",
            github("d-big", "00"),
            vec![b' '; 10 << 20],
            413,
        ),
        (
            "wrong GitLab token",
            "gitlab",
            vec![
                ("x-gitlab-event", "Push Hook".into()),
                ("x-gitlab-token", "guess".into()),
            ],
            body.clone(),
            401,
        ),
    ];
    for (what, provider, headers, b, want) in refused {
        let (status, answer) = push(&pamd, provider, &headers, b).await;
        assert_eq!(status, want, "{what}: {answer}");
        assert!(answer["error"]["code"].is_string(), "{what}: {answer}");
        assert!(!answer.to_string().contains(SECRET), "{what}: {answer}");
    }
    // None of them synced (the interval is an hour).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(revision(&pamd).await, c1.as_str());

    // A signed push of the Source's ref syncs it now.
    let sent = Instant::now();
    let (status, answer) = push(&pamd, "github", &github("d1", &sign(&body)), body.clone()).await;
    assert_eq!(status, 202, "{answer}");
    assert_eq!(answer["triggered"], true, "{answer}");
    eventually(Duration::from_secs(10), "the pushed revision", || async {
        (revision(&pamd).await == c2.as_str()).then_some(())
    })
    .await;
    println!("push → synced in {:?}", sent.elapsed());
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "{:?}",
        sent.elapsed()
    );
    let names = ok(&pamd.pamctl(&["get", "tasks", "-p", "web", "-o", "name"]));
    assert!(names.contains("task/b"), "{names}");
    // The same delivery again is a replay.
    let (status, answer) = push(&pamd, "github", &github("d1", &sign(&body)), body.clone()).await;
    assert_eq!(status, 400, "{answer}");
    // A ping is answered and syncs nothing.
    let ping = br#"{"zen":"hi"}"#.to_vec();
    let (status, answer) = push(
        &pamd,
        "github",
        &[
            ("x-github-event", "ping".into()),
            ("x-hub-signature-256", format!("sha256={}", sign(&ping))),
        ],
        ping,
    )
    .await;
    assert_eq!(
        (status, &answer["triggered"]),
        (200, &json!(false)),
        "{answer}"
    );

    // GitLab's token.
    write(repo.path(), "tasks/c.yaml", &task("c"));
    let c3 = commit(repo.path(), "three");
    let body = serde_json::to_vec(
        &json!({ "ref": "refs/heads/main", "project": { "default_branch": "main" } }),
    )
    .unwrap();
    let (status, answer) = push(
        &pamd,
        "gitlab",
        &[
            ("x-gitlab-event", "Push Hook".into()),
            ("x-gitlab-token", SECRET.into()),
            ("x-gitlab-event-uuid", "g1".into()),
        ],
        body,
    )
    .await;
    assert_eq!(status, 202, "{answer}");
    eventually(
        Duration::from_secs(10),
        "the GitLab push's revision",
        || async { (revision(&pamd).await == c3.as_str()).then_some(()) },
    )
    .await;

    // Suspended: no push is taken and `pamctl sync` fails at once, both
    // saying why; the condition says so until it is resumed.
    ok(&pamd.pamctl(&["suspend", "source", "repo"]));
    let condition = |s: &Value| {
        s["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Suspended").cloned())
            .unwrap_or(Value::Null)
    };
    let s = pamd.get("/api/v1/sources/repo").await.unwrap();
    assert_eq!(condition(&s)["status"], "True", "{s}");
    let body = serde_json::to_vec(&json!({ "ref": "refs/heads/main" })).unwrap();
    let (status, answer) = push(&pamd, "github", &github("d-susp", &sign(&body)), body).await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("suspended"),
        "{answer}"
    );
    let started = Instant::now();
    let out = pamd.pamctl(&["sync", "repo"]);
    assert!(!out.status.success());
    assert!(started.elapsed() < Duration::from_secs(5), "at once");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is suspended") && err.contains("pamctl resume source repo"),
        "{err}"
    );
    ok(&pamd.pamctl(&["resume", "source", "repo"]));
    let s = pamd.get("/api/v1/sources/repo").await.unwrap();
    assert_eq!(condition(&s)["status"], "False", "{s}");

    let metrics = pamd.metrics_text().await.unwrap();
    for (provider, outcome, n) in [
        ("github", "accepted", 1),
        ("github", "bad_signature", 2),
        ("github", "other_ref", 1),
        ("github", "replayed", 1),
        ("github", "too_large", 1),
        ("github", "ping", 1),
        ("other", "unknown_provider", 1),
        ("gitlab", "accepted", 1),
        ("gitlab", "bad_signature", 1),
        ("github", "suspended", 1),
    ] {
        let line =
            format!("pam_source_hooks_total{{provider=\"{provider}\",outcome=\"{outcome}\"}} {n}");
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
}
