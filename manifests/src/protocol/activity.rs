//! What an agent did, as pam-worker reads it from the provider CLI's
//! structured stream: one [`Entry`] per step. The same type is a line of
//! an attempt's normalized transcript on the worker's disk (whole texts,
//! bounded by [`TRANSCRIPT_TEXT_MAX_BYTES`]) and, cut to a short excerpt
//! ([`Entry::excerpt`]), an item of a `progress` signal's `activity`, which
//! pamd keeps the last [`ACTIVITY_KEPT`] of per attempt. Pane text and
//! transcripts never enter PostgreSQL (pam-data-model.txt, "Data
//! Retention"); activity items are small structured metadata.

use serde::{Deserialize, Serialize};

use super::TokenUsage;

/// Most characters of an activity item's `text` and `target`.
pub const ACTIVITY_TEXT_MAX_CHARS: usize = 200;
/// Most activity items one `progress` signal carries.
pub const ACTIVITY_PER_SIGNAL_MAX: usize = 16;
/// How many activity items pamd keeps per attempt (the newest).
pub const ACTIVITY_KEPT: usize = 20;
/// Longest text of one transcript entry; longer is cut, marked `…`.
pub const TRANSCRIPT_TEXT_MAX_BYTES: usize = 64 * 1024;
/// Longest tool name or tool call id.
pub const TOOL_NAME_MAX_BYTES: usize = 128;
/// Longest provider session id pamd keeps.
pub const SESSION_ID_MAX_BYTES: usize = 256;

/// What one step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// The provider's session began (`session_id`, `model`). Transcript
    /// only.
    Session,
    /// Text from the model (`role: assistant`) or the prompt
    /// (`role: user`).
    Message,
    /// The model called a tool: `tool`, `target` (the file, command or
    /// address it acts on), `text` (its input, summarized), `call_id`.
    ToolCall,
    /// A tool call's result: `ok`, `text` (an excerpt of its output),
    /// `call_id` and `tool` when known.
    ToolResult,
    /// The provider or the model API reported an error: `text`.
    Error,
    /// The provider retries a model API call: `text` says which attempt
    /// and why ("attempt 3 of 10: 500 Internal Server Error").
    Retry,
    /// A tool call the run's permissions did not allow: `tool`, `target`.
    Denied,
    /// Token usage of one model call or of the whole attempt. Transcript
    /// only (signals carry usage in their own fields).
    Usage,
    /// The provider's final result: `ok`, `text`. Transcript only.
    Result,
}

impl EntryKind {
    /// Whether a `progress` signal may carry it in `activity`.
    pub fn is_activity(self) -> bool {
        matches!(
            self,
            EntryKind::Message
                | EntryKind::ToolCall
                | EntryKind::ToolResult
                | EntryKind::Error
                | EntryKind::Retry
                | EntryKind::Denied
        )
    }

    /// The value on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            EntryKind::Session => "session",
            EntryKind::Message => "message",
            EntryKind::ToolCall => "tool_call",
            EntryKind::ToolResult => "tool_result",
            EntryKind::Error => "error",
            EntryKind::Retry => "retry",
            EntryKind::Denied => "denied",
            EntryKind::Usage => "usage",
            EntryKind::Result => "result",
        }
    }
}

