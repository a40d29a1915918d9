//! Serving pamd's reads of this host's run logs and transcripts over the
//! watch ([`pam_manifests::protocol::LogRead`], docs/api.md, "Worker
//! watch"), and removing old ones (`[logs] retain_days`).
//!
//! A read names a run, an attempt and one of its files; the path is built
//! from those typed values under `<data_dir>/runs/`, so a request cannot
//! reach any other file. The answer is a [`LogChunk`] line and the bytes:
//! at most [`LOG_CHUNK_MAX`], read at the offset, with the file's size and
//! whether the attempt is over:
//!
//! - the time index ends with `end` (the wrapper wrote it as it exited),
//!   or
//! - no session of this worker runs the attempt and its log has not
//!   changed for [`QUIET`] (a wrapper killed outright writes no `end`).

use std::collections::HashSet;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use pam_manifests::protocol::{
    LogChunk, LogChunkError, LogFile, LogRead, WatchRequest, LOG_CHUNK_MAX,
};
use uuid::Uuid;

use crate::run_files::run_dir;

/// A log untouched this long, with no session of its attempt, is done.
pub const QUIET: Duration = Duration::from_secs(10);

/// The answer to `req`: its [`LogChunk`] line, then its bytes. `live`:
/// a session of this worker runs the attempt.
pub(super) fn answer(data_dir: &Path, req: &LogRead, live: bool) -> Vec<u8> {
    let (mut chunk, bytes) = match read(data_dir, req, live) {
        Ok(r) => r,
        Err(error) => (
            LogChunk {
                id: req.id,
                size: 0,
                done: false,
                len: 0,
                error: Some(error),
            },
            Vec::new(),
        ),
    };
    chunk.len = bytes.len() as u64;
    let mut out = serde_json::to_vec(&WatchRequest::LogChunk(chunk)).expect("a chunk serializes");
    out.push(b'\n');
    out.extend_from_slice(&bytes);
    out
}

fn read(data_dir: &Path, req: &LogRead, live: bool) -> Result<(LogChunk, Vec<u8>), LogChunkError> {
    let dir = run_dir(data_dir, req.run_id);
    let path = dir.join(req.file.file_name(req.attempt));
    let file = std::fs::File::open(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => LogChunkError {
            code: "not_found".into(),
            message: format!(
                "this host has no {} of run {} attempt {}",
                req.file.noun(),
                req.run_id,
                req.attempt
            ),
        },
        _ => io_error(&e),
    })?;
    let size = file.metadata().map_err(|e| io_error(&e))?.len();
    let want = req
        .limit
        .min(LOG_CHUNK_MAX)
        .min(size.saturating_sub(req.offset));
    let mut bytes = vec![0; want as usize];
    let mut got = 0;
    while got < bytes.len() {
        match file.read_at(&mut bytes[got..], req.offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_error(&e)),
        }
    }
    bytes.truncate(got);
    let done = attempt_over(&dir, req.attempt, live);
    let chunk = LogChunk {
        id: req.id,
        size,
        done,
        len: 0,
        error: None,
    };
    Ok((chunk, bytes))
}

fn io_error(e: &std::io::Error) -> LogChunkError {
    LogChunkError {
        code: "io".into(),
        message: format!("the worker could not read the file: {e}"),
    }
}

/// The attempt's files will not grow (see the module doc).
fn attempt_over(dir: &Path, attempt: i32, live: bool) -> bool {
    if index_ended(&dir.join(LogFile::Index.file_name(attempt))) {
        return true;
    }
    if live {
        return false;
    }
    let quiet = |p: PathBuf| {
        std::fs::metadata(p)
            .and_then(|m| m.modified())
            .map(|t| t.elapsed().unwrap_or_default() >= QUIET)
            .unwrap_or(true)
    };
    quiet(dir.join(LogFile::Log.file_name(attempt)))
        && quiet(dir.join(LogFile::Transcript.file_name(attempt)))
}

/// The index's last line is its `end`.
fn index_ended(path: &Path) -> bool {
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    let len = f.metadata().map_or(0, |m| m.len());
    let tail = len.saturating_sub(64);
    let mut buf = Vec::new();
    if std::io::Seek::seek(&mut f, std::io::SeekFrom::Start(tail)).is_err()
        || f.read_to_end(&mut buf).is_err()
    {
        return false;
    }
    let text = String::from_utf8_lossy(&buf);
    text.trim_end()
        .rsplit('\n')
        .next()
        .is_some_and(|l| l.starts_with("end "))
}

