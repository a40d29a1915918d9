//! Run logs and transcripts read from the worker that keeps them, over its
//! watch (docs/api.md, "Worker watch: reading logs").
//!
//! An attempt's files live on its host only
//! (`<data_dir>/runs/<run_id>/<attempt>.log`, `.transcript.jsonl`, and
//! the time index `.log.idx`): pane text, logs and transcripts never go
//! into PostgreSQL. pamd reads them a chunk at a time:
//!
//! - pamd → worker, a frame on the upgraded watch: `event: log_read`,
//!   `data:` a [`LogRead`] (a request id, the run, the attempt, which
//!   [`LogFile`], a byte offset and a limit of at most [`LOG_CHUNK_MAX`]).
//!   pamd sends it only on a watch whose worker said, with the request
//!   header [`WATCH_SERVES`], that it serves [`WATCH_LOG_READ`].
//! - worker → pamd, on the same connection, the answer: one JSON line
//!   `{"log_chunk": {…}}` (a [`LogChunk`]: the request id, the file's
//!   size now, whether it will still grow, and `len`), followed by exactly
//!   `len` raw bytes — the file's bytes from the offset. A failure (no
//!   such file, a bad request) is a chunk with `error` and no bytes.
//!
//! The bytes go back on the connection the request came on, not in an
//! HTTP request of the worker's: that connection always reaches the pamd
//! replica that asked (a POST may be balanced to another), needs no
//! second authentication nor connection, and is flow-controlled by TCP.
//!
//! The time index ([`TimeIndex`]) maps times to offsets so that pamd can
//! answer `since=`: the wrapper appends `<unix ms> <offset>` whenever
//! output arrives at least a second after the last point, and
//! `end <unix ms> <size>` when the attempt is over.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// The request header a worker sends with its watch, comma-separated
/// names of the requests it serves on the upgraded connection
/// ([`WATCH_LOG_READ`]). An older worker sends none: pamd then answers a
/// log request for its host with `worker_too_old`.
pub const WATCH_SERVES: &str = "pam-watch-serves";

/// The `event:` of pamd's [`LogRead`] frame, and its name in
/// [`WATCH_SERVES`].
pub const WATCH_LOG_READ: &str = "log_read";

/// The most bytes one [`LogRead`] asks for (and one [`LogChunk`] carries).
pub const LOG_CHUNK_MAX: u64 = 1 << 20;

/// Which file of an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFile {
    /// The raw output (`<attempt>.log`).
    Log,
    /// The normalized transcript (`<attempt>.transcript.jsonl`), one
    /// [`Entry`](super::Entry) a line.
    Transcript,
    /// The log's time index (`<attempt>.log.idx`, [`TimeIndex`]).
    Index,
}

impl LogFile {
    pub const ALL: [LogFile; 3] = [LogFile::Log, LogFile::Transcript, LogFile::Index];

    /// Its file name in `runs/<run_id>/`.
    pub fn file_name(self, attempt: i32) -> String {
        match self {
            LogFile::Log => format!("{attempt}.log"),
            LogFile::Transcript => format!("{attempt}.transcript.jsonl"),
            LogFile::Index => format!("{attempt}.log.idx"),
        }
    }

    /// How it is named to people.
    pub fn noun(self) -> &'static str {
        match self {
            LogFile::Log => "log",
            LogFile::Transcript => "transcript",
            LogFile::Index => "log's time index",
        }
    }
}

/// pamd's request for a byte range of one file of one attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRead {
    /// Names the answer ([`LogChunk::id`]).
    pub id: Uuid,
    pub run_id: Uuid,
    pub attempt: i32,
    pub file: LogFile,
    /// The first byte wanted; past the end, the answer has no bytes.
    pub offset: u64,
    /// At most this many bytes (at most [`LOG_CHUNK_MAX`]; 0 asks only
    /// for the size and whether the file is done).
    pub limit: u64,
}

/// The worker's answer to a [`LogRead`]: followed on the connection by
/// `len` raw bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogChunk {
    pub id: Uuid,
    /// The file's size when it was read.
    #[serde(default)]
    pub size: u64,
    /// The attempt is over: the file will not grow.
    #[serde(default)]
    pub done: bool,
    /// How many bytes follow the line.
    #[serde(default)]
    pub len: u64,
    /// Why nothing could be read (then `len` is 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<LogChunkError>,
}

/// A [`LogChunk`]'s failure: `not_found` (no such file on the host),
/// `bad_request`, or `io` (a read failed).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogChunkError {
    pub code: String,
    pub message: String,
}

