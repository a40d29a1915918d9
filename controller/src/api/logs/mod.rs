//! `GET /api/v1/projects/{project}/runs/{name}/log` and `…/transcript`:
//! a run's whole raw log and its transcript, read from the worker that
//! keeps them (docs/api.md, "Run logs and transcripts").
//!
//! Pane text, logs and transcripts never go into PostgreSQL, not even an
//! event: pamd reads them from the host's worker when asked, keeps
//! finished attempts' chunks in memory within `[logs] cache_bytes`
//! ([`cache`]), and, with `[logs] archive_dir`, copies each finished
//! attempt's files to disk ([`archive`]), from where they are served
//! once their host is gone.
//!
//! # The worker channel
//! pamd cannot connect to a worker (workers listen on no port); each
//! worker holds one upgraded watch to one pamd replica. A read is a
//! `log_read` frame on that watch; the worker answers on the same
//! connection with a `log_chunk` line and the bytes
//! (`pam_manifests::protocol::logs`), matched by request id
//! ([`channel`]). Answers on the connection rather than a POST: the
//! connection always reaches the replica that asked, carries raw bytes
//! with no encoding, and needs no second connection or authentication;
//! [`IN_FLIGHT`](body::IN_FLIGHT) reads per response keep it busy. Every
//! read has a timeout ([`READ_TIMEOUT`]).
//!
//! # Replicas
//! Only the replica holding a host's watch can read its worker. Another
//! replica answers `503 log_elsewhere` with `Retry-After: 1` (pamctl
//! tries its other `--server` URLs); a finished attempt archived to a
//! shared `archive_dir` is served by any replica. Relaying a read to the
//! replica holding the watch (a NOTIFY with the request's ids, the bytes
//! sent back replica to replica) is not built: replicas do not know each
//! other's addresses.

pub mod archive;
mod body;
pub mod cache;
pub mod channel;
mod source;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use pam_manifests::protocol::LogFile;
use serde::Deserialize;

use crate::api::access::auth::Operator;
use crate::api::extract::{Path, Query};
use crate::api::{ApiError, AppState};
use body::Range;
use source::CHUNK;

/// How long one chunk's read may take, request to last byte.
pub const READ_TIMEOUT: Duration = Duration::from_secs(20);
/// `[logs] cache_bytes`'s default.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;
/// The most lines `tail=` takes.
const TAIL_MAX: u64 = 1_000_000;

/// What pamd keeps to serve logs.
pub struct Logs {
    /// The watches that serve reads, and the reads in flight.
    pub channels: Arc<channel::Channels>,
    /// Finished attempts' chunks.
    pub cache: cache::ChunkCache,
    /// `[logs] archive_dir`.
    pub archive_dir: Option<PathBuf>,
    /// The archiver runs ([`archive::start`]).
    pub archiving: std::sync::atomic::AtomicBool,
}

impl Default for Logs {
    fn default() -> Self {
        Logs::new(DEFAULT_CACHE_BYTES, None)
    }
}

impl Logs {
    pub fn new(cache_bytes: usize, archive_dir: Option<PathBuf>) -> Logs {
        Logs {
            channels: Default::default(),
            cache: cache::ChunkCache::new(cache_bytes),
            archive_dir,
            archiving: Default::default(),
        }
    }

    /// The archive's directory of `run` when it holds `attempt` whole.
    fn archived(&self, run: uuid::Uuid, attempt: i32) -> Option<PathBuf> {
        let dir = self.archive_dir.as_ref()?.join(run.to_string());
        dir.join(archive::marker(attempt)).is_file().then_some(dir)
    }
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogQuery {
    /// The attempt (default: the run's current one).
    attempt: Option<i32>,
    /// The first byte to send (default 0).
    offset: Option<u64>,
    /// At most this many bytes.
    limit: Option<u64>,
    /// Only the last N lines (at most 1,000,000).
    tail: Option<u64>,
    /// Only what was written since then: a duration back from now
    /// (`10m`, `1h30m`) or an RFC 3339 time. To about a second: the
    /// worker's time index has a point a second at most.
    since: Option<String>,
    /// Keep sending as the log grows, until the attempt is over.
    #[serde(default)]
    follow: bool,
}

#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TranscriptQuery {
    /// The attempt (default: the run's current one).
    attempt: Option<i32>,
    /// The first byte to send (default 0).
    offset: Option<u64>,
    /// Keep sending as the transcript grows, until the attempt is over.
    #[serde(default)]
    follow: bool,
}

