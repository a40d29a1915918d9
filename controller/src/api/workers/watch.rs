//! `GET /api/v1/workers/watch`: one Server-Sent Events stream
//! per worker, in place of its polling (docs/api.md, "Worker watch").
//!
//! A frame says only *that* the host's desired set changed, as of a
//! version (`id:`): the worker then reads `GET /workers/desired`. Frames
//! coalesce — several changes before the worker looked are one frame — so
//! every change is followed by at least one read begun after it, and an
//! idle host costs nothing but a keep-alive comment.
//!
//! # Guarantees
//! - Nothing is missed across a reconnect: a stream opened with a
//!   `Last-Event-ID` that is not the host's current version on this pamd
//!   (a change came meanwhile, another replica or process served the last
//!   stream, or the version is unknown) starts with one frame, the resync.
//!   One opened at the current version starts silent.
//! - What changes a desired set wakes only its host's streams
//!   ([`crate::ctx::HostWatches`], by host id): the run events naming a
//!   host in their payload (a run claimed for it, a signal, a budget stop,
//!   a run failed or stopped by pamd), from this replica and, through the
//!   journal, from the others; and, from this replica only, the desired
//!   stop (`pamctl stop`) and attach input, which journal nothing.
//! - The stream claims for its host: while it is open, a long claim
//!   ([`claims::claim_wait`]) waits for runs the host can take, woken as
//!   the long-poll claims were ([`crate::ctx::Ctx::runs_claimable`]); a
//!   claim journals `run.spawning`, which wakes the stream.
//! - Revoking the worker's token ends the stream, and the claims it makes
//!   for its host, at once on this pamd and within a second on another
//!   replica ([`crate::api::access::revocation`]); the reconnect is refused (401).
//! - A stream ends after a random time between [`LIFETIME`] and twice it
//!   ([`lifetime`]; the worker reconnects at its version: silent when
//!   nothing changed), and at pamd's shutdown.
//!
//! # The upgraded watch
//! A request with `Upgrade: pam-watch`
//! ([`pam_manifests::protocol::WATCH_UPGRADE`]) is answered `101 Switching
//! Protocols`, and the same frames then go straight onto the connection,
//! which hyper has handed over ([`crate::api::upgraded::upgraded_response`]): an
//! idle watch holds its socket and its [`Watcher`], not the 16 KB read and
//! 8 KB write buffers hyper keeps per HTTP/1.1 connection — at 10,000
//! hosts, 240 MB (docs/benchmarks.md, "The upgraded watch"). A read that
//! ends (end of file, a reset) means the worker went away, and the stream
//! ends at once. Without the header the watch is a plain SSE response,
//! the same frames.
//!
//! The `101` says (`pam-watch-accepts: heartbeat, desired_set`) that the
//! worker may write its heartbeats and desired-set reads on the
//! connection, one [`WatchRequest`] per line, each answered in order by a
//! frame named as the request with its desired set (or `event: error`):
//! the same [`crate::api::workers::worker::heartbeat_of`] and
//! [`crate::api::workers::worker::desired_of`] as `POST /workers/heartbeat` and `GET
//! /workers/desired`. So a watching worker keeps one connection to pamd
//! instead of three, and a heartbeat or a read costs pamd no HTTP request
//! (docs/benchmarks.md, "One connection per worker").
//!
//! A worker that says so in its request (`pam-watch-serves: log_read`)
//! also serves its runs' logs on the upgraded watch: the reads pamd has
//! for its host ([`crate::api::logs::channel`]) go out as `log_read` frames,
//! and each answer comes back as a `log_chunk` line followed by its bytes
//! ([`crate::api::chunks::Chunks::payload`]).

use std::time::Duration;

use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use futures_util::future::BoxFuture;

use crate::api::access::auth::Worker;
use crate::api::access::revocation::Hold;
use crate::api::{ApiError, AppState};
use crate::ctx::Ctx;
use crate::fleet::claims;
use futures_util::stream::{FuturesOrdered, StreamExt};
use pam_manifests::protocol::{
    watch_accepts, LogChunk, LogRead, WatchError, WatchErrorDetail, WatchRequest, WATCH_ACCEPTS,
    WATCH_DESIRED_SET, WATCH_ERROR, WATCH_HEARTBEAT, WATCH_LOG_READ, WATCH_SERVES, WATCH_UPGRADE,
};

