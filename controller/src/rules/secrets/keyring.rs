//! pamd's secrets keys: AES-256-GCM keys kept in a file outside
//! the database, one per line, the first the current one.
//!
//! ```text
//! # pam secrets keys: the first is current; older ones open what they sealed
//! k3f9a01c2 BASE64-OF-32-BYTES
//! k0b17e55d BASE64-OF-32-BYTES
//! ```
//!
//! # Guarantees
//! - The file is created on first use with mode 0600 (written to a
//!   temporary file and renamed, so a crash never leaves half a file); a
//!   file others may read is made 0600 with a warning, like pamd's token
//!   files.
//! - Each ciphertext records its key id; every key in the file opens what
//!   it sealed, so a rotation keeps working while it re-seals
//!   ([`super::rotate`]). A key id this process does not know makes it
//!   read the file again once (another replica may have rotated).
//! - Nothing here logs a key or a value.
//!
//! # Caveats
//! - Losing the file loses every Secret: back it up apart from the
//!   database (`docs/operations.md`, "Secrets").

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use anyhow::Context as _;
use base64::Engine as _;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};

/// The key file's name in pamd's data dir.
pub const KEY_FILE: &str = "secrets.key";

/// One key: its id and its 32 bytes.
#[derive(Clone)]
struct Key {
    id: String,
    bytes: [u8; 32],
}

/// The keys pamd seals and opens Secrets with.
pub struct Keyring {
    /// The first is current.
    keys: RwLock<Vec<Key>>,
    /// The file they live in (None: in memory only, for tests).
    path: Option<PathBuf>,
}

/// Why a ciphertext could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("the secrets key {0:?} that sealed this Secret is not in the key file")]
    UnknownKey(String),
    #[error("the Secret's ciphertext does not open with key {0:?} (wrong key or tampered row)")]
    Corrupt(String),
}

fn random<const N: usize>() -> [u8; N] {
    let mut b = [0u8; N];
    getrandom::fill(&mut b).expect("the OS random source works");
    b
}

fn new_key() -> Key {
    Key {
        id: format!("k{}", hex::encode(random::<4>())),
        bytes: random::<32>(),
    }
}

fn parse(text: &str) -> anyhow::Result<Vec<Key>> {
    let mut keys = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (id, b64) = line
            .split_once(char::is_whitespace)
            .with_context(|| format!("line {}: expected `KEY_ID BASE64`", n + 1))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(b64.trim())
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .with_context(|| {
                format!(
                    "line {}: expected 32 bytes of base64 after the key id",
                    n + 1
                )
            })?;
        keys.push(Key {
            id: id.to_string(),
            bytes,
        });
    }
    anyhow::ensure!(!keys.is_empty(), "no key in the file");
    Ok(keys)
}

fn render(keys: &[Key]) -> String {
    let mut out = String::from(
        "# pam secrets keys (pamd): the first is current; older ones open what they sealed.\n\
         # Back this file up apart from the database: without it no Secret can be read.\n",
    );
    for k in keys {
        out.push_str(&k.id);
        out.push(' ');
        out.push_str(&base64::engine::general_purpose::STANDARD.encode(k.bytes));
        out.push('\n');
    }
    out
}

fn write_private(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let tmp = path.with_extension("key.tmp");
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode_0600()
            .open(&tmp)
            .with_context(|| format!("write {}", tmp.display()))?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("rename to {}", path.display()))?;
    Ok(())
}

trait Mode0600 {
    fn mode_0600(&mut self) -> &mut Self;
}
impl Mode0600 for std::fs::OpenOptions {
    fn mode_0600(&mut self) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt as _;
        self.mode(0o600)
    }
}

impl Keyring {
    /// A keyring with one fresh key, kept in memory only (tests).
    pub fn ephemeral() -> Keyring {
        Keyring {
            keys: RwLock::new(vec![new_key()]),
            path: None,
        }
    }

    /// Reads the key file at `path`, creating it (mode 0600, one new key)
    /// when absent. A file others may read is made 0600, with a warning.
    pub fn load_or_create(path: &Path) -> anyhow::Result<Keyring> {
        let keys = match std::fs::read_to_string(path) {
            Ok(text) => {
                let mode = std::fs::metadata(path)?.permissions().mode();
                if mode & 0o077 != 0 {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                        .with_context(|| {
                            format!("make {} private: run chmod 600 on it", path.display())
                        })?;
                    tracing::warn!(path = %path.display(), old_mode = format!("{:o}", mode & 0o777), "the secrets key file was readable by others; made it 0600");
                }
                parse(&text)
                    .with_context(|| format!("read the secrets key file {}", path.display()))?
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let keys = vec![new_key()];
                write_private(path, &render(&keys))?;
                tracing::info!(path = %path.display(), "created the secrets key file; back it up apart from the database");
                keys
            }
            Err(e) => return Err(e).with_context(|| format!("read {}", path.display())),
        };
        Ok(Keyring {
            keys: RwLock::new(keys),
            path: Some(path.to_path_buf()),
        })
    }