/// Removes `runs/<run_id>/` directories whose files are all older than
/// `retain` (at `now`) and whose run is not in `keep` (the desired set and
/// the live sessions); returns how many went.
pub(super) fn sweep(
    data_dir: &Path,
    retain: Duration,
    now: SystemTime,
    keep: &HashSet<Uuid>,
) -> std::io::Result<usize> {
    let Ok(entries) = std::fs::read_dir(data_dir.join("runs")) else {
        return Ok(0);
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let Ok(run) = entry.file_name().to_string_lossy().parse::<Uuid>() else {
            continue;
        };
        if keep.contains(&run) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let old = |m: std::fs::Metadata| {
            m.modified()
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age >= retain)
        };
        let all_old = std::fs::read_dir(entry.path())?
            .flatten()
            .all(|f| f.metadata().is_ok_and(old));
        if all_old && entry.metadata().is_ok_and(old) {
            std::fs::remove_dir_all(entry.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;

    fn chunk_of(out: &[u8]) -> (LogChunk, &[u8]) {
        let nl = out.iter().position(|b| *b == b'\n').unwrap();
        let WatchRequest::LogChunk(c) = serde_json::from_slice(&out[..nl]).unwrap() else {
            panic!("not a chunk");
        };
        (c, &out[nl + 1..])
    }

    fn req(run: Uuid, file: LogFile, offset: u64, limit: u64) -> LogRead {
        LogRead {
            id: Uuid::new_v4(),
            run_id: run,
            attempt: 1,
            file,
            offset,
            limit,
        }
    }

    #[test]
    fn a_read_answers_its_range_the_size_and_whether_it_is_over() {
        let dir = TestDir::new("logs-read");
        let run = Uuid::new_v4();
        let runs = run_dir(dir.path(), run);
        std::fs::create_dir_all(&runs).unwrap();
        std::fs::write(runs.join("1.log"), b"0123456789").unwrap();
        let (c, bytes) = {
            let out = answer(dir.path(), &req(run, LogFile::Log, 3, 4), true);
            let (c, b) = chunk_of(&out);
            (c, b.to_vec())
        };
        assert_eq!((c.size, c.len, c.done, c.error), (10, 4, false, None));
        assert_eq!(bytes, b"3456");
        // Past the end: no bytes, the size.
        let out = answer(dir.path(), &req(run, LogFile::Log, 50, 4), true);
        assert_eq!(chunk_of(&out).0.len, 0);
        // Over once the index ends.
        std::fs::write(runs.join("1.log.idx"), "5 0\nend 9 10\n").unwrap();
        let out = answer(dir.path(), &req(run, LogFile::Log, 0, u64::MAX), true);
        let (c, b) = chunk_of(&out);
        assert!(c.done);
        assert_eq!(b, b"0123456789");
        // No such file: a clear not_found, no bytes.
        let out = answer(dir.path(), &req(run, LogFile::Transcript, 0, 10), true);
        let (c, b) = chunk_of(&out);
        assert_eq!(c.error.unwrap().code, "not_found");
        assert!(b.is_empty());
    }

    #[test]
    fn the_sweep_removes_old_runs_not_desired() {
        let dir = TestDir::new("logs-sweep");
        let (old, kept) = (Uuid::new_v4(), Uuid::new_v4());
        for r in [old, kept] {
            std::fs::create_dir_all(run_dir(dir.path(), r)).unwrap();
            std::fs::write(run_dir(dir.path(), r).join("1.log"), b"x").unwrap();
        }
        let day = Duration::from_secs(86400);
        let keep = HashSet::from([kept]);
        let now = SystemTime::now();
        assert_eq!(sweep(dir.path(), day, now, &keep).unwrap(), 0);
        assert_eq!(sweep(dir.path(), day, now + 2 * day, &keep).unwrap(), 1);
        assert!(!run_dir(dir.path(), old).exists());
        assert!(run_dir(dir.path(), kept).exists());
    }
}
