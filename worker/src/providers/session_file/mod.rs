//! The usage Codex and Gemini keep in their session files while they
//! run: their structured streams report usage only at the very end
//! (`turn.completed`, the `result` line), so a live or stopped run would
//! show none (captures in `captures/{codex,gemini}/session-*`).
//!
//! - Codex: `$CODEX_HOME` (default `~/.codex`)
//!   `/sessions/YYYY/MM/DD/rollout-<time>-<thread_id>.jsonl` (dates in local
//!   time, so found by glob): one `token_usage_record` per model response
//!   `{response_id, usage: {input_tokens (cached included),
//!   cached_input_tokens, output_tokens}}`, written when the response
//!   completes; the model is the last `turn_context`'s.
//! - Gemini: `$GEMINI_CLI_HOME` or `$HOME` `/.gemini/tmp/<dir>/chats/session-<time>-<first 8 of
//!   the session id>.jsonl`, its first line naming the whole `sessionId`:
//!   one `gemini` message per response `{id, tokens: {input (cached
//!   included), output, cached, thoughts}, model}`, written again whole
//!   when it changes (also inside `{"$set": {"messages": […]}}`).
//!
//! Each response is a [`UsageReport::Call`] by its id, so a record read
//! twice (or rewritten) counts once. Records older than the attempt (a
//! resumed session's earlier runs) are skipped.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use pam_manifests::protocol::TokenUsage;
use serde_json::Value;

use super::stream::{str_at, u64_at, UsageReport};
use super::ProviderKind;

/// Most bytes read from a session file per poll (they are small; a huge
/// one is read on, a chunk at a time).
const READ_MAX: u64 = 4 << 20;

/// Follows one attempt's session file.
#[derive(Debug)]
pub struct SessionFile {
    kind: ProviderKind,
    /// Where to look for it (the CLI's home of session files).
    root: PathBuf,
    session_id: String,
    /// Records before this belong to an earlier run of the session.
    since: DateTime<Utc>,
    path: Option<PathBuf>,
    offset: u64,
    /// An unfinished last line, kept for the next read.
    partial: Vec<u8>,
    /// Codex: the model of the turn under way.
    model: Option<String>,
}

impl SessionFile {
    /// The session file of `kind`'s session `session_id`, for a CLI whose
    /// environment is `env` (over the worker's own), begun at `since`;
    /// `None` for a provider without one.
    pub fn new(
        kind: ProviderKind,
        env: &BTreeMap<String, String>,
        session_id: &str,
        since: DateTime<Utc>,
    ) -> Option<SessionFile> {
        if !matches!(kind, ProviderKind::Codex | ProviderKind::Gemini) {
            return None;
        }
        let var = |k: &str| {
            env.get(k)
                .cloned()
                .or_else(|| std::env::var(k).ok())
                .filter(|v| !v.is_empty())
        };
        let home = var("HOME").map(PathBuf::from);
        let root = match kind {
            ProviderKind::Codex => var("CODEX_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".codex")))?
                .join("sessions"),
            ProviderKind::Gemini => var("GEMINI_CLI_HOME")
                .map(PathBuf::from)
                .or(home)?
                .join(".gemini")
                .join("tmp"),
            _ => return None,
        };
        // The id names a file: nothing that could leave the root.
        if session_id.is_empty()
            || !session_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return None;
        }
        Some(SessionFile {
            kind,
            root,
            session_id: session_id.to_string(),
            since,
            path: None,
            offset: 0,
            partial: Vec::new(),
            model: None,
        })
    }

    /// The usage records written since the last poll.
    pub fn poll(&mut self) -> Vec<UsageReport> {
        if self.path.is_none() {
            self.path = self.find();
        }
        let Some(path) = self.path.clone() else {
            return Vec::new();
        };
        let mut reports = Vec::new();
        for line in self.read_lines(&path) {
            let Ok(v) = serde_json::from_slice::<Value>(&line) else {
                continue;
            };
            self.record(&v, &mut reports);
        }
        reports
    }

