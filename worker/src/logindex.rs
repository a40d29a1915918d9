//! The log's time index: `<attempt>.log.idx` beside `<attempt>.log`, so
//! pamd can answer `logs --since` from the worker's files
//! ([`pam_manifests::protocol::TimeIndex`] is the format).
//!
//! [`Indexed`] wraps the wrapper's log file: each write first appends a
//! point `<unix ms> <offset>` (the log's length before the write) when it
//! comes at least [`SPACING`] after the last point, so the index costs a
//! line per second of output at most (~2 MB a day of non-stop output). It
//! is dropped when the wrapper ends, and then appends `end <unix ms>
//! <size>`: the log will not grow. A wrapper killed outright (SIGKILL)
//! writes no end; the worker then judges the attempt over by its session
//! (`agent/logs.rs`).
//!
//! The index is a convenience: a write to it that fails is ignored and
//! never holds up the log.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use pam_manifests::protocol::TimeIndex;

/// The least time between two points.
pub const SPACING: Duration = Duration::from_secs(1);

/// Where the index of the log at `log_path` lives.
pub fn index_path(log_path: &Path) -> PathBuf {
    let mut p = log_path.as_os_str().to_owned();
    p.push(".idx");
    PathBuf::from(p)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// The log, with its time index kept as it is written.
pub struct Indexed {
    log: File,
    idx: Option<File>,
    /// The log's length.
    written: u64,
    last_point: Option<Instant>,
}

impl Indexed {
    /// `log` (opened to append at `log_path`) and its index, made 0600.
    pub fn new(log: File, log_path: &Path) -> Indexed {
        let written = log.metadata().map_or(0, |m| m.len());
        let idx = crate::private::file()
            .create(true)
            .append(true)
            .open(index_path(log_path))
            .ok();
        Indexed {
            log,
            idx,
            written,
            last_point: None,
        }
    }

    pub fn sync_all(&self) -> std::io::Result<()> {
        self.log.sync_all()
    }

    fn index(&mut self, line: String) {
        if let Some(f) = &mut self.idx {
            if f.write_all(line.as_bytes()).is_err() {
                self.idx = None;
            }
        }
    }
}

impl Write for Indexed {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !buf.is_empty() && self.last_point.is_none_or(|t| t.elapsed() >= SPACING) {
            self.last_point = Some(Instant::now());
            self.index(TimeIndex::point_line(now_ms(), self.written));
        }
        let n = self.log.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.log.flush()
    }
}

impl Drop for Indexed {
    fn drop(&mut self) {
        let _ = self.log.flush();
        self.index(TimeIndex::end_line(now_ms(), self.written));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn points_are_spaced_and_the_end_is_written_on_drop() {
        let dir = crate::testdir::TestDir::new("logindex");
        let path = dir.path().join("1.log");
        let open = || {
            crate::private::file()
                .create(true)
                .append(true)
                .open(&path)
                .unwrap()
        };
        let mut log = Indexed::new(open(), &path);
        log.write_all(b"one\n").unwrap();
        log.write_all(b"two\n").unwrap();
        // A second later (the clock the index reads is the wall's; the
        // spacing is measured on the monotonic one, moved back here).
        log.last_point = Some(Instant::now() - SPACING);
        log.write_all(b"three\n").unwrap();
        drop(log);
        let idx = TimeIndex::parse(&std::fs::read(index_path(&path)).unwrap());
        let offsets: Vec<u64> = idx.points.iter().map(|p| p.1).collect();
        assert_eq!(offsets, vec![0, 8]);
        assert_eq!(idx.end.map(|e| e.1), Some(14));
        assert_eq!(std::fs::read(&path).unwrap(), b"one\ntwo\nthree\n");
    }
}
