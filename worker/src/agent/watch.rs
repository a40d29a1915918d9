//! The watch: one long `GET /api/v1/workers/watch` per worker,
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
//!
//! When the `101` says `pam-watch-accepts: heartbeat, desired_set`, the
//! heartbeats and the desired-set reads go on the watch too
//! ([`request`]): one JSON line each, answered in order by a frame with
//! the desired set, so the worker keeps one connection to pamd. Otherwise
//! (a plain stream, an older pamd or replica, no watch open) they are
//! HTTP requests.
//!
//! The worker says with its request (`pam-watch-serves: log_read`) that
//! pamd may ask it for its runs' logs on the upgraded watch: an `event:
//! log_read` frame is served by a task ([`super::logs::answer`], at most
//! [`LOG_READERS`] at once) whose answer — a line and the file's bytes —
//! is written on the same connection, between the other requests' lines.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use pam_manifests::protocol::{
    watch_accepts, DesiredSet, LogRead, WatchError, WatchRequest, WATCH_ACCEPTS, WATCH_DESIRED_SET,
    WATCH_ERROR, WATCH_HEARTBEAT, WATCH_LOG_READ,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::sync::{mpsc, oneshot};

use super::client::{failure, http_code, Api, HttpError};
use super::State;
use crate::backoff::Backoff;

/// A request for the open watch, and where its answer goes.
type Call = (WatchRequest, oneshot::Sender<anyhow::Result<DesiredSet>>);

/// Where the other tasks hand their requests to the open watch, with the
/// names of those it takes; `None` while none is open.
#[derive(Default)]
pub(super) struct Calls(Mutex<Option<(mpsc::Sender<Call>, Vec<String>)>>);

/// `req` sent on the open watch, its answer awaited for at most `wait`;
/// `None` when no open watch takes it, or it did not answer (it ended, or
/// is stuck): the caller sends the HTTP request instead.
pub(super) async fn request(
    st: &State,
    req: WatchRequest,
    wait: Duration,
) -> Option<anyhow::Result<DesiredSet>> {
    let calls = {
        let open = st.watch_calls.0.lock().unwrap();
        let (calls, takes) = open.as_ref()?;
        takes
            .iter()
            .any(|t| t == req.name())
            .then(|| calls.clone())?
    };
    let (reply, answer) = oneshot::channel();
    calls.send((req, reply)).await.ok()?;
    match tokio::time::timeout(wait, answer).await {
        Ok(Ok(answer)) => Some(answer),
        Ok(Err(_)) => None,
        Err(_) => {
            tracing::debug!("no answer on the watch within {wait:?}; sending the request");
            None
        }
    }
}

/// Most log reads served at once on one watch (pamd keeps a few in
/// flight per log it streams).
const LOG_READERS: usize = 8;