/// A log's time index: when each part of it was written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TimeIndex {
    /// (unix milliseconds, offset): the bytes from `offset` on were
    /// written at that time or later. Ascending in both.
    pub points: Vec<(i64, u64)>,
    /// The attempt ended at this time with the log this long.
    pub end: Option<(i64, u64)>,
}

impl TimeIndex {
    /// One point's line.
    pub fn point_line(at_ms: i64, offset: u64) -> String {
        format!("{at_ms} {offset}\n")
    }

    /// The closing line.
    pub fn end_line(at_ms: i64, size: u64) -> String {
        format!("end {at_ms} {size}\n")
    }

    /// Reads an index; lines it cannot read (a write cut short) are
    /// skipped, and points out of order are dropped.
    pub fn parse(text: &[u8]) -> TimeIndex {
        let mut idx = TimeIndex::default();
        for line in text.split(|b| *b == b'\n') {
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            let mut words = line.split_ascii_whitespace();
            let (end, first) = match words.next() {
                Some("end") => (true, words.next()),
                w => (false, w),
            };
            let at = first.and_then(|w| w.parse::<i64>().ok());
            let offset = words.next().and_then(|w| w.parse::<u64>().ok());
            let (Some(at), Some(offset), None) = (at, offset, words.next()) else {
                continue;
            };
            if end {
                idx.end = Some((at, offset));
            } else if idx
                .points
                .last()
                .is_none_or(|&(a, o)| at >= a && offset >= o)
            {
                idx.points.push((at, offset));
            }
        }
        idx
    }

    /// Where the output written at `since_ms` or later starts: the offset
    /// of the last point at or before it (so up to the index's spacing,
    /// about a second, of earlier output comes too; never less). Past
    /// the last point: that point's offset — what was written after it
    /// may be later; past the end: the end.
    pub fn offset_since(&self, since_ms: i64) -> u64 {
        if let Some((at, size)) = self.end {
            if since_ms > at {
                return size;
            }
        }
        match self.points.partition_point(|&(at, _)| at <= since_ms) {
            0 => 0,
            n => self.points[n - 1].1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_line_round_trips_and_an_error_has_no_bytes() {
        let c = LogChunk {
            id: Uuid::nil(),
            size: 10,
            done: true,
            len: 4,
            error: None,
        };
        let text = serde_json::to_string(&c).unwrap();
        assert!(!text.contains("error"), "{text}");
        assert_eq!(serde_json::from_str::<LogChunk>(&text).unwrap(), c);
        let e: LogChunk = serde_json::from_str(
            r#"{"id":"00000000-0000-0000-0000-000000000000","error":{"code":"not_found","message":"no"}}"#,
        )
        .unwrap();
        assert_eq!(e.len, 0);
        assert_eq!(e.error.unwrap().code, "not_found");
        let r = LogRead {
            id: Uuid::nil(),
            run_id: Uuid::nil(),
            attempt: 2,
            file: LogFile::Transcript,
            offset: 0,
            limit: LOG_CHUNK_MAX,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""file":"transcript""#), "{text}");
        assert_eq!(serde_json::from_str::<LogRead>(&text).unwrap(), r);
        assert_eq!(LogFile::Transcript.file_name(2), "2.transcript.jsonl");
        assert_eq!(LogFile::Index.file_name(1), "1.log.idx");
    }

    #[test]
    fn since_finds_the_last_point_at_or_before_it() {
        let mut text = String::new();
        for (at, off) in [(1000, 0), (2000, 10), (3500, 25)] {
            text.push_str(&TimeIndex::point_line(at, off));
        }
        // A line cut short by a crash, and one out of order: skipped.
        text.push_str("4000 3\n4");
        let idx = TimeIndex::parse(text.as_bytes());
        assert_eq!(idx.points, vec![(1000, 0), (2000, 10), (3500, 25)]);
        assert_eq!(idx.end, None);
        assert_eq!(idx.offset_since(0), 0);
        assert_eq!(idx.offset_since(1000), 0);
        assert_eq!(idx.offset_since(1999), 0);
        assert_eq!(idx.offset_since(2000), 10);
        assert_eq!(idx.offset_since(3000), 10);
        assert_eq!(idx.offset_since(9000), 25);
        let ended = format!("{text}\n{}", TimeIndex::end_line(5000, 40));
        let idx = TimeIndex::parse(ended.as_bytes());
        assert_eq!(idx.end, Some((5000, 40)));
        assert_eq!(idx.offset_since(4999), 25);
        assert_eq!(idx.offset_since(5001), 40);
        assert_eq!(TimeIndex::parse(b"").offset_since(5), 0);
    }
}
