//! pamd's data dir is its own: a data dir made before pamd started (0755,
//! as the harness and most umasks make it) is closed to other local users
//! at start, and the embedded cluster's log — which records failed
//! statements' text — is its owner's only. As root, the cluster's user
//! keeps only the search bit on the data dir (no listing, no reading).

use std::os::unix::fs::PermissionsExt as _;

use pam_tests::{Pamd, PamdOptions};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

#[tokio::test]
async fn the_data_dir_and_the_clusters_log_are_closed_to_other_users() {
    let pamd = Pamd::start(PamdOptions {
        embedded: true,
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let dir = mode(&pamd.data_dir);
    assert_eq!(dir & 0o700, 0o700, "the owner keeps it: {dir:o}");
    assert_eq!(
        dir & 0o076,
        0,
        "no group access, no listing or writing by others: {dir:o}"
    );
    let log = mode(&pamd.data_dir.join("postgres.log"));
    assert_eq!(log, 0o600, "postgres.log {log:o}");
}