/// How long one stream lives at least before the worker reconnects.
///
/// Each stream lives a random time between this and twice it, as
/// kube-apiserver times out its watches (`--min-request-timeout` × [1,
/// 2)): reconnects (each a token check, a host read and a claim) do not
/// come all at once after a restart opened every watch in the same few
/// seconds, and at 10,000 hosts they are ~4 a second, not the 17 a fixed
/// 10 minutes made. A new replica gets its share of the
/// watches within an hour.
pub const LIFETIME: Duration = Duration::from_secs(30 * 60);

/// A stream's lifetime: uniform in [[`LIFETIME`], 2 × [`LIFETIME`]).
fn lifetime() -> Duration {
    LIFETIME.mul_f64(1.0 + crate::clock::jitter())
}
/// A keep-alive comment after this much silence: under the 60 s idle
/// timeout of common proxies and load balancers, and well inside the
/// worker's 75 s (pam-worker takes a silent stream for dead). Not the
/// event streams' 15 s: at 10,000 idle hosts each comment is a write,
/// 667 a second at 15 s (docs/benchmarks.md, "The upgraded watch"). A
/// dead stream loses nothing meanwhile: every heartbeat's answer is the
/// desired set too.
pub const KEEP_ALIVE: Duration = Duration::from_secs(30);
/// The claim a stream keeps waiting (renewed when it ends).
const CLAIM_WAIT: Duration = Duration::from_secs(600);
/// Most runs one claim takes (the host's free capacity bounds it too).
const CLAIM_MAX: i64 = 16;
/// After a failed claim, the next one waits this long.
const CLAIM_RETRY: Duration = Duration::from_secs(1);
/// Most requests a worker may have unanswered on its watch (it sends one
/// heartbeat at a time).
const MAX_PENDING: usize = 8;
/// What the `101` says the worker may write on the watch.
static ACCEPTS: std::sync::LazyLock<axum::http::HeaderValue> = std::sync::LazyLock::new(|| {
    let names = [WATCH_HEARTBEAT, WATCH_DESIRED_SET].join(", ");
    axum::http::HeaderValue::from_str(&names).expect("request names are header text")
});
/// The longest request line on a watch (the request body limit, if less):
/// a heartbeat listing a thousand sessions is ~100 KB.
const MAX_LINE: usize = 1 << 20;

#[tracing::instrument(skip_all, fields(host = %w.host))]
pub async fn watch(
    State(st): State<AppState>,
    w: Worker,
    mut req: Request,
) -> Result<Response, ApiError> {
    let headers = req.headers();
    // Read with the other watches opening: at a restart every worker
    // reconnects at once ([`crate::batch::read`]); on the
    // connections kept for liveness, so the opens are answered as fast as
    // they come, not after the claims the open streams make (each waiting
    // open holds ~35 KB: docs/benchmarks.md, "One connection per worker").
    let host = st.fleet.watched_host(&st.ctx, &w.host).await?;
    let resume = match headers.get("last-event-id") {
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::bad_request("bad Last-Event-ID"))?
                .to_string(),
        ),
        None => None,
    };
    st.fleet.start_fanout(&st.ctx).await?;
    crate::api::logs::archive::start(&st);
    let serves_logs = headers
        .get_all(WATCH_SERVES)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(watch_accepts)
        .any(|t| t == WATCH_LOG_READ);
    let watches = st.ctx.wakeups.watches.clone();
    let mut rx = watches.subscribe(host);
    let epoch = watches.epoch();
    let current = *rx.borrow_and_update();
    let id = |v: u64| format!("{epoch}-{v}");
    let mut first = None;
    if resume.as_deref() != Some(id(current).as_str()) {
        first = Some(frame(&id(current)));
    }
    let bus = st.ctx.bus.clone();
    let token = w.hold(&st);
    let upgrade = crate::api::upgraded::upgrade_asked(&mut req, WATCH_UPGRADE);
    // Only an upgraded watch carries a log chunk's raw bytes.
    let logs = (serves_logs && upgrade.is_some()).then(|| st.logs.channels.attach(host));
    let sub = Watcher {
        logs,
        chunk: None,
        revoked: Box::pin(token.revoked()),
        _token: token,
        first,
        rx,
        epoch,
        claim: claim(st.ctx.clone(), host, Duration::ZERO),
        st,
        host,
        worker: w,
        answers: Default::default(),
        framed: false,
        keep_alive: tokio::time::interval_at(tokio::time::Instant::now() + KEEP_ALIVE, KEEP_ALIVE),
        end: Box::pin(tokio::time::sleep(lifetime())),
        shutdown: Box::pin(bus.on_shutdown()),
    };
    if let Some(on) = upgrade {
        let mut resp = crate::api::upgraded::upgraded_response(on, sub, WATCH_UPGRADE, KEEP_ALIVE);
        resp.headers_mut().insert(WATCH_ACCEPTS, ACCEPTS.clone());
        return Ok(resp);
    }
    Ok(crate::api::chunks::sse_response(sub))
}