/// A stream with no byte for this long is dead.
const IDLE: Duration = Duration::from_secs(75);
/// The longest one stream lives (pamd ends each after 30 to 60 minutes;
/// an older pamd after 10).
const LIFETIME: Duration = Duration::from_secs(65 * 60);
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
    let (mut body, writer) = Body::of(api.open(PATH, last.as_deref()).await?).await?;
    // While this stream takes requests, the other tasks send them here;
    // they are answered in the order they were written.
    let mut calls = writer.map(|(w, takes)| {
        let (tx, rx) = mpsc::channel(4);
        *st.watch_calls.0.lock().unwrap() = Some((tx, takes));
        (w, rx, VecDeque::new())
    });
    let _taken = TakenBack(&st.watch_calls);
    // Log reads' answers, written on the connection as they are ready.
    let (logs_out, mut logs_in) = mpsc::channel::<Vec<u8>>(LOG_READERS);
    let readers = Arc::new(tokio::sync::Semaphore::new(LOG_READERS));
    let mut frames = Frames::default();
    // pamd's silence, not ours: writing a heartbeat does not extend it.
    let mut silent_at = tokio::time::Instant::now() + IDLE;
    loop {
        let idle = tokio::time::timeout_at(silent_at, body.chunk());
        let chunk = tokio::select! {
            c = idle => match c {
                Ok(c) => c?,
                Err(_) => anyhow::bail!("the watch stream was silent for {IDLE:?}"),
            },
            Some((req, reply)) = async { calls.as_mut()?.1.recv().await }, if calls.is_some() => {
                let (w, _, pending) = calls.as_mut().expect("a stream that takes requests");
                let mut line = serde_json::to_vec(&req)?;
                line.push(b'\n');
                tokio::time::timeout(IDLE, w.write_all(&line)).await??;
                pending.push_back(reply);
                continue;
            }
            Some(out) = logs_in.recv(), if calls.is_some() => {
                let (w, _, _) = calls.as_mut().expect("a stream that takes requests");
                tokio::time::timeout(IDLE, w.write_all(&out)).await??;
                continue;
            }
        };
        let Some(chunk) = chunk else {
            return Ok(());
        };
        backoff.reset();
        silent_at = tokio::time::Instant::now() + IDLE;
        for f in frames.push(&chunk) {
            match f {
                Frame::Desired(id) => {
                    *last = Some(id);
                    st.wake.notify_one();
                }
                // Only an upgraded watch that takes requests can answer.
                Frame::LogRead(data) if calls.is_some() => {
                    serve_log_read(st, &data, logs_out.clone(), readers.clone());
                }
                Frame::LogRead(_) => {}
                Frame::Answer { event, data } => {
                    let Some(reply) = calls.as_mut().and_then(|c| c.2.pop_front()) else {
                        anyhow::bail!("the watch answered a request that was not sent");
                    };
                    let _ = reply.send(answer_of(&event, &data));
                }
            }
        }
    }
}

/// Serves one `log_read` frame on a task of its own: the file is read on
/// the blocking pool, and the answer handed to the watch to write.
fn serve_log_read(
    st: &State,
    data: &str,
    out: mpsc::Sender<Vec<u8>>,
    readers: Arc<tokio::sync::Semaphore>,
) {
    let req: LogRead = match serde_json::from_str(data) {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "pamd sent a log read this worker cannot read");
            return;
        }
    };
    let live = st
        .running
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.run_id == Some(req.run_id) && s.attempt == Some(req.attempt));
    let data_dir = st.opts.data_dir.clone();
    tokio::spawn(async move {
        let Ok(_permit) = readers.acquire_owned().await else {
            return;
        };
        let answer =
            tokio::task::spawn_blocking(move || super::logs::answer(&data_dir, &req, live)).await;
        if let Ok(answer) = answer {
            // The watch ended meanwhile: pamd asks again on the next one.
            let _ = out.send(answer).await;
        }
    });
}

/// Clears the stream's heartbeat hand-over when it ends, however it ends.
struct TakenBack<'a>(&'a Calls);

impl Drop for TakenBack<'_> {
    fn drop(&mut self) {
        *self.0 .0.lock().unwrap() = None;
    }
}

/// A request's answer: the desired set, or the error its HTTP request
/// would have had.
fn answer_of(event: &str, data: &str) -> anyhow::Result<DesiredSet> {
    if event == WATCH_ERROR {
        let e: WatchError = serde_json::from_str(data)?;
        return Err(HttpError {
            status: e.status,
            code: e.error.code,
            body: serde_json::json!({ "error": { "message": e.error.message } }),
            retry_after: None,
        }
        .into());
    }
    Ok(serde_json::from_str(data)?)
}

/// The stream's bytes: the upgraded connection after a `101`, or the
/// body of a plain `200 text/event-stream` (the same frames either way).
enum Body {
    Upgraded(ReadHalf<reqwest::Upgraded>, Box<[u8]>),
    Sse(reqwest::Response),
}

impl Body {
    /// The stream, and where to write the requests it takes (their
    /// names) when it takes any.
    #[allow(clippy::type_complexity)]
    async fn of(
        resp: reqwest::Response,
    ) -> anyhow::Result<(Body, Option<(WriteHalf<reqwest::Upgraded>, Vec<String>)>)> {
        if resp.status() != reqwest::StatusCode::SWITCHING_PROTOCOLS {
            return Ok((Body::Sse(resp), None));
        }
        let takes: Vec<String> = resp
            .headers()
            .get_all(WATCH_ACCEPTS)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(watch_accepts)
            .map(String::from)
            .collect();
        let (rd, wr) = tokio::io::split(resp.upgrade().await?);
        let writer = (!takes.is_empty()).then_some((wr, takes));
        Ok((Body::Upgraded(rd, vec![0; 4096].into()), writer))
    }