    /// The file, once the CLI made it.
    fn find(&self) -> Option<PathBuf> {
        match self.kind {
            ProviderKind::Codex => {
                let suffix = format!("-{}.jsonl", self.session_id);
                files_at_depth(&self.root, 3).into_iter().find(|p| {
                    name_of(p).is_some_and(|n| n.starts_with("rollout-") && n.ends_with(&suffix))
                })
            }
            ProviderKind::Gemini => {
                let short = self.session_id.get(..8)?;
                let suffix = format!("-{short}.jsonl");
                files_at_depth(&self.root, 2).into_iter().find(|p| {
                    p.parent().and_then(Path::file_name) == Some("chats".as_ref())
                        && name_of(p)
                            .is_some_and(|n| n.starts_with("session-") && n.ends_with(&suffix))
                        && first_line_names(p, &self.session_id)
                })
            }
            _ => None,
        }
    }

    fn read_lines(&mut self, path: &Path) -> Vec<Vec<u8>> {
        let Ok(mut f) = std::fs::File::open(path) else {
            return Vec::new();
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut buf = Vec::new();
        let Ok(n) = f.take(READ_MAX).read_to_end(&mut buf) else {
            return Vec::new();
        };
        self.offset += n as u64;
        self.partial.extend_from_slice(&buf);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Vec::new();
        };
        let rest = self.partial.split_off(last + 1);
        let done = std::mem::replace(&mut self.partial, rest);
        done.split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(<[u8]>::to_vec)
            .collect()
    }

    fn record(&mut self, v: &Value, out: &mut Vec<UsageReport>) {
        match self.kind {
            ProviderKind::Codex => match str_at(v, "type") {
                Some("turn_context") => {
                    self.model = v
                        .pointer("/payload/model")
                        .and_then(Value::as_str)
                        .map(str::to_string);
                }
                Some("token_usage_record") if self.current(v) => {
                    let p = v.get("payload").unwrap_or(&Value::Null);
                    let (Some(id), Some(u)) = (str_at(p, "response_id"), p.get("usage")) else {
                        return;
                    };
                    out.push(UsageReport::Call {
                        id: id.to_string(),
                        usage: TokenUsage {
                            input_tokens: u64_at(u, "input_tokens").unwrap_or(0),
                            cached_input_tokens: u64_at(u, "cached_input_tokens").unwrap_or(0),
                            output_tokens: u64_at(u, "output_tokens").unwrap_or(0),
                            model: self.model.clone(),
                            ..TokenUsage::default()
                        },
                    });
                }
                _ => {}
            },
            ProviderKind::Gemini => {
                let nested = v.pointer("/$set/messages").and_then(Value::as_array);
                for m in nested.map(Vec::as_slice).unwrap_or(std::slice::from_ref(v)) {
                    self.gemini_message(m, out);
                }
            }
            _ => {}
        }
    }

    fn gemini_message(&self, m: &Value, out: &mut Vec<UsageReport>) {
        if str_at(m, "type") != Some("gemini") || !self.current(m) {
            return;
        }
        let (Some(id), Some(t)) = (str_at(m, "id"), m.get("tokens")) else {
            return;
        };
        out.push(UsageReport::Call {
            id: id.to_string(),
            usage: TokenUsage {
                input_tokens: u64_at(t, "input").unwrap_or(0),
                cached_input_tokens: u64_at(t, "cached").unwrap_or(0),
                output_tokens: u64_at(t, "output").unwrap_or(0)
                    + u64_at(t, "thoughts").unwrap_or(0),
                model: str_at(m, "model").map(str::to_string),
                ..TokenUsage::default()
            },
        });
    }

    /// Whether a record is this attempt's (not from before it began).
    fn current(&self, v: &Value) -> bool {
        str_at(v, "timestamp")
            .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
            .is_none_or(|t| t.to_utc() >= self.since)
    }
}

fn name_of(p: &Path) -> Option<&str> {
    p.file_name().and_then(|n| n.to_str())
}

/// Files exactly `depth` directories below `root`.
fn files_at_depth(root: &Path, depth: usize) -> Vec<PathBuf> {
    let mut level = vec![root.to_path_buf()];
    for _ in 0..depth {
        level = level
            .iter()
            .filter_map(|d| std::fs::read_dir(d).ok())
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect();
    }
    level
        .iter()
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect()
}

/// Whether the file's first line names `session_id` (two sessions may
/// share the first 8 characters).
fn first_line_names(p: &Path, session_id: &str) -> bool {
    let Ok(f) = std::fs::File::open(p) else {
        return false;
    };
    let mut head = Vec::new();
    let _ = f.take(64 * 1024).read_to_end(&mut head);
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    serde_json::from_slice::<Value>(line)
        .ok()
        .and_then(|v| {
            v.get("sessionId")
                .and_then(Value::as_str)
                .map(|s| s == session_id)
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests;
