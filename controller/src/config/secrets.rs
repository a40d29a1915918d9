//! `[secrets]` in pamd.toml: where the key file Secrets are
//! sealed with lives.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The `[secrets]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(super) struct SecretsFile {
    key_file: Option<PathBuf>,
}

impl SecretsFile {
    /// The key file: `--secrets-key-file`, else `[secrets] key_file`
    /// (each through `expand`, the config's `~` expansion), else
    /// `<data dir>/secrets.key`.
    pub(super) fn key_file(
        self,
        cli: Option<PathBuf>,
        data_dir: &Path,
        expand: impl Fn(&Path) -> anyhow::Result<PathBuf>,
    ) -> anyhow::Result<PathBuf> {
        match cli.or(self.key_file) {
            Some(f) => expand(&f),
            None => Ok(data_dir.join(crate::rules::secrets::keyring::KEY_FILE)),
        }
    }
}
