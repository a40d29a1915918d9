//! Does the server on a Unix socket accept connections? The same question
//! `pg_isready` (libpq's `PQping`) asks: send a startup packet and read the
//! first reply. Blocking, bounded by [`TIMEOUT`].
//!
//! # Guarantees
//! - Any authentication request, and any error other than 57P03
//!   (`cannot_connect_now`: starting up, in recovery, shutting down), is
//!   [`Ping::Accepting`], as in `PQping`: the server takes connections even
//!   if it rejects these credentials.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// How long one ping may wait for the server's first reply.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Protocol 3.0.
const PROTOCOL: u32 = 3 << 16;
/// An error body is a few hundred bytes; more is not a PostgreSQL.
const MAX_REPLY: usize = 64 << 10;

#[derive(Debug)]
pub(super) enum Ping {
    /// The server takes connections.
    Accepting,
    /// The server answers but turns connections away for now (57P03); the
    /// server's message.
    NotYet(String),
    /// Nothing listens, or what does gives no PostgreSQL answer.
    NoAnswer(std::io::Error),
}

/// Pings the server at `socket` as `user` (database `postgres`).
pub(super) fn ping(socket: &Path, user: &str) -> Ping {
    match exchange(socket, user) {
        Ok(None) => Ping::Accepting,
        Ok(Some(not_yet)) => Ping::NotYet(not_yet),
        Err(e) => Ping::NoAnswer(e),
    }
}

/// `Ok(None)`: accepting; `Ok(Some(message))`: 57P03.
fn exchange(socket: &Path, user: &str) -> std::io::Result<Option<String>> {
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    stream.write_all(&startup_packet(user))?;
    let mut head = [0u8; 5];
    stream.read_exact(&mut head)?;
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
    match head[0] {
        b'R' => {
            // Terminate, so the server logs no broken connection.
            let _ = stream.write_all(&[b'X', 0, 0, 0, 4]);
            Ok(None)
        }
        b'E' if (4..=MAX_REPLY).contains(&len) => {
            let mut body = vec![0u8; len - 4];
            stream.read_exact(&mut body)?;
            let (code, message) = error_fields(&body);
            Ok((code == "57P03").then_some(message))
        }
        tag => Err(std::io::Error::other(format!(
            "not a PostgreSQL reply (message type {:?}, length {len})",
            tag as char
        ))),
    }
}

fn startup_packet(user: &str) -> Vec<u8> {
    let mut body = PROTOCOL.to_be_bytes().to_vec();
    for s in ["user", user, "database", "postgres"] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut packet = ((body.len() + 4) as u32).to_be_bytes().to_vec();
    packet.extend(body);
    packet
}

/// An ErrorResponse body: `(type byte, NUL-terminated string)*` then NUL;
/// returns the SQLSTATE (`C`) and the message (`M`).
fn error_fields(body: &[u8]) -> (String, String) {
    let (mut code, mut message) = (String::new(), String::new());
    let mut rest = body;
    while let Some((&kind, tail)) = rest.split_first() {
        if kind == 0 {
            break;
        }
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        let value = String::from_utf8_lossy(&tail[..end]).into_owned();
        match kind {
            b'C' => code = value,
            b'M' => message = value,
            _ => {}
        }
        rest = tail.get(end + 1..).unwrap_or_default();
    }
    (code, message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn startup_packet_is_length_prefixed_protocol_3() {
        let p = startup_packet("pam");
        assert_eq!(&p[..4], &(p.len() as u32).to_be_bytes());
        assert_eq!(&p[4..8], &[0, 3, 0, 0]);
        assert_eq!(&p[8..], b"user\0pam\0database\0postgres\0\0");
    }

    #[test]
    fn error_fields_find_code_and_message() {
        let body = b"SFATAL\0C57P03\0Mthe database system is starting up\0\0";
        assert_eq!(
            error_fields(body),
            ("57P03".into(), "the database system is starting up".into())
        );
        // Truncated or hostile bodies end the scan, never panic.
        assert_eq!(error_fields(b"C57P0"), ("57P0".into(), String::new()));
        assert_eq!(error_fields(b""), (String::new(), String::new()));
    }

    #[test]
    fn nothing_listening_is_no_answer() {
        let socket = std::env::temp_dir().join(format!("pam-ping-{}", uuid::Uuid::new_v4()));
        assert!(matches!(ping(&socket, "pam"), Ping::NoAnswer(_)));
    }
}
