//! A file's bytes as a streamed response body: chunks read in order with
//! [`IN_FLIGHT`] reads outstanding (so the worker's disk, the network and
//! the client overlap), handed to hyper through a channel of two chunks,
//! so pamd holds a few chunks per response at most, never the file. With
//! `follow` it keeps reading as the file grows, until the worker says
//! the attempt is over, the client goes away, or the worker stays
//! unreachable for [`FOLLOW_GIVE_UP`].
//!
//! Also where a request's start comes from: `tail=N` (the offset after
//! the N-th line from the end, found reading backwards) and `since=`
//! (the log's time index, [`pam_manifests::protocol::TimeIndex`]).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{FuturesOrdered, StreamExt};
use pam_manifests::protocol::{LogFile, TimeIndex};

use super::channel::{ReadError, Reply};
use super::source::{Located, CHUNK};
use super::Logs;

/// Chunk reads outstanding per response.
pub const IN_FLIGHT: usize = 4;
/// A follow waits at first this long for the file to grow, doubling to
/// [`FOLLOW_MAX_WAIT`].
const FOLLOW_WAIT: Duration = Duration::from_millis(100);
const FOLLOW_MAX_WAIT: Duration = Duration::from_secs(1);
/// A follow whose worker cannot be read this long ends (the client may
/// ask again from where it got to).
const FOLLOW_GIVE_UP: Duration = Duration::from_secs(60);
/// The biggest time index read for `since=` (a line per second of
/// output: weeks of it).
pub const INDEX_MAX: u64 = 16 << 20;

/// What to send of a file.
#[derive(Debug, Clone, Copy)]
pub struct Range {
    pub file: LogFile,
    pub start: u64,
    /// One past the last byte; `None`: to the end.
    pub end: Option<u64>,
    pub follow: bool,
}

type Fetch =
    std::pin::Pin<Box<dyn std::future::Future<Output = (u64, Result<Reply, ReadError>)> + Send>>;

fn fetch(logs: &Arc<Logs>, at: &Arc<Located>, file: LogFile, index: u64) -> Fetch {
    let (logs, at) = (logs.clone(), at.clone());
    Box::pin(async move { (index, at.chunk(&logs, file, index).await) })
}