/// `GET …/runs/{name}/log`: the raw log, streamed.
#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn run_log(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Query(q): Query<LogQuery>,
) -> Result<Response, ApiError> {
    let starts = [q.offset.is_some(), q.tail.is_some(), q.since.is_some()];
    if starts.iter().filter(|s| **s).count() > 1 {
        return Err(ApiError::bad_request(
            "offset, tail and since each say where to start: give one",
        ));
    }
    if q.tail.is_some_and(|t| t > TAIL_MAX) {
        return Err(ApiError::bad_request(format!(
            "tail: at most {TAIL_MAX} lines"
        )));
    }
    let since = q
        .since
        .as_deref()
        .map(|s| since_ms(s, st.ctx.clock.now()))
        .transpose()?;
    let start = match (q.tail, since) {
        (Some(n), _) => Start::Tail(n),
        (_, Some(ms)) => Start::Since(ms),
        _ => Start::Offset(q.offset.unwrap_or(0)),
    };
    let file = LogFile::Log;
    let answer = Ask {
        file,
        attempt: q.attempt,
        start,
        limit: q.limit,
        follow: q.follow,
    };
    serve(&st, &slug, &name, answer, "text/plain; charset=utf-8").await
}

/// `GET …/runs/{name}/transcript`: the transcript as JSON lines.
#[tracing::instrument(skip_all, fields(project = %slug, run = %name))]
pub async fn run_transcript(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
    Query(q): Query<TranscriptQuery>,
) -> Result<Response, ApiError> {
    let answer = Ask {
        file: LogFile::Transcript,
        attempt: q.attempt,
        start: Start::Offset(q.offset.unwrap_or(0)),
        limit: None,
        follow: q.follow,
    };
    serve(&st, &slug, &name, answer, "application/x-ndjson").await
}

/// `since=`: a duration back from `now`, or an RFC 3339 time; unix ms.
fn since_ms(text: &str, now: DateTime<Utc>) -> Result<i64, ApiError> {
    if let Some(d) = pam_manifests::duration::parse(text) {
        let d = chrono::Duration::from_std(d)
            .map_err(|_| ApiError::bad_request("since: too long ago"))?;
        return Ok((now - d).timestamp_millis());
    }
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|_| {
            ApiError::bad_request(format!(
                "since: {text:?} is neither a duration (10m, 1h30m) nor an RFC 3339 time"
            ))
        })
}

enum Start {
    Offset(u64),
    Tail(u64),
    Since(i64),
}

struct Ask {
    file: LogFile,
    attempt: Option<i32>,
    start: Start,
    limit: Option<u64>,
    follow: bool,
}

async fn serve(
    st: &AppState,
    slug: &str,
    name: &str,
    ask: Ask,
    content_type: &'static str,
) -> Result<Response, ApiError> {
    if ask.attempt.is_some_and(|a| a < 1) {
        return Err(ApiError::bad_request("attempt: must be at least 1"));
    }
    let run = crate::api::operator::runs::run_named(st, slug, name).await?;
    let at = Arc::new(source::locate(st, &run, ask.attempt, ask.file).await?);
    let logs = st.logs.clone();
    let file = ask.file;
    let fail = |e| at.error(file, e);
    let start = match ask.start {
        Start::Offset(o) => o,
        Start::Tail(n) => {
            let (size, _) = at.stat(&logs, file).await.map_err(fail)?;
            body::tail_start(&logs, &at, file, size, n)
                .await
                .map_err(fail)?
        }
        Start::Since(ms) => body::since_start(&logs, &at, ms)
            .await
            .map_err(|e| at.error(LogFile::Index, e))?,
    };
    // The first chunk is read before answering: its failure (no such
    // file, an unreachable worker) is the answer's status.
    let index = start / CHUNK;
    let first = at.chunk(&logs, file, index).await.map_err(fail)?;
    let (size, done) = (first.size, first.done);
    let range = Range {
        file,
        start,
        end: ask.limit.map(|l| start.saturating_add(l)),
        follow: ask.follow,
    };
    let (tx, rx) = tokio::sync::mpsc::channel(2);
    tokio::spawn(body::pump(
        logs,
        at.clone(),
        range,
        Some((index, first)),
        tx,
    ));
    let stream =
        futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|b| (b, rx)) });
    let mut resp = Body::from_stream(stream).into_response();
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert("x-pam-attempt", at.attempt.into());
    h.insert("x-pam-offset", start.into());
    h.insert("x-pam-size", size.into());
    h.insert(
        "x-pam-done",
        HeaderValue::from_static(if done { "true" } else { "false" }),
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_is_a_duration_back_or_a_time() {
        let now = DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let ten = since_ms("10m", now).unwrap();
        assert_eq!(now.timestamp_millis() - ten, 600_000);
        let at = since_ms("2026-03-01T11:00:00Z", now).unwrap();
        assert_eq!(now.timestamp_millis() - at, 3_600_000);
        assert!(since_ms("yesterday", now).is_err());
    }
}
