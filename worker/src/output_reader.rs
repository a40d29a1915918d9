//! What the wrapper reads from the provider's output: stdout and stderr
//! split into lines, each read by the provider's parser
//! ([`crate::providers::StreamParser`]) into the attempt's transcript and
//! into [`Progress`] — the activity since the last report (short
//! excerpts, never a Secret value), the session id, the attempt's usage so
//! far — and, at the end, the provider's final result, its usage and the
//! words of a failure.

use std::collections::VecDeque;
use std::path::Path;

use pam_manifests::protocol::{
    Entry, EntryKind, TokenUsage, ACTIVITY_PER_SIGNAL_MAX, SIGNAL_MESSAGE_MAX_BYTES,
};

use crate::providers::meter::UsageMeter;
use crate::providers::{parse_line, FinalResult, Parsed, ProviderKind, StreamParser};
use crate::transcript::{self, Transcript};

/// A line longer than this is not parsed (it is still logged).
const MAX_LINE: usize = 16 << 20;
/// How many of the provider's last stderr lines a failure may quote.
const STDERR_KEPT: usize = 5;
/// Secret values shorter than this are not looked for (they would match
/// ordinary words).
const SECRET_MIN_LEN: usize = 6;

/// One `progress` signal's content.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    pub activity: Vec<Entry>,
    pub session_id: Option<String>,
    pub attempt_usage: Option<TokenUsage>,
}

/// Splits a byte stream into lines.
#[derive(Default)]
struct Lines {
    buf: Vec<u8>,
    /// Inside an over-long line: discard until the next newline.
    skipping: bool,
}

impl Lines {
    fn feed(&mut self, mut chunk: &[u8], mut line: impl FnMut(&str)) {
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            if !self.skipping {
                self.buf.extend_from_slice(&chunk[..i]);
                line(&String::from_utf8_lossy(&self.buf));
            }
            self.skipping = false;
            self.buf.clear();
            chunk = &chunk[i + 1..];
        }
        if !self.skipping {
            self.buf.extend_from_slice(chunk);
            if self.buf.len() > MAX_LINE {
                self.buf = Vec::new();
                self.skipping = true;
            }
        }
    }

    fn finish(&mut self, mut line: impl FnMut(&str)) {
        if !self.skipping && !self.buf.is_empty() {
            line(&String::from_utf8_lossy(&std::mem::take(&mut self.buf)));
        }
    }
}

/// Reads one attempt's output.
pub struct OutputReader {
    parser: Option<Box<dyn StreamParser>>,
    stdout: Lines,
    stderr: Lines,
    transcript: Option<Transcript>,
    meter: UsageMeter,
    session_id: Option<String>,
    session_sent: bool,
    final_result: Option<FinalResult>,
    last_error: Option<String>,
    stderr_tail: VecDeque<String>,
    /// Values that must never leave the host in an excerpt or a message:
    /// the run's environment's (its Secrets among them).
    secrets: Vec<String>,
    /// Reports not yet taken ([`OutputReader::take`]).
    pending: Vec<Progress>,
}

