//! Which directories a directory Source may read, and how still its files
//! must be before a sync may prune by them (pamd's `[sources]`
//! config; docs/gitops.md, "Which directories").
//!
//! A Source's `spec.path` comes from a manifest: anyone who may apply one
//! would otherwise make pamd read (and quote in a sync error) any file
//! pamd can read, or walk the whole filesystem (`/`). So the path is
//! canonicalized — symlinks and `..` resolved — and must then lie under
//! pamd's data dir or one of `[sources] allowed_roots`; anything else is
//! refused before a byte is read, at every sync (a path that does not
//! exist yet is refused until it does: where it will resolve to is not
//! known before).

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default settle window (`[sources] settle_ms`).
pub const DEFAULT_SETTLE: Duration = Duration::from_millis(1000);

/// The directories Sources may read, and the settle window.
#[derive(Debug, Clone, PartialEq)]
pub struct DirPolicy {
    /// pamd's data dir first, then the configured roots, as given
    /// (canonicalized at each check: a root may appear after start).
    roots: Vec<PathBuf>,
    /// How long every file of a tree must be unchanged (and none open for
    /// writing) before a sync may prune by it (super::settle).
    pub settle: Duration,
}

impl DirPolicy {
    pub fn new(data_dir: &Path, allowed_roots: &[PathBuf], settle: Duration) -> DirPolicy {
        let mut roots = vec![data_dir.to_path_buf()];
        roots.extend(allowed_roots.iter().cloned());
        DirPolicy { roots, settle }
    }

    /// `path` (a Source's `spec.path`) canonicalized, when it is a
    /// directory under an allowed root; else why not, in words that name
    /// the path and the roots only (never anything read from them).
    pub fn resolve(&self, path: &str) -> Result<PathBuf, String> {
        let p = Path::new(path);
        if !p.is_absolute() {
            return Err(format!(
                "spec.path {path:?} is relative, expected an absolute directory"
            ));
        }
        let real = match std::fs::canonicalize(p) {
            Ok(r) => r,
            Err(e) => {
                // Outside first, whatever the error: which paths exist
                // outside the roots is none of a manifest's business.
                let ancestor = p.ancestors().find_map(|a| std::fs::canonicalize(a).ok());
                if !ancestor.is_some_and(|a| self.allows(&a)) {
                    return Err(self.outside(format!("{path:?}")));
                }
                if e.kind() == std::io::ErrorKind::NotFound {
                    return Err(format!(
                        "spec.path {path:?} does not exist (looked for again at each sync)"
                    ));
                }
                return Err(format!("spec.path {path:?}: cannot resolve it: {e}"));
            }
        };
        if !self.allows(&real) {
            let shown = if real == p {
                format!("{path:?}")
            } else {
                format!("{path:?} (resolved: {:?})", real.display().to_string())
            };
            return Err(self.outside(shown));
        }
        if !real.is_dir() {
            return Err(format!("spec.path {path:?} is not a directory"));
        }
        Ok(real)
    }

    /// Whether a canonical path lies under a root.
    fn allows(&self, real: &Path) -> bool {
        self.roots
            .iter()
            .filter_map(|r| std::fs::canonicalize(r).ok())
            .any(|r| real.starts_with(&r))
    }

    fn outside(&self, shown: String) -> String {
        let roots: Vec<String> = self.roots.iter().map(|r| r.display().to_string()).collect();
        format!(
            "spec.path {shown} is outside the directories Sources may read ({}); pamd's [sources] allowed_roots names more (docs/gitops.md)",
            roots.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_paths_under_the_roots_resolve() {
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("data");
        let allowed = d.path().join("allowed");
        let other = d.path().join("other");
        for p in [&data, &allowed, &other] {
            std::fs::create_dir_all(p.join("sub")).unwrap();
        }
        std::os::unix::fs::symlink(&other, allowed.join("link")).unwrap();
        let policy = DirPolicy::new(&data, std::slice::from_ref(&allowed), DEFAULT_SETTLE);
        let s = |p: &Path| p.display().to_string();
        assert!(policy.resolve(&s(&data.join("sub"))).is_ok());
        assert!(policy.resolve(&s(&allowed)).is_ok());
        for bad in [
            "/".to_string(),
            "/proc/self".to_string(),
            s(&allowed.join("sub/../../other")),
            s(&allowed.join("link")),
            s(&other),
        ] {
            let err = policy.resolve(&bad).unwrap_err();
            assert!(err.contains("outside the directories"), "{bad}: {err}");
        }
        // Whether a path outside exists is not told.
        for bad in ["/no-such-dir-pam-30/x", "/root/.ssh/id_rsa"] {
            let err = policy.resolve(bad).unwrap_err();
            assert!(err.contains("outside the directories"), "{bad}: {err}");
        }
        let err = policy.resolve(&s(&allowed.join("later"))).unwrap_err();
        assert!(err.contains("does not exist"), "{err}");
        let err = policy.resolve("rel").unwrap_err();
        assert!(err.contains("relative"), "{err}");
    }
}
