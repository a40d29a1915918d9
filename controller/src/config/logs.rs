//! `[logs]` in pamd.toml: how pamd serves runs' logs and transcripts,
//! which live on the workers (docs/operations.md, "Run logs"):
//! ```toml
//! [logs]
//! cache_bytes = 67108864              # finished attempts' chunks kept in memory (64 MiB)
//! # archive_dir = "/var/lib/pam/logs" # copy each finished attempt's files here
//! ```

use std::path::{Path, PathBuf};

use anyhow::bail;
use serde::Deserialize;

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogsConfig {
    /// The most bytes of finished attempts' chunks kept in memory (an
    /// LRU); what a log read costs pamd beyond it is a few chunks per
    /// response in flight.
    pub cache_bytes: usize,
    /// Where finished attempts' logs, time indexes and transcripts are
    /// copied, so they are served after their host is gone; with
    /// replicas, a directory every replica shares.
    pub archive_dir: Option<PathBuf>,
}

impl Default for LogsConfig {
    fn default() -> Self {
        LogsConfig {
            cache_bytes: crate::api::logs::DEFAULT_CACHE_BYTES,
            archive_dir: None,
        }
    }
}

impl LogsConfig {
    /// `~` expanded in the archive dir, which must be absolute.
    pub(super) fn expanded(
        mut self,
        expand: impl Fn(&Path) -> anyhow::Result<PathBuf>,
    ) -> anyhow::Result<Self> {
        if let Some(d) = &self.archive_dir {
            let d = expand(d)?;
            if !d.is_absolute() {
                bail!(
                    "[logs] archive_dir: {} is relative, expected an absolute directory",
                    d.display()
                );
            }
            self.archive_dir = Some(d);
        }
        Ok(self)
    }
}