fn frame(id: &str) -> Bytes {
    Bytes::from(format!(
        "id: {id}\nevent: desired\ndata: {{\"version\":\"{id}\"}}\n\n"
    ))
}

/// The frame answering a request written on the watch: `event` and its
/// JSON (one line: serde_json writes no newline), no id (an answer is not
/// resumed; its request is sent again).
fn answer(event: &str, data: &impl serde::Serialize) -> Bytes {
    let data = serde_json::to_string(data).expect("an answer serializes");
    Bytes::from(format!("event: {event}\ndata: {data}\n\n"))
}

/// A failed request's answer: a [`WatchError`], what its HTTP request
/// would have had.
fn failed(e: ApiError) -> Bytes {
    let e = WatchError {
        status: e.status.as_u16(),
        error: WatchErrorDetail {
            code: e.code.to_string(),
            message: e.message,
        },
    };
    answer(WATCH_ERROR, &e)
}

/// The stream's claim: after `delay`, waits up to [`CLAIM_WAIT`] for runs
/// the host can take and claims them.
fn claim(ctx: Ctx, host: uuid::Uuid, delay: Duration) -> BoxFuture<'static, bool> {
    Box::pin(async move {
        tokio::time::sleep(delay).await;
        match claims::claim_wait(&ctx, host, CLAIM_MAX, CLAIM_WAIT).await {
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "watch: claim failed");
                false
            }
        }
    })
}

struct Watcher {
    /// The worker's token: revoking it ends the stream at once, and with
    /// it the claims the stream makes for its host.
    _token: Hold,
    revoked: std::pin::Pin<Box<tokio_util::sync::WaitForCancellationFutureOwned>>,
    /// The resync frame, sent first.
    first: Option<Bytes>,
    rx: tokio::sync::watch::Receiver<u64>,
    epoch: String,
    claim: BoxFuture<'static, bool>,
    st: AppState,
    host: uuid::Uuid,
    /// The worker, whose requests on the watch are its host's.
    worker: Worker,
    /// The answers to its requests, in the order they came.
    answers: FuturesOrdered<BoxFuture<'static, Bytes>>,
    /// A frame was sent since the last read of the desired set: the next
    /// read is the worker catching up with a change (answered at once),
    /// not its safety-net resync nor the read after the opening frame
    /// (answered with the next heartbeat batch,
    /// [`crate::api::heartbeats::resync`]).
    framed: bool,
    keep_alive: tokio::time::Interval,
    end: std::pin::Pin<Box<tokio::time::Sleep>>,
    shutdown: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    /// The log reads to send this host's worker, when it serves them.
    logs: Option<(
        tokio::sync::mpsc::Receiver<LogRead>,
        crate::api::logs::channel::Attached,
    )>,
    /// A log chunk's line, whose bytes come next.
    chunk: Option<LogChunk>,
}

impl crate::api::chunks::Chunks for Watcher {
    fn chunk(&mut self) -> impl std::future::Future<Output = Option<Bytes>> + Send {
        self.next_chunk()
    }

    fn max_line(&self) -> usize {
        self.st.max_body_bytes.min(MAX_LINE)
    }