    /// The next bytes; `None` once pamd ended the stream.
    async fn chunk(&mut self) -> anyhow::Result<Option<Vec<u8>>> {
        match self {
            Body::Upgraded(io, buf) => {
                let n = io.read(buf).await?;
                Ok((n > 0).then(|| buf[..n].to_vec()))
            }
            Body::Sse(resp) => Ok(resp.chunk().await?.map(|b| b.to_vec())),
        }
    }
}

/// A whole frame of the watch.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    /// `event: desired`: the set changed, as of this id.
    Desired(String),
    /// The answer to a request written on the watch (`event: heartbeat`,
    /// `desired_set` or `error`), its data.
    Answer { event: String, data: String },
    /// `event: log_read`: pamd asks for a part of a run's file, its data
    /// (a [`LogRead`]).
    LogRead(String),
}

/// An SSE parser for the watch's frames.
#[derive(Default)]
struct Frames {
    buf: Vec<u8>,
}

impl Frames {
    fn push(&mut self, bytes: &[u8]) -> Vec<Frame> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block);
            let (mut id, mut event, mut data) = (None, None, String::new());
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("event:") {
                    event = Some(v.trim().to_string());
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.strip_prefix(' ').unwrap_or(v));
                }
            }
            match (event.as_deref(), id) {
                (Some("desired"), Some(id)) => out.push(Frame::Desired(id)),
                (Some(WATCH_LOG_READ), _) => out.push(Frame::LogRead(data)),
                (Some(e), _) if [WATCH_HEARTBEAT, WATCH_DESIRED_SET, WATCH_ERROR].contains(&e) => {
                    out.push(Frame::Answer {
                        event: e.to_string(),
                        data,
                    })
                }
                _ => {}
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{Frame, Frames};

    #[test]
    fn frames_cut_anywhere_are_read_whole_and_once() {
        let text = b": keep-alive\n\nid: e-1\nevent: desired\ndata: {}\n\n: keep-alive\n\nevent: heartbeat\ndata: {\"runs\":[]}\n\nid: e-2\nevent: desired\ndata: {}\n\nevent: error\ndata: {\"status\":409}\n\n";
        let want = [
            Frame::Desired("e-1".into()),
            Frame::Answer {
                event: "heartbeat".into(),
                data: "{\"runs\":[]}".into(),
            },
            Frame::Desired("e-2".into()),
            Frame::Answer {
                event: "error".into(),
                data: "{\"status\":409}".into(),
            },
        ];
        for cut in 0..text.len() {
            let mut f = Frames::default();
            let mut got = f.push(&text[..cut]);
            got.extend(f.push(&text[cut..]));
            assert_eq!(got, want, "cut at {cut}");
        }
        // A frame cut short is never taken.
        let mut f = Frames::default();
        assert!(f.push(b"id: e-3\nevent: desired\ndata: {}\n").is_empty());
    }

    #[test]
    fn a_log_read_frame_is_read_whole() {
        let text =
            b"event: log_read\ndata: {\"id\":\"x\"}\n\nid: e-1\nevent: desired\ndata: {}\n\n";
        for cut in 0..text.len() {
            let mut f = Frames::default();
            let mut got = f.push(&text[..cut]);
            got.extend(f.push(&text[cut..]));
            assert_eq!(
                got,
                [
                    Frame::LogRead("{\"id\":\"x\"}".into()),
                    Frame::Desired("e-1".into())
                ],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn an_error_answer_is_the_http_error_its_post_would_have_been() {
        let e = super::answer_of(
            "error",
            r#"{"status":409,"error":{"code":"not_registered","message":"host \"a\" has not registered yet"}}"#,
        )
        .unwrap_err();
        assert_eq!(super::http_code(&e), Some((409, "not_registered")));
        let ok = super::answer_of("heartbeat", r#"{"runs":[]}"#).unwrap();
        assert!(ok.runs.is_empty());
    }
}
