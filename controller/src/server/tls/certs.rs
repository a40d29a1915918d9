//! Certificates made with rcgen: `pamd --tls-self-signed`'s CA and server
//! certificate, and the test CAs of the end-to-end tests.
//!
//! `--tls-self-signed` writes `<data_dir>/tls/{ca.pem, server.pem,
//! server.key}` once and reuses them after, so clients keep trusting the
//! same CA across restarts. The CA's private key is not kept: nothing can
//! mint more certificates from it. To change the names (a new --listen
//! address), delete `<data_dir>/tls` and restart; clients then need the
//! new ca.pem.

use std::path::{Path, PathBuf};

use anyhow::Context;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

use super::Pair;
use crate::server::secrets::write_secret_file;

/// A certificate authority held in memory.
pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate and its private key, PEM.
pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
}

impl Ca {
    pub fn new(common_name: &str) -> anyhow::Result<Ca> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate()?;
        let cert = params.self_signed(&key)?;
        Ok(Ca { cert, key })
    }

    pub fn cert_pem(&self) -> String {
        self.cert.pem()
    }

    /// A server certificate for `names` (DNS names; IP addresses become IP
    /// subject alternative names).
    pub fn issue(&self, names: &[String]) -> anyhow::Result<Issued> {
        let mut params = CertificateParams::new(names.to_vec())?;
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().map_or("pamd", |n| n));
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.cert, &self.key)?;
        Ok(Issued {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// The names pamd's self-signed certificate is valid for: localhost, the
/// loopback addresses, this machine's host name, and the --listen host
/// when it is a specific one.
pub fn server_names(listen: &str) -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    if let Some(h) = crate::server::local_worker::machine_host_name() {
        names.push(h.to_ascii_lowercase());
    }
    if let Ok(addr) = listen.parse::<std::net::SocketAddr>() {
        if !addr.ip().is_unspecified() {
            names.push(addr.ip().to_string());
        }
    } else if let Some((host, _port)) = listen.rsplit_once(':') {
        if !host.is_empty() {
            names.push(host.trim_matches(['[', ']']).to_string());
        }
    }
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    names
}

/// The files of `--tls-self-signed`.
pub struct SelfSigned {
    pub pair: Pair,
    pub ca_file: PathBuf,
    /// False when they were already there (reused).
    pub created: bool,
}

/// Makes `<dir>/{ca.pem, server.pem, server.key}` unless all three exist.
pub fn ensure_self_signed(dir: &Path, names: &[String]) -> anyhow::Result<SelfSigned> {
    let pair = Pair {
        cert_file: dir.join("server.pem"),
        key_file: dir.join("server.key"),
    };
    let ca_file = dir.join("ca.pem");
    if ca_file.exists() && pair.cert_file.exists() && pair.key_file.exists() {
        return Ok(SelfSigned {
            pair,
            ca_file,
            created: false,
        });
    }
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let ca = Ca::new("pam self-signed CA")?;
    let issued = ca.issue(names)?;
    // The key first and the CA last: a crash in between leaves the set
    // incomplete, so the next start makes a fresh one.
    write_secret_file(&pair.key_file, &issued.key_pem)?;
    std::fs::write(
        &pair.cert_file,
        format!("{}{}", issued.cert_pem, ca.cert_pem()),
    )
    .with_context(|| format!("write {}", pair.cert_file.display()))?;
    std::fs::write(&ca_file, ca.cert_pem())
        .with_context(|| format!("write {}", ca_file.display()))?;
    Ok(SelfSigned {
        pair,
        ca_file,
        created: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cover_loopback_and_a_specific_listen_host() {
        let n = server_names("10.1.2.3:7700");
        assert!(n.contains(&"localhost".to_string()));
        assert!(n.contains(&"127.0.0.1".to_string()));
        assert!(n.contains(&"10.1.2.3".to_string()));
        let n = server_names("0.0.0.0:7700");
        assert!(!n.contains(&"0.0.0.0".to_string()));
        let n = server_names("pam.example.com:443");
        assert!(n.contains(&"pam.example.com".to_string()));
    }

    #[test]
    fn self_signed_files_are_made_once_and_load() {
        let dir = tempfile::tempdir().unwrap();
        let tls = dir.path().join("tls");
        let first = ensure_self_signed(&tls, &server_names("127.0.0.1:0")).unwrap();
        assert!(first.created);
        let ca = std::fs::read(&first.ca_file).unwrap();
        let again = ensure_self_signed(&tls, &server_names("127.0.0.1:0")).unwrap();
        assert!(!again.created);
        assert_eq!(std::fs::read(&again.ca_file).unwrap(), ca, "reused");
        super::super::load(&again.pair).unwrap();
    }
}
