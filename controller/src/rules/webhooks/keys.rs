//! Where a Webhook's signing secret comes from: [`SigningKeys`], the one
//! place a `signingSecretRef` is resolved — by apply (an unknown Secret is
//! an error at its file:line) and by the sender (the key signs each
//! attempt).
//!
//! [`SecretKeys`] reads the key of a project's Secret, opened
//! with pamd's keyring in the caller's transaction. A pamd configured with
//! `[webhooks] signing_keys_dir` also finds keys as files there
//! ([`KeyFiles`]: `<dir>/<project>/<name>/<key>`, the file's bytes as they
//! are), for keys kept outside pam; the Secret wins when both exist.

use std::path::PathBuf;

use async_trait::async_trait;
use pam_manifests::kinds::SecretKeyRef;
use pam_store::{Project, StoreResult, Tx};

/// Resolves a Webhook's signing secret.
#[async_trait]
pub trait SigningKeys: Send + Sync {
    /// The secret's bytes; None when the Secret or its key does not
    /// exist (or is empty).
    async fn resolve(&self, tx: &mut dyn Tx, r: &SecretKeyRef) -> StoreResult<Option<Vec<u8>>>;
}

/// Signing secrets from the Secret store, then from the files of
/// [`KeyFiles`] (see the module doc).
pub struct SecretKeys {
    pub ring: std::sync::Arc<crate::rules::secrets::Keyring>,
    pub files: KeyFiles,
}

#[async_trait]
impl SigningKeys for SecretKeys {
    async fn resolve(&self, tx: &mut dyn Tx, r: &SecretKeyRef) -> StoreResult<Option<Vec<u8>>> {
        if let Some(p) = tx.by_name::<Project>((), r.project.as_str()).await? {
            use crate::rules::secrets::{resolve, ResolveError};
            match resolve(tx, &self.ring, p.id, r.name.as_str(), &r.key).await {
                Ok(bytes) if !bytes.is_empty() => return Ok(Some(bytes)),
                Ok(_) | Err(ResolveError::Missing(_)) => {}
                Err(ResolveError::Store(e)) => return Err(e),
                Err(e) => {
                    // Sealed under a key this pamd does not hold: not
                    // usable; said once per attempt, never the value.
                    tracing::warn!(error = %e, secret = %r.name, "cannot open a webhook signing secret");
                }
            }
        }
        self.files.resolve(tx, r).await
    }
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
