//! The README's promise, end to end: a real pamd on real PostgreSQL, the
//! examples applied with pamctl, read back, applied again unchanged.

use pam_tests::{ok, Pamd, PamdOptions};

fn examples() -> String {
    format!("{}/../examples", env!("CARGO_MANIFEST_DIR"))
}

#[tokio::test]
async fn examples_apply_cleanly_and_twice_is_unchanged() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
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
