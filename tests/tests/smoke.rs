//! The README's promise, end to end: a real pamd on real PostgreSQL, the
//! examples applied with pamctl, read back, applied again unchanged.

use pam_tests::{ok, Pamd, PamdOptions};

fn examples() -> String {
    format!("{}/../examples", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn examples_apply_cleanly_and_twice_is_unchanged() {
    // examples/webhooks.yaml signs with the key `signing` of Secret
    // `ci-webhook` in project webshop: pamd reads it from its keys dir.
    let keys = tempfile::tempdir().unwrap();
    let secret = keys.path().join("webshop/ci-webhook");
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(secret.join("signing"), "example-secret").unwrap();
    let pamd = Pamd::start(PamdOptions {
        config_toml: format!(
            "[webhooks]\nsigning_keys_dir = {:?}\n",
            keys.path().display().to_string()
        ),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let out = ok(&pamd.pamctl(&["apply", "-R", "-f", &examples()]));
    assert!(out.lines().count() >= 10, "{out}");
    assert!(out.lines().all(|l| l.ends_with(" created")), "{out}");
    let again = ok(&pamd.pamctl(&["apply", "-R", "-f", &examples()]));
    assert!(again.lines().all(|l| l.ends_with(" unchanged")), "{again}");
    let tasks = ok(&pamd.pamctl(&["get", "tasks", "-A", "-o", "name"]));
    assert!(tasks.lines().count() >= 10, "{tasks}");
    let diff = pamd.pamctl(&["diff", "-R", "-f", &examples()]);
    assert_eq!(
        diff.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&diff.stderr)
    );
}
