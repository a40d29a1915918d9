//! `[sources]` in pamd.toml: which directories directory
//! Sources may read, and how long their files must be still before a
//! sync may prune by them (docs/gitops.md):
//! ```toml
//! [sources]
//! allowed_roots = ["/srv/pam"]  # besides pamd's data dir (always allowed)
//! settle_ms = 1000
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::bail;
use serde::Deserialize;

use crate::sync::roots::{DirPolicy, DEFAULT_SETTLE};

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SourcesConfig {
    /// Directories (besides the data dir) a directory Source's
    /// `spec.path` may lie under, once symlinks and `..` are resolved.
    pub allowed_roots: Vec<PathBuf>,
    /// The settle window: a sync prunes only by files unchanged this long.
    pub settle_ms: u64,
}

impl Default for SourcesConfig {
    fn default() -> Self {
        SourcesConfig {
            allowed_roots: Vec::new(),
            settle_ms: DEFAULT_SETTLE.as_millis() as u64,
        }
    }
}

impl SourcesConfig {
    /// `~` expanded in each root; a root must be absolute (a relative one
    /// would depend on pamd's working directory).
    pub(super) fn expanded(
        mut self,
        expand: impl Fn(&Path) -> anyhow::Result<PathBuf>,
    ) -> anyhow::Result<Self> {
        let mut roots = Vec::with_capacity(self.allowed_roots.len());
        for r in &self.allowed_roots {
            let r = expand(r)?;
            if !r.is_absolute() {
                bail!(
                    "[sources] allowed_roots: {} is relative, expected an absolute directory",
                    r.display()
                );
            }
            roots.push(r);
        }
        self.allowed_roots = roots;
        Ok(self)
    }

    pub(super) fn validate(&self) -> anyhow::Result<()> {
        if self.settle_ms > 60_000 {
            bail!("[sources] settle_ms must be at most 60000 (a minute)");
        }
        Ok(())
    }

    /// The policy the sync loop applies.
    pub fn policy(&self, data_dir: &Path) -> DirPolicy {
        DirPolicy::new(
            data_dir,
            &self.allowed_roots,
            Duration::from_millis(self.settle_ms),
        )
    }
}
