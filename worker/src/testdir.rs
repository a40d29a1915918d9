//! A temporary directory removed on drop, for this crate's tests (unit and
//! integration); kept in the library so both can use it without a
//! dev-dependency.

use std::path::{Path, PathBuf};

/// A fresh directory under the system temp dir, removed on drop.
pub struct TestDir(PathBuf);

impl TestDir {
    /// Creates `<tmp>/pam-<label>-<uuid>`.
    pub fn new(label: &str) -> TestDir {
        let p = std::env::temp_dir().join(format!("pam-{label}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&p).expect("create test dir");
        TestDir(p)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