/// One step of an agent's work. Fields a kind does not use are absent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Entry {
    /// What it is.
    pub kind: EntryKind,
    /// When the worker read it, RFC 3339 UTC (transcript lines; a
    /// signal's items take the signal's `at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// `assistant` or `user`, for a message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The text: a message, a tool's input summary, a result's excerpt,
    /// an error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The tool's name as the provider calls it (`Write`, `Bash`,
    /// `command_execution`, `write_file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// What the tool acts on: a file path, a command, an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The provider's id of a tool call, pairing a call with its result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// A tool result's or the final result's success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok: Option<bool>,
    /// Token usage (a `usage` entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// The provider's session id (a `session` entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The model (a `session` or `usage` entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl Entry {
    /// An entry of `kind` with nothing else set.
    pub fn new(kind: EntryKind) -> Entry {
        Entry {
            kind,
            at: None,
            role: None,
            text: None,
            tool: None,
            target: None,
            call_id: None,
            ok: None,
            usage: None,
            session_id: None,
            model: None,
        }
    }

    /// This entry as a signal's activity item: texts cut to
    /// [`ACTIVITY_TEXT_MAX_CHARS`] on one line, no time, call id, usage,
    /// session or model. `None` for kinds that are not activity.
    pub fn excerpt(&self) -> Option<Entry> {
        if !self.kind.is_activity() {
            return None;
        }
        let cut = |s: &Option<String>| s.as_deref().map(|t| one_line(t, ACTIVITY_TEXT_MAX_CHARS));
        Some(Entry {
            kind: self.kind,
            role: self.role.clone(),
            text: cut(&self.text),
            tool: self.tool.as_deref().map(|t| one_line(t, 64)),
            target: cut(&self.target),
            ok: self.ok,
            ..Entry::new(self.kind)
        })
    }

    /// Why this is not an acceptable activity item of a signal.
    pub fn activity_problem(&self) -> Option<&'static str> {
        let long =
            |s: &Option<String>, max: usize| s.as_ref().is_some_and(|t| t.chars().count() > max);
        if !self.kind.is_activity() {
            Some("activity items are message, tool_call, tool_result, error, retry or denied")
        } else if long(&self.text, ACTIVITY_TEXT_MAX_CHARS)
            || long(&self.target, ACTIVITY_TEXT_MAX_CHARS)
        {
            Some("an activity item's text or target is longer than 200 characters")
        } else if self
            .tool
            .as_ref()
            .is_some_and(|t| t.len() > TOOL_NAME_MAX_BYTES)
            || self.role.as_ref().is_some_and(|r| r.len() > 32)
        {
            Some("an activity item's tool or role is too long")
        } else if self.usage.is_some() || self.session_id.is_some() || self.call_id.is_some() {
            Some("an activity item carries no usage, session or call id")
        } else {
            None
        }
    }

    /// A short line for people: `tool Write hello.txt`, `denied Bash rm -rf x`,
    /// the message's text.
    pub fn describe(&self) -> String {
        let join = |parts: &[Option<&str>]| {
            parts
                .iter()
                .flatten()
                .copied()
                .filter(|p| !p.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let (tool, target, text) = (
            self.tool.as_deref(),
            self.target.as_deref(),
            self.text.as_deref(),
        );
        match self.kind {
            EntryKind::Message => text.unwrap_or("").to_string(),
            EntryKind::ToolCall => join(&[Some("tool"), tool, target.or(text)]),
            EntryKind::ToolResult => {
                let state = if self.ok == Some(false) {
                    "failed"
                } else {
                    "ok"
                };
                join(&[tool, Some(state), text])
            }
            EntryKind::Denied => join(&[Some("denied"), tool, target]),
            EntryKind::Error => join(&[Some("error:"), text]),
            EntryKind::Retry => join(&[Some("retrying:"), text]),
            EntryKind::Session => join(&[
                Some("session"),
                self.session_id.as_deref(),
                self.model.as_deref(),
            ]),
            EntryKind::Usage => "usage".into(),
            EntryKind::Result => join(&[
                Some(if self.ok == Some(false) {
                    "failed:"
                } else {
                    "done:"
                }),
                text,
            ]),
        }
    }
}

/// `s` on one line (runs of whitespace are one space), cut to `max`
/// characters with `…`.
pub fn one_line(s: &str, max: usize) -> String {
    let line = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut out: String = line.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_a_valid_activity_item() {
        let mut e = Entry::new(EntryKind::ToolCall);
        e.tool = Some("Write".into());
        e.target = Some("src/".repeat(100));
        e.text = Some("line\n".repeat(100));
        e.call_id = Some("toolu_1".into());
        e.at = Some("2026-12-07T00:00:00Z".into());
        let x = e.excerpt().unwrap();
        assert_eq!(x.activity_problem(), None);
        assert_eq!(
            x.target.as_ref().unwrap().chars().count(),
            ACTIVITY_TEXT_MAX_CHARS
        );
        assert!(x.text.unwrap().ends_with('…'));
        assert_eq!((x.call_id, x.at), (None, None));
        assert_eq!(Entry::new(EntryKind::Usage).excerpt(), None);
    }

    #[test]
    fn items_that_are_not_activity_or_too_big_are_named() {
        assert!(Entry::new(EntryKind::Session).activity_problem().is_some());
        let mut e = Entry::new(EntryKind::Message);
        e.text = Some("x".repeat(201));
        assert!(e.activity_problem().unwrap().contains("200"));
    }

    #[test]
    fn wire_names_are_snake_case() {
        let e = Entry::new(EntryKind::ToolResult);
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"kind":"tool_result"}"#
        );
        for k in [EntryKind::ToolCall, EntryKind::Denied, EntryKind::Retry] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }

    #[test]
    fn describe_reads_as_a_sentence_fragment() {
        let mut e = Entry::new(EntryKind::Denied);
        e.tool = Some("Bash".into());
        e.target = Some("rm -rf x".into());
        assert_eq!(e.describe(), "denied Bash rm -rf x");
    }
}
