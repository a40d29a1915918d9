//! Client-side TLS shared by pamctl and pam-worker: which roots to trust,
//! and a certificate problem said in plain words.
//!
//! - Without a CA file the bundled webpki roots (the public web PKI) are
//!   trusted: that works offline and in images without a CA bundle.
//! - With a CA file (`--ca-file`, `PAM_CA_FILE`, a config key), only the
//!   certificates in it are trusted, like `curl --cacert`: a private pam
//!   fleet must not also accept any public CA's certificate for its name.
//! - [`explain`] finds a rustls certificate error anywhere in an error's
//!   chain (reqwest hides it inside hyper's and io's errors) and says which
//!   problem it is — unknown authority, wrong host name, expired — with
//!   the hint to pass `--ca-file`.

use std::error::Error as StdError;
use std::path::Path;

use rustls::CertificateError;

/// The certificates of a PEM CA file, for reqwest's `add_root_certificate`.
/// An unreadable file, or one without a certificate, is an error naming it.
pub fn read_ca_file(path: &Path) -> Result<Vec<reqwest::Certificate>, String> {
    let pem = std::fs::read(path).map_err(|e| format!("read CA file {}: {e}", path.display()))?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| format!("CA file {}: not PEM certificates: {e}", path.display()))?;
    if certs.is_empty() {
        return Err(format!(
            "CA file {}: no certificate in it (expected PEM `BEGIN CERTIFICATE` blocks)",
            path.display()
        ));
    }
    Ok(certs)
}

/// A blocking client builder that trusts `ca_file` only, or the bundled
/// roots when there is none.
pub fn blocking_builder(
    ca_file: Option<&Path>,
) -> Result<reqwest::blocking::ClientBuilder, String> {
    let mut b = reqwest::blocking::Client::builder().use_rustls_tls();
    if let Some(path) = ca_file {
        b = b.tls_built_in_root_certs(false);
        for cert in read_ca_file(path)? {
            b = b.add_root_certificate(cert);
        }
    }
    Ok(b)
}

/// What is wrong with the server's certificate, when `err` (or anything
/// in its chain) is a certificate error; `None` for any other failure.
pub fn explain(err: &(dyn StdError + 'static)) -> Option<String> {
    let tls = find_rustls(err)?;
    let what = match tls {
        rustls::Error::InvalidCertificate(c) => match c {
            CertificateError::UnknownIssuer => {
                "it is signed by an unknown authority (not a CA this client trusts)".to_string()
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "it is not valid for this host name (connect by a name or address the certificate lists)".to_string()
            }
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "it has expired".to_string()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "it is not valid yet (check the clocks)".to_string()
            }
            CertificateError::Revoked => "it is revoked".to_string(),
            CertificateError::BadSignature => "its signature does not verify".to_string(),
            other => format!("it is invalid ({other:?})"),
        },
        other => return Some(format!("TLS failed: {other}")),
    };
    Some(format!("the server's TLS certificate was refused: {what}"))
}

/// The hint that goes with [`explain`].
pub const CA_FILE_HINT: &str = "pass the CA that signed pamd's certificate with --ca-file FILE (or PAM_CA_FILE); for `pamd --tls-self-signed` that is <pamd data dir>/tls/ca.pem";

fn find_rustls<'a>(err: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut cur: Option<&'a (dyn StdError + 'static)> = Some(err);
    while let Some(e) = cur {
        if let Some(t) = e.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        // io::Error's source() skips the error it wraps: look inside.
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if let Some(inner) = io.get_ref() {
                if let Some(t) = find_rustls(inner) {
                    return Some(t);
                }
            }
        }
        cur = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_certificate_error_inside_io_is_found_and_named() {
        let tls = rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer);
        let io = std::io::Error::other(tls);
        let msg = explain(&io).unwrap();
        assert!(msg.contains("unknown authority"), "{msg}");

        let io =
            std::io::Error::other(rustls::Error::InvalidCertificate(CertificateError::Expired));
        assert!(explain(&io).unwrap().contains("expired"));
        let io = std::io::Error::other(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName,
        ));
        assert!(explain(&io).unwrap().contains("host name"));
    }

    #[test]
    fn other_errors_are_not_certificate_errors() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        assert_eq!(explain(&io), None);
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused_by_name() {
        let dir = std::env::temp_dir().join(format!("pam-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("ca.pem");
        std::fs::write(&f, "not a certificate\n").unwrap();
        let err = read_ca_file(&f).unwrap_err();
        assert!(err.contains("ca.pem"), "{err}");
        let err = read_ca_file(&dir.join("missing.pem")).unwrap_err();
        assert!(err.contains("missing.pem"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
