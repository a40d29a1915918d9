//! An attempt's normalized transcript: `<data_dir>/runs/<run_id>/<attempt>.transcript.jsonl`,
//! beside its raw log, one [`Entry`] per line (with its time): the prompt
//! (written by the spawn, before the provider starts), then what the
//! wrapper reads from the provider's stream. It stays on the worker's
//! disk (pam-data-model.txt, "Data Retention"); pamd fetches it on demand.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use pam_manifests::protocol::{Entry, EntryKind};
use uuid::Uuid;

/// Where the transcript of an attempt lives.
pub fn path(data_dir: &Path, run_id: Uuid, attempt: i32) -> PathBuf {
    crate::run_files::attempt_file(
        data_dir,
        run_id,
        attempt,
        pam_manifests::protocol::LogFile::Transcript,
    )
}

/// The time now, as transcripts write it.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Appends entries to one attempt's transcript.
pub struct Transcript {
    file: File,
}

impl Transcript {
    /// Opens (creating, mode 0600) the transcript at `path` for appending.
    pub fn open(path: &Path) -> anyhow::Result<Transcript> {
        crate::private::dir(path.parent().expect("a transcript path has a parent"))
            .with_context(|| format!("create {}", path.display()))?;
        let file = crate::private::file()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("open transcript {}", path.display()))?;
        Ok(Transcript { file })
    }

    /// Writes `e` as one line, stamped `at` when it has no time.
    pub fn append(&mut self, e: &Entry, at: &str) -> std::io::Result<()> {
        let mut e = e.clone();
        e.at.get_or_insert_with(|| at.to_string());
        let mut line = serde_json::to_vec(&e).expect("entries serialize");
        line.push(b'\n');
        self.file.write_all(&line)
    }
}

/// Starts an attempt's transcript with its prompt (the user's message).
pub fn start(path: &Path, prompt: &str) -> anyhow::Result<()> {
    let mut t = Transcript::open(path)?;
    let e = Entry {
        role: Some("user".into()),
        text: Some(crate::providers::stream::bounded(prompt)),
        ..Entry::new(EntryKind::Message)
    };
    t.append(&e, &now())
        .with_context(|| format!("write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;

    #[test]
    fn entries_are_lines_with_their_time() {
        let d = TestDir::new("transcript");
        let p = path(d.path(), Uuid::nil(), 2);
        start(&p, "fix the bug").unwrap();
        let mut t = Transcript::open(&p).unwrap();
        let mut e = Entry::new(EntryKind::ToolCall);
        e.tool = Some("Write".into());
        t.append(&e, "2026-12-07T00:00:00.000Z").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<Entry> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].text.as_deref(), Some("fix the bug"));
        assert_eq!(lines[0].role.as_deref(), Some("user"));
        assert_eq!(lines[1].at.as_deref(), Some("2026-12-07T00:00:00.000Z"));
        assert!(p.ends_with("runs/00000000-0000-0000-0000-000000000000/2.transcript.jsonl"));
    }
}
