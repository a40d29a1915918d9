//! Where a Webhook's signing secret comes from: [`SigningKeys`], the one
//! place a `signingSecretRef` is resolved — by apply (an unknown Secret is
//! an error at its file:line) and by the sender (the key signs each
//! attempt).
//!
//! Until pam stores Secrets, [`KeyFiles`] reads them from pamd's
//! `[webhooks] signing_keys_dir`: `<dir>/<project>/<name>/<key>`, the
//! file's bytes as they are (no newline trimmed). A Secret store replaces
//! it by implementing the trait (it gets the transaction to read from).

use std::path::PathBuf;

use async_trait::async_trait;
use pam_manifests::kinds::SecretKeyRef;
use pam_store::{StoreResult, Tx};

/// Resolves a Webhook's signing secret.
#[async_trait]
pub trait SigningKeys: Send + Sync {
    /// The secret's bytes; None when the Secret or its key does not
    /// exist (or is empty).
    async fn resolve(&self, tx: &mut dyn Tx, r: &SecretKeyRef) -> StoreResult<Option<Vec<u8>>>;
}

/// Signing secrets as files under a directory (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct KeyFiles {
    /// None: no secrets (every reference is unknown).
    pub dir: Option<PathBuf>,
}

impl KeyFiles {
    pub fn new(dir: Option<PathBuf>) -> KeyFiles {
        KeyFiles { dir }
    }
}

/// A key names one file in the Secret's directory, nothing else.
fn plain_file_name(key: &str) -> bool {
    !key.is_empty()
        && !key.starts_with('.')
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

#[async_trait]
impl SigningKeys for KeyFiles {
    async fn resolve(&self, _tx: &mut dyn Tx, r: &SecretKeyRef) -> StoreResult<Option<Vec<u8>>> {
        let Some(dir) = &self.dir else {
            return Ok(None);
        };
        if !plain_file_name(&r.key) {
            return Ok(None);
        }
        // Project and Secret names are DNS labels (parsed), safe as path
        // segments.
        let path = dir
            .join(r.project.as_str())
            .join(r.name.as_str())
            .join(&r.key);
        match tokio::fs::read(&path).await {
            Ok(bytes) if !bytes.is_empty() => Ok(Some(bytes)),
            Ok(_) => Ok(None),
            Err(e) => {
                if e.kind() != std::io::ErrorKind::NotFound {
                    tracing::warn!(path = %path.display(), error = %e, "cannot read a webhook signing key");
                }
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_plain_file_names() {
        assert!(plain_file_name("signing"));
        assert!(plain_file_name("hmac.key"));
        assert!(!plain_file_name("../x"));
        assert!(!plain_file_name(".hidden"));
        assert!(!plain_file_name("a/b"));
        assert!(!plain_file_name(""));
    }
}