    /// The current key's id.
    pub fn current_id(&self) -> String {
        self.keys.read().expect("keyring lock")[0].id.clone()
    }

    /// Every key id, current first.
    pub fn ids(&self) -> Vec<String> {
        self.keys
            .read()
            .expect("keyring lock")
            .iter()
            .map(|k| k.id.clone())
            .collect()
    }

    /// Seals `plain` with the current key, bound to `aad` (the Secret's
    /// identity): (key id, nonce, ciphertext with tag).
    pub fn seal(&self, aad: &[u8], plain: &[u8]) -> (String, Vec<u8>, Vec<u8>) {
        let key = self.keys.read().expect("keyring lock")[0].clone();
        let nonce = random::<NONCE_LEN>();
        let sealing =
            LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key.bytes).expect("32 bytes"));
        let mut buf = plain.to_vec();
        sealing
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut buf,
            )
            .expect("AES-GCM seals any length pam allows");
        (key.id, nonce.to_vec(), buf)
    }

    fn key(&self, id: &str) -> Option<Key> {
        self.keys
            .read()
            .expect("keyring lock")
            .iter()
            .find(|k| k.id == id)
            .cloned()
    }

    /// Opens what [`Keyring::seal`] sealed.
    pub fn open(
        &self,
        key_id: &str,
        aad: &[u8],
        nonce: &[u8],
        ciphertext: &[u8],
    ) -> Result<Vec<u8>, OpenError> {
        let key = match self.key(key_id) {
            Some(k) => k,
            None => {
                // Another replica may have rotated: read the file once.
                self.reload();
                self.key(key_id)
                    .ok_or_else(|| OpenError::UnknownKey(key_id.to_string()))?
            }
        };
        let corrupt = || OpenError::Corrupt(key_id.to_string());
        let nonce = <[u8; NONCE_LEN]>::try_from(nonce).map_err(|_| corrupt())?;
        let opening =
            LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key.bytes).expect("32 bytes"));
        let mut buf = ciphertext.to_vec();
        let plain = opening
            .open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut buf,
            )
            .map_err(|_| corrupt())?;
        Ok(plain.to_vec())
    }

    fn reload(&self) {
        let Some(path) = &self.path else { return };
        match std::fs::read_to_string(path)
            .map_err(anyhow::Error::from)
            .and_then(|t| parse(&t))
        {
            Ok(keys) => *self.keys.write().expect("keyring lock") = keys,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "could not read the secrets key file again")
            }
        }
    }

    /// Makes a new key current, keeping the others (they still open what
    /// they sealed), and writes the file. Returns the new key's id.
    pub fn add_current(&self) -> anyhow::Result<String> {
        let mut keys = self.keys.write().expect("keyring lock");
        let mut next = vec![new_key()];
        next.extend(keys.iter().cloned());
        if let Some(path) = &self.path {
            write_private(path, &render(&next))?;
        }
        let id = next[0].id.clone();
        *keys = next;
        Ok(id)
    }

    /// Drops these (non-current) keys and writes the file: once nothing
    /// they sealed is left.
    pub fn retire(&self, ids: &[String]) -> anyhow::Result<()> {
        let mut keys = self.keys.write().expect("keyring lock");
        let current = keys[0].id.clone();
        let kept: Vec<Key> = keys
            .iter()
            .filter(|k| k.id == current || !ids.contains(&k.id))
            .cloned()
            .collect();
        if let Some(path) = &self.path {
            write_private(path, &render(&kept))?;
        }
        *keys = kept;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seal_open_rotate_and_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let ring = Keyring::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (k1, nonce, ct) = ring.seal(b"id", b"hunter2");
        assert!(!ct.windows(7).any(|w| w == b"hunter2"));
        assert_eq!(ring.open(&k1, b"id", &nonce, &ct).unwrap(), b"hunter2");
        // Bound to its identity.
        assert!(matches!(
            ring.open(&k1, b"other", &nonce, &ct),
            Err(OpenError::Corrupt(_))
        ));
        let k2 = ring.add_current().unwrap();
        assert_ne!(k1, k2);
        // The file read anew has both keys, the new one current.
        let again = Keyring::load_or_create(&path).unwrap();
        assert_eq!(again.ids(), vec![k2.clone(), k1.clone()]);
        assert_eq!(again.open(&k1, b"id", &nonce, &ct).unwrap(), b"hunter2");
        ring.retire(std::slice::from_ref(&k1)).unwrap();
        assert_eq!(ring.ids(), vec![k2]);
        assert!(matches!(
            ring.open(&k1, b"id", &nonce, &ct),
            Err(OpenError::UnknownKey(_))
        ));
        // A file others may read is made private.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        Keyring::load_or_create(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
