//! `[api] admin_token_file` (the Kubernetes deploy's): replicas reading one
//! admin token from a file they do not write (a Kubernetes Secret) share
//! one `admin` token instead of minting one each into data dirs that die
//! with their pods; a rotated file revokes the old token; a file others
//! can read, or one not holding a token, stops pamd without echoing it.

use std::os::unix::fs::PermissionsExt as _;

use pam_tests::{Pamd, PamdOptions};

fn token() -> String {
    format!(
        "pam_{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn options(file: &std::path::Path, database_url: Option<String>) -> PamdOptions {
    PamdOptions {
        config_toml: format!(
            "[api]\nadmin_token_file = {:?}\n",
            file.display().to_string()
        ),
        database_url,
        ..PamdOptions::default()
    }
}

async fn status(pamd: &Pamd, token: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{}/api/v1/projects", pamd.url))
        .bearer_auth(token)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn replicas_share_the_admin_token_of_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    let first = token();
    std::fs::write(&file, format!("{first}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o440)).unwrap();
    let mut a = Pamd::start(options(&file, None)).await.unwrap();
    let b = Pamd::start(options(&file, Some(a.database_url.clone())))
        .await
        .unwrap();
    for p in [&a, &b] {
        assert_eq!(status(p, &first).await, 200);
        assert!(!p.data_dir.join("admin.token").exists(), "nothing minted");
    }
    a.token = first.clone();
    let tokens = a.get("/api/v1/tokens").await.unwrap();
    let admins: Vec<_> = tokens["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "admin" && t["revokedAt"].is_null())
        .collect();
    assert_eq!(
        admins.len(),
        1,
        "one admin token for both replicas: {tokens}"
    );
    assert!(
        !tokens.to_string().contains(&first),
        "the token itself is never answered"
    );
    // Rotated: the replica restarted with the new file revokes the old.
    let second = token();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&file, &second).unwrap();
    a.restart().await.unwrap();
    assert_eq!(status(&a, &second).await, 200);
    assert_eq!(status(&b, &first).await, 401, "revoked for every replica");
    assert_eq!(status(&b, &second).await, 200);
}

#[tokio::test]
async fn a_readable_or_malformed_token_file_stops_pamd_without_echoing_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    let secret = token();
    std::fs::write(&file, &secret).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = Pamd::start(options(&file, None))
        .await
        .err()
        .expect("refused");
    let text = format!("{err:#}");
    assert!(text.contains("readable by every user"), "{text}");
    assert!(!text.contains(&secret), "{text}");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::write(&file, "hunter2-not-a-token").unwrap();
    let err = Pamd::start(options(&file, None))
        .await
        .err()
        .expect("refused");
    let text = format!("{err:#}");
    assert!(text.contains("does not hold an operator token"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}
