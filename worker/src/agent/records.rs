//! The worker's own record of its sessions, in `<data_dir>/sessions/`:
//!
//! * `<session>.json` — the run and attempt this worker started (or
//!   adopted) in that session. Written *before* the session is created, so
//!   a crash right after a spawn never starts the attempt a second time.
//! * `<session>.signals` — the ids of the operator signals delivered to
//!   that attempt, one per line.
//!
//! # Guarantees
//!
//! * A record never vouches for a live session on its own: the session's
//!   tag (see [`crate::tmux::SessionTag`]) says which attempt it runs, and a
//!   live session counts as this worker's only when tag and record agree.
//!   The record answers what the tag cannot: whether this worker already
//!   started an attempt whose session is gone.
//! * Delivered-signal ids belong to one attempt: recording a different
//!   (run, attempt) for a session name drops the ids of the one before.

use std::collections::HashSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::tmux::SessionTag;

fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("sessions")
}

fn record_path(data_dir: &Path, session: &str) -> PathBuf {
    dir(data_dir).join(format!("{session}.json"))
}

fn signals_path(data_dir: &Path, session: &str) -> PathBuf {
    dir(data_dir).join(format!("{session}.signals"))
}

/// Creates the records directory.
pub(super) fn create_dir(data_dir: &Path) -> std::io::Result<()> {
    crate::private::dir(&dir(data_dir))
}

/// The (run, attempt) recorded for `session`.
pub(super) fn read(data_dir: &Path, session: &str) -> Option<SessionTag> {
    let bytes = std::fs::read(record_path(data_dir, session)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Records that `session` runs `tag` (atomically: write, then rename).
pub(super) fn write(data_dir: &Path, session: &str, tag: SessionTag) -> std::io::Result<()> {
    if read(data_dir, session).is_some_and(|old| old != tag) {
        remove_signals(data_dir, session)?;
    }
    create_dir(data_dir)?;
    let tmp = dir(data_dir).join(format!(".{session}.tmp"));
    crate::private::write(&tmp, &serde_json::to_vec(&tag)?)?;
    std::fs::rename(tmp, record_path(data_dir, session))
}

/// Forgets `session` (its record and delivered signals).
pub(super) fn remove(data_dir: &Path, session: &str) {
    let _ = std::fs::remove_file(record_path(data_dir, session));
    let _ = remove_signals(data_dir, session);
}

fn remove_signals(data_dir: &Path, session: &str) -> std::io::Result<()> {
    match std::fs::remove_file(signals_path(data_dir, session)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// The session names that have a record or delivered signals.
pub(super) fn names(data_dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(dir(data_dir)) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let session = name
                .strip_suffix(".json")
                .or_else(|| name.strip_suffix(".signals"))?;
            (!session.starts_with('.')).then(|| session.to_string())
        })
        .collect()
}

/// The ids of the operator signals delivered to `session`'s attempt.
pub(super) fn delivered(data_dir: &Path, session: &str) -> HashSet<i64> {
    std::fs::read_to_string(signals_path(data_dir, session))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Records that signal `id` was delivered to `session`'s attempt.
pub(super) fn record_delivered(data_dir: &Path, session: &str, id: i64) -> std::io::Result<()> {
    create_dir(data_dir)?;
    let mut f = crate::private::file()
        .create(true)
        .append(true)
        .open(signals_path(data_dir, session))?;
    writeln!(f, "{id}")?;
    f.sync_data()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;
    use uuid::Uuid;

    #[test]
    fn a_new_attempt_does_not_inherit_the_old_ones_delivered_signals() {
        let d = TestDir::new("records");
        let run = Uuid::new_v4();
        let a1 = SessionTag {
            run_id: run,
            attempt: 1,
        };
        write(d.path(), "pam-1", a1).unwrap();
        record_delivered(d.path(), "pam-1", 7).unwrap();
        write(d.path(), "pam-1", a1).unwrap();
        assert_eq!(
            delivered(d.path(), "pam-1"),
            HashSet::from([7]),
            "same attempt keeps them"
        );
        let a2 = SessionTag { attempt: 2, ..a1 };
        write(d.path(), "pam-1", a2).unwrap();
        assert_eq!(read(d.path(), "pam-1"), Some(a2));
        assert!(delivered(d.path(), "pam-1").is_empty());
        assert_eq!(names(d.path()), ["pam-1"]);
        remove(d.path(), "pam-1");
        assert_eq!(read(d.path(), "pam-1"), None);
        assert!(names(d.path()).is_empty());
    }

    #[test]
    fn records_written_before_tags_existed_still_read() {
        let d = TestDir::new("records");
        create_dir(d.path()).unwrap();
        let run = Uuid::new_v4();
        std::fs::write(
            record_path(d.path(), "pam-1"),
            format!(r#"{{"run_id":"{run}","attempt":3}}"#),
        )
        .unwrap();
        assert_eq!(
            read(d.path(), "pam-1"),
            Some(SessionTag {
                run_id: run,
                attempt: 3
            })
        );
    }
}
