//! The commit `pam_build_info` names: `PAM_COMMIT` when the
//! build sets it (an image built without `.git`), else git's short HEAD,
//! else `unknown`.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    println!("cargo:rerun-if-env-changed=PAM_COMMIT");
    let commit = std::env::var("PAM_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_string());
    // A new commit or checkout moves HEAD's reflog: build again then.
    // (Only a file that exists: cargo runs a script that names a missing
    // one on every build.)
    if let Some(reflog) =
        git(&["rev-parse", "--git-path", "logs/HEAD"]).filter(|p| std::path::Path::new(p).exists())
    {
        println!("cargo:rerun-if-changed={reflog}");
    }
    println!("cargo:rustc-env=PAM_COMMIT={commit}");
}