impl OutputReader {
    /// A reader of `provider`'s output, writing the transcript at
    /// `transcript_path` (none for exec, whose output has no structure;
    /// a transcript that cannot be opened is reported and skipped).
    pub fn new<'a>(
        provider: ProviderKind,
        transcript_path: &Path,
        secrets: impl IntoIterator<Item = &'a String>,
    ) -> OutputReader {
        let parser = provider.parser();
        let transcript = parser.as_ref().and_then(|_| {
            Transcript::open(transcript_path)
                .map_err(|e| eprintln!("pam-worker wrap: no transcript: {e:#}"))
                .ok()
        });
        OutputReader {
            parser,
            stdout: Lines::default(),
            stderr: Lines::default(),
            transcript,
            meter: UsageMeter::default(),
            session_id: None,
            session_sent: false,
            final_result: None,
            last_error: None,
            stderr_tail: VecDeque::new(),
            secrets: secrets
                .into_iter()
                .filter(|v| v.len() >= SECRET_MIN_LEN)
                .cloned()
                .collect(),
            pending: Vec::new(),
        }
    }

    /// A chunk of the provider's stdout.
    pub fn stdout(&mut self, chunk: &[u8]) {
        let mut lines = std::mem::take(&mut self.stdout);
        lines.feed(chunk, |l| self.stdout_line(l));
        self.stdout = lines;
    }

    /// A chunk of the provider's stderr.
    pub fn stderr(&mut self, chunk: &[u8]) {
        let mut lines = std::mem::take(&mut self.stderr);
        lines.feed(chunk, |l| self.stderr_line(l));
        self.stderr = lines;
    }

    /// The output ended: the last unterminated lines, what the parser held.
    pub fn finish(&mut self) {
        let mut out = std::mem::take(&mut self.stdout);
        out.finish(|l| self.stdout_line(l));
        let mut err = std::mem::take(&mut self.stderr);
        err.finish(|l| self.stderr_line(l));
        if let Some(p) = self.parser.as_mut() {
            let mut parsed = Parsed::default();
            p.finish(&mut parsed);
            self.take_parsed(parsed);
        }
    }

    /// The progress reports since the last call, each at most
    /// [`ACTIVITY_PER_SIGNAL_MAX`] items.
    pub fn take(&mut self) -> Vec<Progress> {
        std::mem::take(&mut self.pending)
    }

    /// Usage read elsewhere than the output (the CLI's session file):
    /// a progress report when it changes the attempt's usage so far.
    pub fn usage_reports(&mut self, reports: Vec<crate::providers::UsageReport>) {
        let mut changed = false;
        for r in reports {
            changed |= self.meter.report(r);
        }
        if changed {
            self.pending.push(Progress {
                attempt_usage: self.meter.so_far(),
                ..Progress::default()
            });
        }
    }

    /// The provider's final result, when it printed one.
    pub fn final_result(&self) -> Option<&FinalResult> {
        self.final_result.as_ref()
    }

    /// The attempt's usage: the provider's totals, or each call once.
    pub fn usage(&self) -> Option<TokenUsage> {
        self.meter.so_far()
    }

    /// The provider's session id, once it said it.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Why the attempt failed, in the provider's words, bounded: its
    /// failed result, else the last error it reported, else its last
    /// stderr lines. `None` when it said nothing.
    pub fn failure_words(&self) -> Option<String> {
        let words = self
            .final_result
            .as_ref()
            .filter(|f| !f.success)
            .map(|f| f.text.clone())
            .or_else(|| self.last_error.clone())
            .or_else(|| {
                (!self.stderr_tail.is_empty()).then(|| {
                    self.stderr_tail
                        .iter()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" | ")
                })
            })?;
        let words = self.redact(&words);
        Some(pam_manifests::protocol::truncate_message(
            words.trim(),
            SIGNAL_MESSAGE_MAX_BYTES,
        ))
    }

    fn stdout_line(&mut self, line: &str) {
        let Some(p) = self.parser.as_mut() else {
            return;
        };
        if let Some(parsed) = parse_line(p.as_mut(), line) {
            self.take_parsed(parsed);
        }
    }

    fn stderr_line(&mut self, line: &str) {
        let line = line.trim_end();
        if line.trim().is_empty() {
            return;
        }
        if self.stderr_tail.len() == STDERR_KEPT {
            self.stderr_tail.pop_front();
        }
        self.stderr_tail
            .push_back(pam_manifests::protocol::one_line(line, 300));
        if let Some(p) = self.parser.as_mut() {
            let mut parsed = Parsed::default();
            p.stderr_line(line, &mut parsed);
            self.take_parsed(parsed);
        }
    }

    fn take_parsed(&mut self, parsed: Parsed) {
        if parsed.is_empty() {
            return;
        }
        let at = transcript::now();
        let mut activity = Vec::new();
        for e in &parsed.entries {
            if let Some(t) = self.transcript.as_mut() {
                if let Err(err) = t.append(e, &at) {
                    eprintln!("pam-worker wrap: cannot write the transcript: {err}");
                    self.transcript = None;
                }
            }
            if e.kind == EntryKind::Error {
                self.last_error = e.text.clone();
            }
            if let Some(x) = e.excerpt() {
                activity.push(self.redacted(x));
            }
        }
        if let Some(id) = parsed.session_id {
            if self.session_id.as_deref() != Some(id.as_str()) {
                self.session_id = Some(id);
                self.session_sent = false;
            }
        }
        let mut usage_changed = false;
        for u in parsed.usage {
            usage_changed |= self.meter.report(u);
        }
        if parsed.final_result.is_some() {
            self.final_result = parsed.final_result;
        }
        let session = (!self.session_sent)
            .then(|| self.session_id.clone())
            .flatten();
        if activity.is_empty() && session.is_none() && !usage_changed {
            return;
        }
        self.session_sent = true;
        let mut chunks = activity.chunks(ACTIVITY_PER_SIGNAL_MAX);
        self.pending.push(Progress {
            activity: chunks.next().map(<[Entry]>::to_vec).unwrap_or_default(),
            session_id: session,
            attempt_usage: usage_changed.then(|| self.meter.so_far()).flatten(),
        });
        for rest in chunks {
            self.pending.push(Progress {
                activity: rest.to_vec(),
                ..Progress::default()
            });
        }
    }

    fn redacted(&self, mut e: Entry) -> Entry {
        for t in [&mut e.text, &mut e.target].into_iter().flatten() {
            *t = self.redact(t);
        }
        e
    }

    /// `text` with every Secret value of the run replaced.
    fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "[redacted]");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;

    fn reader(kind: ProviderKind, d: &TestDir, secrets: &[String]) -> OutputReader {
        OutputReader::new(kind, &d.path().join("t.jsonl"), secrets)
    }

    #[test]
    fn a_captured_claude_run_becomes_reports_and_a_transcript() {
        let d = TestDir::new("reader");
        let mut r = reader(ProviderKind::Claude, &d, &[]);
        let capture = include_str!("providers/captures/claude/two-step-partial-messages.jsonl");
        // In odd chunks, as a pipe hands them over.
        for chunk in capture.as_bytes().chunks(97) {
            r.stdout(chunk);
        }
        r.finish();
        let reports = r.take();
        assert_eq!(reports.iter().filter(|p| p.session_id.is_some()).count(), 1);
        let kinds: Vec<EntryKind> = reports
            .iter()
            .flat_map(|p| p.activity.iter().map(|e| e.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                EntryKind::Message,
                EntryKind::ToolCall,
                EntryKind::ToolResult,
                EntryKind::Message
            ]
        );
        assert!(reports
            .iter()
            .flat_map(|p| &p.activity)
            .all(|e| e.activity_problem().is_none()));
        let last_usage = reports
            .iter()
            .rev()
            .find_map(|p| p.attempt_usage.clone())
            .unwrap();
        assert_eq!(Some(last_usage), r.usage());
        assert!(r.final_result().unwrap().success);
        let transcript = std::fs::read_to_string(d.path().join("t.jsonl")).unwrap();
        assert!(transcript.lines().count() >= 6, "{transcript}");
        assert!(transcript.lines().all(|l| l.contains(r#""at":"#)));
    }

    #[test]
    fn secrets_never_leave_in_excerpts_or_failure_words() {
        let d = TestDir::new("reader-secret");
        let secret = "sk-live-0123456789".to_string();
        let mut r = reader(ProviderKind::Claude, &d, std::slice::from_ref(&secret));
        let line = format!(
            r#"{{"type":"result","subtype":"success","is_error":true,"result":"API Error: 401 bad key {secret}"}}"#
        );
        r.stdout(format!("{line}\n").as_bytes());
        r.finish();
        let words = r.failure_words().unwrap();
        assert_eq!(words, "API Error: 401 bad key [redacted]");
        let activity: Vec<String> = r
            .take()
            .into_iter()
            .flat_map(|p| p.activity)
            .filter_map(|e| e.text)
            .collect();
        assert!(
            activity.iter().all(|t| !t.contains(&secret)),
            "{activity:?}"
        );
    }

    #[test]
    fn a_silent_failure_is_told_by_its_last_stderr_lines() {
        let d = TestDir::new("reader-stderr");
        let mut r = reader(ProviderKind::Claude, &d, &[]);
        r.stderr(b"--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons\n");
        r.finish();
        assert_eq!(
            r.failure_words().as_deref(),
            Some("--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons")
        );
        assert!(r.take().is_empty());
    }

    #[test]
    fn many_items_of_one_line_are_split_into_several_reports() {
        let d = TestDir::new("reader-split");
        let mut r = reader(ProviderKind::Claude, &d, &[]);
        let blocks: Vec<String> = (0..40)
            .map(|i| format!(r#"{{"type":"text","text":"part {i}"}}"#))
            .collect();
        let line = format!(
            r#"{{"type":"assistant","message":{{"id":"m","content":[{}]}}}}"#,
            blocks.join(",")
        );
        r.stdout(format!("{line}\n").as_bytes());
        let reports = r.take();
        let sizes: Vec<usize> = reports.iter().map(|p| p.activity.len()).collect();
        assert_eq!(sizes, [16, 16, 8]);
    }

    #[test]
    fn exec_output_is_only_logged() {
        let d = TestDir::new("reader-exec");
        let mut r = reader(ProviderKind::Exec, &d, &[]);
        r.stdout(br#"{"type":"result","subtype":"success"}"#);
        r.stdout(b"\n");
        r.finish();
        assert!(r.take().is_empty() && r.final_result().is_none());
        assert!(!d.path().join("t.jsonl").exists());
    }
}