    /// A [`WatchRequest`]: its answer is queued behind those before it. A
    /// line that is not one is answered 400; a worker with more than
    /// [`MAX_PENDING`] unanswered is cut off.
    fn line(&mut self, line: &[u8]) -> bool {
        let parsed = serde_json::from_slice::<WatchRequest>(line);
        // Not a request: the answer to a log read. Its bytes follow.
        if let Ok(WatchRequest::LogChunk(c)) = parsed {
            if self.logs.is_none() {
                return false;
            }
            self.chunk = Some(c);
            return true;
        }
        if self.answers.len() >= MAX_PENDING {
            return false;
        }
        // Its answer follows at once: no keep-alive meanwhile (at 10,000
        // hosts heartbeating every 30 s, one would nearly always come
        // first, in the few milliseconds the batch takes).
        self.keep_alive.reset();
        let answer: BoxFuture<'static, Bytes> = match parsed {
            Ok(req) => {
                self.worker.used_on_watch(&self.st);
                let (st, host) = (self.st.clone(), self.worker.host.clone());
                let read = matches!(req, WatchRequest::DesiredSet {});
                // No frame since the worker's last read: its resync.
                let resync = read && !std::mem::take(&mut self.framed);
                if read && !resync {
                    // Behind a request that may wait for the next
                    // heartbeat batch?
                    self.hurry_if_waiting();
                }
                Box::pin(async move {
                    let name = req.name();
                    let set = match req {
                        WatchRequest::Heartbeat(hb) => {
                            crate::api::workers::worker::heartbeat_of(&st, &host, hb).await
                        }
                        WatchRequest::DesiredSet {} if resync => st
                            .fleet
                            .resync(&st.ctx, &host)
                            .await
                            .map_err(ApiError::from),
                        WatchRequest::DesiredSet {} => st
                            .fleet
                            .desired(&st.ctx, &host)
                            .await
                            .map_err(ApiError::from),
                        // Taken by `line` before it gets here.
                        WatchRequest::LogChunk(_) => {
                            Err(ApiError::bad_request("a log chunk answers no request"))
                        }
                    };
                    match set {
                        Ok(set) => answer(name, &set),
                        Err(e) => failed(e),
                    }
                })
            }
            Err(e) => {
                let e = ApiError::bad_request(format!("not a watch request: {e}"));
                Box::pin(std::future::ready(failed(e)))
            }
        };
        self.answers.push_back(answer);
        true
    }

    fn payload_len(&mut self) -> usize {
        match &self.chunk {
            Some(c) if c.len > 0 => usize::try_from(c.len).unwrap_or(usize::MAX),
            // No bytes: answered now.
            Some(_) => {
                let c = self.chunk.take().expect("just matched");
                self.st.logs.channels.answered(self.host, c, Bytes::new());
                0
            }
            None => 0,
        }
    }

    fn payload(&mut self, bytes: Bytes) {
        if let Some(c) = self.chunk.take() {
            self.st.logs.channels.answered(self.host, c, bytes);
        }
    }
}

impl Watcher {
    /// A read the worker waits for follows a change: when it is queued
    /// behind an answer (which may wait for the next heartbeat batch),
    /// that batch is written now ([`crate::api::heartbeats::hurry`]).
    fn hurry_if_waiting(&self) {
        if !self.answers.is_empty() {
            self.st.fleet.hurry();
        }
    }

    async fn next_chunk(&mut self) -> Option<Bytes> {
        // The opening frame (a reconnect that missed changes, or a new
        // stream) does not count as one: the read it asks for goes into
        // the heartbeat batch like a resync. When pamd restarts, every
        // worker opens its watch and reads at once; read one by one on
        // the pool, 10,000 of them got 503s (the pool's wait ran out), and
        // each worker's retry 5 s later lined their resyncs up from then
        // on (bench-fleet, 2026-12-06).
        if let Some(b) = self.first.take() {
            return Some(b);
        }
        loop {
            tokio::select! {
                biased;
                _ = &mut self.shutdown => return None,
                _ = &mut self.revoked => return None,
                _ = &mut self.end => return None,
                Some(b) = self.answers.next(), if !self.answers.is_empty() => {
                    self.keep_alive.reset();
                    return Some(b);
                }
                r = self.rx.changed() => {
                    r.ok()?;
                    let v = *self.rx.borrow_and_update();
                    self.keep_alive.reset();
                    self.framed = true;
                    // The worker will read the set again after the answer
                    // it waits for, which may wait for the next batch.
                    self.hurry_if_waiting();
                    return Some(frame(&format!("{}-{v}", self.epoch)));
                }
                Some(read) = async { self.logs.as_mut()?.0.recv().await }, if self.logs.is_some() => {
                    self.keep_alive.reset();
                    return Some(answer(WATCH_LOG_READ, &read));
                }
                ok = &mut self.claim => {
                    let delay = if ok { Duration::ZERO } else { CLAIM_RETRY };
                    self.claim = claim(self.st.ctx.clone(), self.host, delay);
                }
                _ = self.keep_alive.tick() => return Some(Bytes::from_static(b": keep-alive\n\n")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lifetimes_spread_over_one_to_two_lifetimes() {
        let all: Vec<Duration> = (0..1000).map(|_| lifetime()).collect();
        assert!(all.iter().all(|d| *d >= LIFETIME && *d < 2 * LIFETIME));
        // Spread, not one value: each half of the range is taken.
        let late = all.iter().filter(|d| **d >= LIFETIME.mul_f64(1.5)).count();
        assert!(
            (300..700).contains(&late),
            "{late} of 1000 in the upper half"
        );
    }
}
