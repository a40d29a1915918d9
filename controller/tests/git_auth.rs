//! git Sources authenticate with pamd's `[git]` config, never a manifest:
//! a real git fetch over HTTP from a server that wants Basic
//! auth (git's "dumb" HTTP protocol: a bare repository's files served
//! as they are), with and without a credentials file.

use std::path::PathBuf;

use axum::extract::{Path as UrlPath, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use pam_controller::sync::fetch::{GitAuth, Repos};
use pam_testkit::git::git;

/// `pam:s3cret-token`, as Basic auth sends it.
const BASIC: &str = "Basic cGFtOnMzY3JldC10b2tlbg==";

async fn serve(
    State(root): State<PathBuf>,
    headers: HeaderMap,
    UrlPath(path): UrlPath<String>,
) -> Response {
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(BASIC) {
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", "Basic realm=\"git\"")],
        )
            .into_response();
    }
    if path.split('/').any(|c| c == "..") {
        return StatusCode::BAD_REQUEST.into_response();
    }
    match std::fs::read(root.join(&path)) {
        Ok(bytes) => bytes.into_response(),
        Err(_) => StatusCode::NOT_FOUND.into_response(),
    }
}

#[tokio::test]
async fn a_private_repository_is_fetched_with_the_credentials_file_only() {
    // A bare repository with one manifest, prepared for dumb HTTP.
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("a.yaml"), "x: 1\n").unwrap();
    git(&work, &["add", "."]);
    git(&work, &["commit", "-q", "-m", "one"]);
    let served = tmp.path().join("served");
    std::fs::create_dir(&served).unwrap();
    let bare = served.join("r.git");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            "--bare",
            work.to_str().unwrap(),
            bare.to_str().unwrap(),
        ],
    );
    git(&bare, &["update-server-info"]);

    let app = axum::Router::new()
        .route("/{*path}", axum::routing::get(serve))
        .with_state(served);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let url = format!("http://127.0.0.1:{port}/r.git");

    // Without credentials: a clear refusal, no prompt, no hang.
    let data = tmp.path().join("data");
    let id = uuid::Uuid::new_v4();
    let err = Repos::new(&data, GitAuth::default())
        .mirror(id)
        .fetch(&url, "main")
        .await
        .unwrap_err()
        .to_string();
    assert!(err.starts_with("git fetch:"), "{err}");

    // With pamd's credentials file (git-credential-store format).
    let creds = tmp.path().join("git-credentials");
    std::fs::write(
        &creds,
        format!("http://pam:s3cret-token@127.0.0.1:{port}\n"),
    )
    .unwrap();
    let auth = GitAuth {
        credentials_file: Some(creds.clone()),
        ..Default::default()
    };
    let mirror = Repos::new(&data, auth).mirror(id);
    let commit = mirror.fetch(&url, "main").await.unwrap();
    let tree = mirror.tree(&commit, "", &|_| None).await.unwrap();
    assert_eq!(tree.files.len(), 1);
    assert_eq!(tree.files[0].content, "x: 1\n");
    // The store helper only reads: the file is as it was.
    let text = std::fs::read_to_string(&creds).unwrap();
    assert_eq!(text, format!("http://pam:s3cret-token@127.0.0.1:{port}\n"));
}
