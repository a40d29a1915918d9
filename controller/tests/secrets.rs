//! pamd's token files (`admin.token`, `local-worker.token`): found with a
//! mode other users can read, they are made 0600 at start and their token
//! is kept; a path that is not a regular file is refused, never read.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pam_controller::clock::SystemClock;
use pam_controller::ctx::{Ctx, Thresholds};
use pam_controller::server::local_worker;
use pam_controller::server::secrets;
use pam_store::memory::MemStore;

/// A scratch data dir, removed on drop.
struct Dir(PathBuf);

impl Dir {
    fn new() -> Dir {
        let id = &uuid::Uuid::new_v4().simple().to_string()[..12];
        let p = std::env::temp_dir().join(format!("pam-secrets-{id}"));
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn ctx() -> Ctx {
    Ctx::new(
        Arc::new(MemStore::new()),
        Arc::new(SystemClock),
        Thresholds::default(),
    )
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
}

fn chmod(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn a_world_readable_admin_token_is_made_0600_and_kept() {
    let dir = Dir::new();
    let ctx = ctx();
    let path = secrets::ensure_admin_token(&ctx, &dir.0).await.unwrap();
    assert_eq!(mode(&path), 0o600);
    let token = std::fs::read_to_string(&path).unwrap();
    for loose in [0o644, 0o640, 0o604, 0o666] {
        chmod(&path, loose);
        secrets::ensure_admin_token(&ctx, &dir.0).await.unwrap();
        assert_eq!(mode(&path), 0o600, "after {loose:o}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), token, "kept");
    }
    // Stricter than 0600 is left alone.
    chmod(&path, 0o400);
    secrets::ensure_admin_token(&ctx, &dir.0).await.unwrap();
    assert_eq!(mode(&path), 0o400);
}

#[tokio::test]
async fn a_world_readable_local_worker_token_is_made_0600_and_kept() {
    let dir = Dir::new();
    let ctx = ctx();
    let path = local_worker::ensure_token(&ctx, &dir.0, "box")
        .await
        .unwrap();
    let token = std::fs::read_to_string(&path).unwrap();
    chmod(&path, 0o644);
    local_worker::ensure_token(&ctx, &dir.0, "box")
        .await
        .unwrap();
    assert_eq!(mode(&path), 0o600);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), token);
}

#[tokio::test]
async fn a_token_path_that_is_not_a_file_is_refused() {
    let dir = Dir::new();
    std::fs::create_dir_all(dir.0.join(secrets::ADMIN_TOKEN_FILE)).unwrap();
    let err = secrets::ensure_admin_token(&ctx(), &dir.0)
        .await
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("not a regular file"), "{msg}");
}
