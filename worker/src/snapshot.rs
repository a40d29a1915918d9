//! Output snapshots: the tail of an attempt's log, for the dashboard and
//! `pamctl logs`. Read from the wrapper's log file rather than the pane, so
//! a snapshot still works after the session ended.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use pam_manifests::protocol::OutputSnapshot;
use uuid::Uuid;

use crate::run_files::log_path;

/// At most this many bytes of tail are read for `text`.
const MAX_TAIL_BYTES: u64 = 256 * 1024;

/// The last `max_lines` lines of the attempt's log, with the log's total
/// line and byte counts. A missing log is an empty snapshot.
pub fn read(
    data_dir: &Path,
    run_id: Uuid,
    attempt: i32,
    max_lines: usize,
) -> io::Result<OutputSnapshot> {
    let mut snap = OutputSnapshot {
        run_id,
        attempt,
        text: String::new(),
        lines: 0,
        bytes: 0,
    };
    let mut f = match File::open(log_path(data_dir, run_id, attempt)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(snap),
        Err(e) => return Err(e),
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        snap.bytes += n as u64;
        snap.lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
    }
    let start = snap.bytes.saturating_sub(MAX_TAIL_BYTES);
    f.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::new();
    f.take(snap.bytes - start).read_to_end(&mut tail)?;
    let text = String::from_utf8_lossy(&tail);
    let all: Vec<&str> = text.lines().collect();
    let from = all.len().saturating_sub(max_lines);
    snap.text = all[from..].join("\n");
    if !snap.text.is_empty() {
        snap.text.push('\n');
    }
    Ok(snap)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;

    #[test]
    fn tail_and_counts() {
        let d = TestDir::new("snap");
        let run = Uuid::new_v4();
        assert_eq!(read(d.path(), run, 1, 5).unwrap().bytes, 0);
        let p = log_path(d.path(), run, 1);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let body: String = (1..=10).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&p, &body).unwrap();
        let s = read(d.path(), run, 1, 3).unwrap();
        assert_eq!(s.text, "line 8\nline 9\nline 10\n");
        assert_eq!(s.lines, 10);
        assert_eq!(s.bytes, body.len() as u64);
    }
}
