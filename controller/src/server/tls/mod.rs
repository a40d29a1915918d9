//! pamd's HTTPS: the certificate pair from files, reloaded when the files
//! change, and the listener that does the TLS handshakes.
//!
//! # Guarantees
//! - With TLS on, the only listener is the TLS one: no plain-HTTP port.
//! - The pair is re-read every [`RELOAD_EVERY`]; a changed pair that loads
//!   (certificates parse, the key parses and matches the leaf) serves every
//!   connection from then on. A bad new pair — half-written, mismatched —
//!   keeps the old one and logs an error; rotation is replacing the files.
//! - A polled re-read rather than file-system notifications: it also sees
//!   a Kubernetes Secret's symlink swap and files on network mounts, and
//!   costs two small reads every few seconds.

pub mod certs;
pub mod listener;

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::{bail, Context};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

/// How often the certificate files are checked for a change.
pub const RELOAD_EVERY: Duration = Duration::from_secs(2);

/// The certificate and key files pamd serves.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

/// The served TLS configuration, swapped whole on reload.
#[derive(Clone)]
pub struct Current(Arc<RwLock<Arc<ServerConfig>>>);

impl Current {
    pub fn get(&self) -> Arc<ServerConfig> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set(&self, config: Arc<ServerConfig>) {
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = config;
    }
}

/// Loads `pair` (an error names the file and what is wrong) and starts
/// the reload task; the task ends when the returned handle is dropped.
pub fn start(pair: Pair) -> anyhow::Result<(Current, Reloader)> {
    let (bytes, config) = load(&pair)?;
    let current = Current(Arc::new(RwLock::new(Arc::new(config))));
    let task = tokio::spawn(watch(pair, bytes, current.clone()));
    Ok((current, Reloader(task)))
}

/// Stops the reload task when dropped.
pub struct Reloader(tokio::task::JoinHandle<()>);

impl Drop for Reloader {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn watch(pair: Pair, mut loaded: (Vec<u8>, Vec<u8>), current: Current) {
    loop {
        tokio::time::sleep(RELOAD_EVERY).await;
        let Ok(now) = read_both(&pair) else {
            // Mid-replacement (one file gone a moment): try next time;
            // a file that stays gone is reported once it parses wrong.
            continue;
        };
        if now == loaded {
            continue;
        }
        match config_from(&pair, &now.0, &now.1) {
            Ok(config) => {
                current.set(Arc::new(config));
                tracing::info!(cert = %pair.cert_file.display(), "TLS certificate reloaded");
            }
            Err(e) => tracing::error!(
                error = %format!("{e:#}"),
                "the new TLS certificate pair does not load; still serving the old one"
            ),
        }
        loaded = now;
    }
}

fn read_both(pair: &Pair) -> anyhow::Result<(Vec<u8>, Vec<u8>)> {
    let cert = std::fs::read(&pair.cert_file)
        .with_context(|| format!("read TLS certificate {}", pair.cert_file.display()))?;
    let key = std::fs::read(&pair.key_file)
        .with_context(|| format!("read TLS key {}", pair.key_file.display()))?;
    Ok((cert, key))
}

type Loaded = ((Vec<u8>, Vec<u8>), ServerConfig);

/// Reads and checks the pair.
pub fn load(pair: &Pair) -> anyhow::Result<Loaded> {
    let bytes = read_both(pair)?;
    let config = config_from(pair, &bytes.0, &bytes.1)?;
    Ok((bytes, config))
}

fn config_from(pair: &Pair, cert_pem: &[u8], key_pem: &[u8]) -> anyhow::Result<ServerConfig> {
    let certs = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("TLS certificate {}", pair.cert_file.display()))?;
    if certs.is_empty() {
        bail!(
            "TLS certificate {}: no PEM certificate in it",
            pair.cert_file.display()
        );
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem)
        .with_context(|| format!("TLS key {}: no PEM private key", pair.key_file.display()))?;
    server_config(certs, key).with_context(|| {
        format!(
            "TLS pair {} / {}",
            pair.cert_file.display(),
            pair.key_file.display()
        )
    })
}

fn server_config(
    certs: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> anyhow::Result<ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    // pamd's axum speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// `<data_dir>/tls`, where `--tls-self-signed` keeps its files.
pub fn self_signed_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("tls")
}