/// Streams `range` of `at`'s file into `out` (see the module doc); the
/// first chunk's read may already be done (`first`, the one that decided
/// the answer's status).
pub async fn pump(
    logs: Arc<Logs>,
    at: Arc<Located>,
    range: Range,
    first: Option<(u64, Reply)>,
    out: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let end = range.end.unwrap_or(u64::MAX);
    let mut pos = range.start;
    let mut next = pos / CHUNK;
    let mut size: Option<u64> = None;
    let mut inflight: FuturesOrdered<Fetch> = FuturesOrdered::new();
    if let Some((index, reply)) = first {
        inflight.push_back(Box::pin(async move { (index, Ok(reply)) }));
        next = index + 1;
    }
    let mut wait = FOLLOW_WAIT;
    let mut done = false;
    let mut failing_since: Option<tokio::time::Instant> = None;
    while pos < end {
        // Ahead only within what the file holds (a first read finds out).
        while inflight.len() < IN_FLIGHT
            && next * CHUNK < end
            && size.map_or(inflight.is_empty(), |s| next * CHUNK < s)
        {
            inflight.push_back(fetch(&logs, &at, range.file, next));
            next += 1;
        }
        let Some((index, reply)) = inflight.next().await else {
            // Everything the file held is sent (it ended on a chunk's
            // edge).
            if !range.follow || done {
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(FOLLOW_MAX_WAIT);
            next = pos / CHUNK;
            // Read again from where it got to: a fresh size and state.
            size = None;
            continue;
        };
        let r = match reply {
            Ok(r) => r,
            Err(e) => {
                let transient = matches!(
                    e,
                    ReadError::Timeout | ReadError::Gone | ReadError::NoChannel
                );
                let since = *failing_since.get_or_insert_with(tokio::time::Instant::now);
                if !(range.follow && transient) || since.elapsed() >= FOLLOW_GIVE_UP {
                    tracing::info!(run = %at.run, attempt = at.attempt, error = ?e, "log stream ended by a failed read");
                    return;
                }
                inflight.clear();
                tokio::time::sleep(FOLLOW_MAX_WAIT).await;
                next = pos / CHUNK;
                size = None;
                continue;
            }
        };
        failing_since = None;
        size = Some(r.size);
        done = r.done;
        let lo = index * CHUNK;
        let from = (pos - lo) as usize;
        let to = (r.bytes.len() as u64).min(end - lo) as usize;
        if from < to {
            wait = FOLLOW_WAIT;
            pos = lo + to as u64;
            if out.send(Ok(r.bytes.slice(from..to))).await.is_err() {
                return;
            }
        }
        if (r.bytes.len() as u64) < CHUNK {
            // The end of the file as it is now: reads past it are moot.
            inflight.clear();
            if !range.follow || r.done {
                return;
            }
            if from >= to {
                // Nothing new: wait longer each time before asking again.
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(FOLLOW_MAX_WAIT);
            }
            next = pos / CHUNK;
            size = None;
        }
    }
}

/// The offset where the last `lines` lines of `at`'s `file` (of `size`
/// bytes) start: read backwards a chunk at a time until that many line
/// ends are found before the last byte.
pub async fn tail_start(
    logs: &Logs,
    at: &Located,
    file: LogFile,
    size: u64,
    lines: u64,
) -> Result<u64, ReadError> {
    if lines == 0 {
        return Ok(size);
    }
    let mut seen = 0;
    let mut index = size.saturating_sub(1) / CHUNK;
    loop {
        let r = at.chunk(logs, file, index).await?;
        let lo = index * CHUNK;
        // The file's last byte ends the last line; it is not counted.
        let upto = (size.saturating_sub(1).saturating_sub(lo) as usize).min(r.bytes.len());
        if let Some(i) = nth_line_end_back(&r.bytes[..upto], lines - seen) {
            return Ok(lo + i as u64 + 1);
        }
        seen += r.bytes[..upto].iter().filter(|b| **b == b'\n').count() as u64;
        if index == 0 {
            return Ok(0);
        }
        index -= 1;
    }
}

/// The position of the `n`-th `\n` from the end of `bytes`.
fn nth_line_end_back(bytes: &[u8], n: u64) -> Option<usize> {
    let mut count = 0;
    for (i, b) in bytes.iter().enumerate().rev() {
        if *b == b'\n' {
            count += 1;
            if count == n {
                return Some(i);
            }
        }
    }
    None
}

/// Where the output written at `since_ms` (unix milliseconds) or later
/// starts, from the attempt's time index.
pub async fn since_start(logs: &Logs, at: &Located, since_ms: i64) -> Result<u64, ReadError> {
    let (size, _) = at.stat(logs, LogFile::Index).await?;
    if size > INDEX_MAX {
        return Err(ReadError::Worker {
            code: "too_large".into(),
            message: format!("the log's time index is {size} bytes, over {INDEX_MAX}"),
        });
    }
    let mut text = Vec::with_capacity(size as usize);
    let mut index = 0;
    while (text.len() as u64) < size {
        let r = at.chunk(logs, LogFile::Index, index).await?;
        if r.bytes.is_empty() {
            break;
        }
        text.extend_from_slice(&r.bytes);
        index += 1;
    }
    Ok(TimeIndex::parse(&text).offset_since(since_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nth_line_end_is_counted_from_the_end() {
        assert_eq!(nth_line_end_back(b"a\nb\nc", 1), Some(3));
        assert_eq!(nth_line_end_back(b"a\nb\nc", 2), Some(1));
        assert_eq!(nth_line_end_back(b"a\nb\nc", 3), None);
        assert_eq!(nth_line_end_back(b"", 1), None);
    }
}
