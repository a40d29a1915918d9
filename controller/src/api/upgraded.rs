//! A stream served on a connection hyper hands over after `101 Switching
//! Protocols` (the worker watch): [`crate::api::chunks::Chunks`]
//! written straight onto it, and what the client writes read back as
//! lines, each maybe followed by raw bytes (a worker's log chunk).

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use bytes::Bytes;

use crate::api::chunks::Chunks;

/// The most raw bytes that may follow one line on an upgraded connection:
/// a log chunk ([`pam_manifests::protocol::LOG_CHUNK_MAX`]).
pub(super) const MAX_PAYLOAD: usize = pam_manifests::protocol::LOG_CHUNK_MAX as usize;

/// The `OnUpgrade` of `req` when it asks for the protocol `token`
/// (`Upgrade: <token>`; hyper offers the connection of any HTTP/1.1
/// request with an `Upgrade` header, and RFC 9110 has the client send
/// `Connection: upgrade` too). `None`: serve it as a plain response.
pub(super) fn upgrade_asked(
    req: &mut axum::extract::Request,
    token: &str,
) -> Option<hyper::upgrade::OnUpgrade> {
    let asked = req
        .headers()
        .get_all(header::UPGRADE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token));
    if asked {
        req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>()
    } else {
        None
    }
}

/// `101 Switching Protocols` to `token`, then `chunks` written straight
/// onto the connection hyper hands over (no chunked encoding, and none of
/// hyper's per-connection buffers), until they end (the connection is
/// then shut down) or the client goes away: a read that ends (end of
/// file, a reset) ends the stream, and so does a write not taken within
/// `stall` (a stalled client would hold the stream, and its token, past a
/// revocation). What the client writes is read as lines, each handed to
/// [`Chunks::line`]; one longer than [`Chunks::max_line`] ends the
/// stream.
pub(super) fn upgraded_response(
    on: hyper::upgrade::OnUpgrade,
    chunks: impl Chunks,
    token: &'static str,
    stall: std::time::Duration,
) -> Response {
    tokio::spawn(serve_upgraded(on, chunks, stall));
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    h.insert(header::UPGRADE, HeaderValue::from_static(token));
    resp
}

async fn serve_upgraded(
    on: hyper::upgrade::OnUpgrade,
    mut chunks: impl Chunks,
    stall: std::time::Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let io = match on.await {
        Ok(io) => hyper_util::rt::TokioIo::new(io),
        Err(e) => {
            tracing::debug!(error = %e, "the connection was not upgraded");
            return;
        }
    };
    let (mut rd, mut wr) = tokio::io::split(io);
    // What the client wrote, up to the end of its last whole line. The
    // first read also lets go of what hyper had read ahead (its read
    // buffer).
    let mut input: Vec<u8> = Vec::new();
    // The raw bytes still expected after the last line, when any.
    let mut payload: Option<usize> = None;
    let max = chunks.max_line();
    loop {
        // A payload is read in big reads, a line in small ones.
        let room = payload.map_or(READ, |n| {
            n.saturating_sub(input.len()).clamp(READ, PAYLOAD_READ)
        });
        if input.capacity() - input.len() < READ_MIN.max(room / 2) {
            input.reserve(room);
        }
        tokio::select! {
            chunk = chunks.chunk() => match chunk {
                Some(b) => {
                    if !matches!(tokio::time::timeout(stall, wr.write_all(&b)).await, Ok(Ok(()))) {
                        return;
                    }
                }
                None => break,
            },
            read = rd.read_buf(&mut input) => {
                if !matches!(read, Ok(n) if n > 0) || !lines(&mut chunks, &mut input, &mut payload, max) {
                    return;
                }
            }
        }
    }
    let _ = wr.shutdown().await;
}

/// Hands the whole lines of `input` to `chunks`, and the whole payloads
/// that follow them, keeping the rest: false when one was refused, a
/// payload is too big, or the rest of a line is already longer than
/// `max`.
fn lines(
    chunks: &mut impl Chunks,
    input: &mut Vec<u8>,
    payload: &mut Option<usize>,
    max: usize,
) -> bool {
    let mut start = 0;
    loop {
        if let Some(n) = *payload {
            if input.len() - start < n {
                break;
            }
            chunks.payload(Bytes::copy_from_slice(&input[start..start + n]));
            start += n;
            *payload = None;
            continue;
        }
        let Some(n) = input[start..].iter().position(|b| *b == b'\n') else {
            break;
        };
        if n > max || !chunks.line(&input[start..start + n]) {
            return false;
        }
        start += n + 1;
        match chunks.payload_len() {
            0 => {}
            n if n > MAX_PAYLOAD => return false,
            n => *payload = Some(n),
        }
    }
    input.drain(..start);
    if payload.is_none() && input.len() > max {
        return false;
    }
    if input.is_empty() && input.capacity() > READ {
        // After a long line: not kept while idle.
        *input = Vec::new();
    }
    true
}

/// What an upgraded connection reads at once (a watch's heartbeat is a
/// line of ~100 bytes), and the least room it reads into: at 10,000 idle
/// watches, 5 MB.
const READ: usize = 512;
/// What an upgraded connection reads at once while a payload comes.
const PAYLOAD_READ: usize = 256 * 1024;
const READ_MIN: usize = 128;

#[cfg(test)]
mod tests {
    use super::*;

    /// Records what it is handed; a line `P<n>` says n raw bytes follow.
    #[derive(Default)]
    struct Seen {
        got: Vec<String>,
        next: usize,
    }

    impl Chunks for Seen {
        async fn chunk(&mut self) -> Option<Bytes> {
            None
        }

        fn max_line(&self) -> usize {
            16
        }

        fn line(&mut self, line: &[u8]) -> bool {
            let text = String::from_utf8_lossy(line).into_owned();
            self.next = text.strip_prefix('P').map_or(0, |n| n.parse().unwrap());
            self.got.push(format!("line {text}"));
            true
        }

        fn payload_len(&mut self) -> usize {
            std::mem::take(&mut self.next)
        }

        fn payload(&mut self, bytes: Bytes) {
            self.got
                .push(format!("bytes {}", String::from_utf8_lossy(&bytes)));
        }
    }

    #[test]
    fn payloads_after_lines_are_read_whole_wherever_the_reads_cut() {
        // A payload may hold newlines and be longer than a line may be.
        let text = b"a\nP20\n0123456789\n123456789b\nP0\nc\n";
        let want = [
            "line a",
            "line P20",
            "bytes 0123456789\n123456789",
            "line b",
            "line P0",
            "line c",
        ];
        for cut in 0..text.len() {
            let mut seen = Seen::default();
            let (mut input, mut payload) = (Vec::new(), None);
            for part in [&text[..cut], &text[cut..]] {
                input.extend_from_slice(part);
                assert!(lines(&mut seen, &mut input, &mut payload, 16), "cut {cut}");
            }
            assert_eq!(seen.got, want, "cut at {cut}");
            assert!(input.is_empty() && payload.is_none());
        }
        // A payload over the limit ends the connection.
        let mut seen = Seen::default();
        let big = format!("P{}\n", MAX_PAYLOAD + 1);
        let mut input = big.into_bytes();
        assert!(!lines(&mut seen, &mut input, &mut None, 16));
    }
}
