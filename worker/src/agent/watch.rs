//! The watch (issue 33): one long `GET /api/v1/workers/watch` per worker,
//! an SSE stream whose `event: desired` frames say the host's desired set
//! changed; each wakes the reconcile loop, which reads the set. pamd claims
//! for the host while the stream is open (a claim journals `run.spawning`,
//! which sends a frame), so the worker neither polls nor long-polls.
//!
//! The stream is upgraded (`Upgrade: pam-watch`, answered `101`) so pamd
//! keeps no HTTP buffers for it; a pamd or proxy that does not upgrade
//! answers the plain SSE response, read the same way.
//!
//! Reconnects resume at the last frame's id (`Last-Event-ID`): pamd sends
//! one frame at once when anything changed since, or it cannot tell. A
//! stream silent for [`IDLE`] (pamd sends a keep-alive comment every 30 s;
//! before 2026-12-05 every 15 s) is taken for dead and opened again.
//!
//! A pamd that answers 404 (older than the watch) is polled instead: the
//! claim long-poll of [`super::claim_loop`] and the reconcile tick.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use super::client::{failure, http_code, Api};
use super::State;
use crate::backoff::Backoff;

/// A stream with no byte for this long is dead.
const IDLE: Duration = Duration::from_secs(75);
/// The longest one stream lives (pamd ends each after 10 minutes).
const LIFETIME: Duration = Duration::from_secs(900);
const PATH: &str = "/api/v1/workers/watch";

pub(super) async fn watch_loop(st: Arc<State>) {
    let api = Api::new(&st.opts, LIFETIME).expect("http client");
    let mut last: Option<String> = None;
    let mut backoff = Backoff::new();
    loop {
        match follow(&st, &api, &mut last, &mut backoff).await {
            // pamd ended the stream (its lifetime, or shutdown).
            Ok(()) => {}
            Err(e) if matches!(http_code(&e), Some((404, _))) => {
                tracing::info!("pamd has no watch stream (an older pamd): polling it");
                st.polling.store(true, Ordering::SeqCst);
                st.wake.notify_one();
                return super::claim_loop(st).await;
            }
            Err(e) => {
                if matches!(http_code(&e), Some((409, "not_registered"))) {
                    st.reregister.notify_one();
                }
                tracing::debug!(error = %format!("{e:#}"), "watch failed; reconnecting");
                tokio::time::sleep(backoff.after(failure(&e))).await;
            }
        }
    }
}

/// Reads one stream until it ends: `Ok` when pamd ended it cleanly.
async fn follow(
    st: &State,
    api: &Api,
    last: &mut Option<String>,
    backoff: &mut Backoff,
) -> anyhow::Result<()> {
    let mut body = Body::of(api.open(PATH, last.as_deref()).await?).await?;
    let mut frames = Frames::default();
    loop {
        let chunk = match tokio::time::timeout(IDLE, body.chunk()).await {
            Ok(c) => c?,
            Err(_) => anyhow::bail!("the watch stream was silent for {IDLE:?}"),
        };
        let Some(chunk) = chunk else {
            return Ok(());
        };
        backoff.reset();
        for id in frames.push(&chunk) {
            *last = Some(id);
            st.wake.notify_one();
        }
    }
}

/// The stream's bytes: the upgraded connection after a `101`, or the
/// body of a plain `200 text/event-stream` (the same frames either way).
enum Body {
    Upgraded(reqwest::Upgraded, Box<[u8]>),
    Sse(reqwest::Response),
}

impl Body {
    async fn of(resp: reqwest::Response) -> anyhow::Result<Body> {
        Ok(
            if resp.status() == reqwest::StatusCode::SWITCHING_PROTOCOLS {
                Body::Upgraded(resp.upgrade().await?, vec![0; 4096].into())
            } else {
                Body::Sse(resp)
            },
        )
    }

    /// The next bytes; `None` once pamd ended the stream.
    async fn chunk(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        match self {
            Body::Upgraded(io, buf) => {
                use tokio::io::AsyncReadExt;
                let n = io.read(buf).await?;
                Ok((n > 0).then(|| buf[..n].to_vec()))
            }
            Body::Sse(resp) => Ok(resp.chunk().await?.map(|b| b.to_vec())),
        }
    }
}

/// An SSE parser for the watch's frames: the ids of whole `desired` frames.
#[derive(Default)]
struct Frames {
    buf: Vec<u8>,
}

impl Frames {
    fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut ids = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block);
            let (mut id, mut desired) = (None, false);
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_string());
                } else if line.strip_prefix("event:").map(str::trim) == Some("desired") {
                    desired = true;
                }
            }
            if let (true, Some(id)) = (desired, id) {
                ids.push(id);
            }
        }
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::Frames;

    #[test]
    fn frames_cut_anywhere_are_read_whole_and_once() {
        let text = b": keep-alive\n\nid: e-1\nevent: desired\ndata: {}\n\n: keep-alive\n\nid: e-2\nevent: desired\ndata: {}\n\n";
        for cut in 0..text.len() {
            let mut f = Frames::default();
            let mut ids = f.push(&text[..cut]);
            ids.extend(f.push(&text[cut..]));
            assert_eq!(ids, ["e-1", "e-2"], "cut at {cut}");
        }
        // A frame cut short is never taken.
        let mut f = Frames::default();
        assert!(f.push(b"id: e-3\nevent: desired\ndata: {}\n").is_empty());
    }
}
