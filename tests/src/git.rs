//! git for the end-to-end tests' repositories: [`git`] (pam-testkit's,
//! shared with the controller's tests) and what the e2e tests build on it.

use std::path::Path;

pub use pam_testkit::git::git;

/// Writes `text` to `dir/rel`, making its directories.
pub fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A GitHub push's `X-Hub-Signature-256` value without its `sha256=`:
/// HMAC-SHA256 of `body` with `secret`, as hex (for the push receivers).
pub fn hub_signature(secret: &str, body: &[u8]) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret.as_bytes());
    hex::encode(ring::hmac::sign(&key, body).as_ref())
}

/// Commits everything in `dir` (empty commits too); the new HEAD.
pub fn commit(dir: &Path, message: &str) -> String {
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "--allow-empty", "-m", message]);
    git(dir, &["rev-parse", "HEAD"])
}

/// A bare repository served over git's dumb HTTP protocol (static files)
/// on a local port (`http://127.0.0.1:PORT/origin.git/`, whatever the
/// directory's name); with `known`, only to those `Authorization` values.
/// After a push to it, run `git update-server-info` in it again (what dumb
/// HTTP clients read).
pub async fn serve_dumb_http(bare: &Path, known: &'static [&'static str]) -> u16 {
    git(bare, &["update-server-info"]);
    let root = bare.to_path_buf();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let root = root.clone();
        async move {
            use axum::http::{header, StatusCode};
            use axum::response::IntoResponse;
            let auth = req.headers().get(header::AUTHORIZATION);
            if !known.is_empty()
                && !auth
                    .and_then(|a| a.to_str().ok())
                    .is_some_and(|a| known.contains(&a))
            {
                return (
                    StatusCode::UNAUTHORIZED,
                    [(header::WWW_AUTHENTICATE, "Basic realm=\"git\"")],
                )
                    .into_response();
            }
            let rel = req.uri().path().trim_start_matches("/origin.git/");
            match std::fs::read(root.join(rel)) {
                Ok(bytes) if !rel.contains("..") => bytes.into_response(),
                _ => StatusCode::NOT_FOUND.into_response(),
            }
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

/// The repository and manifests of the workspace tests.
pub mod workspaces {
    use std::path::{Path, PathBuf};
    use std::process::Command;

    use serde_json::Value;

    use super::git;
    use crate::worker::Worker;

    /// A bare repository with one commit on `main`: `notes.txt` = "base\n".
    pub fn origin(tmp: &Path) -> PathBuf {
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
        bare
    }

    pub fn project(url: &str) -> String {
        format!(
            "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: e2e\nspec:\n  repository:\n    url: {url:?}\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t1\n  project: e2e\nspec:\n  title: T1\n"
        )
    }

    /// An exec run in a workspace running `script` with sh.
    pub fn ws_run(name: &str, script: &str, extra: &str) -> String {
        let cmd = serde_json::to_string(&["sh", "-c", script]).unwrap();
        format!(
            "apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: {name}\n  project: e2e\nspec:\n  task: t1\n  provider: exec\n  command: {cmd}\n{extra}"
        )
    }

    /// `notes.txt` on `branch` in whichever worker's mirror has it.
    pub fn notes_on(workers: &[&Worker], branch: &str) -> String {
        for w in workers {
            let mirrors = w.data_dir.join("workspaces").join("mirrors");
            let Ok(rd) = std::fs::read_dir(&mirrors) else {
                continue;
            };
            for m in rd
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "git"))
            {
                let out = Command::new("git")
                    .arg("--git-dir")
                    .arg(m.path())
                    .args(["show", &format!("refs/heads/{branch}:notes.txt")])
                    .output()
                    .unwrap();
                if out.status.success() {
                    return String::from_utf8_lossy(&out.stdout).into_owned();
                }
            }
        }
        panic!("branch {branch} is on no worker");
    }

    pub async fn result(pamd: &crate::Pamd, name: &str, attempt: Option<u32>) -> Value {
        let q = attempt.map_or(String::new(), |a| format!("?attempt={a}"));
        pamd.get(&format!("/api/v1/projects/e2e/runs/{name}/result{q}"))
            .await
            .unwrap_or(Value::Null)
    }
}
