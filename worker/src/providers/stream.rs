//! What a provider's output means, in one shape for every provider: the
//! transcript entries a line adds, the session id, usage reports and the
//! final result ([`Parsed`]), read by a per-run [`StreamParser`] (claude's
//! usage and denials need what earlier lines said).

use pam_manifests::protocol::{Entry, EntryKind, TokenUsage, TRANSCRIPT_TEXT_MAX_BYTES};
use serde_json::Value;

/// What one line of provider output says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    /// Transcript entries, in order (whole texts, bounded).
    pub entries: Vec<Entry>,
    /// The provider's session id, when the line names it.
    pub session_id: Option<String>,
    /// Usage reports, in order.
    pub usage: Vec<UsageReport>,
    /// The provider's final result, on its last line.
    pub final_result: Option<FinalResult>,
}

impl Parsed {
    /// Adds an entry.
    pub fn push(&mut self, e: Entry) {
        self.entries.push(e);
    }

    /// Whether the line said anything at all.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
            && self.session_id.is_none()
            && self.usage.is_empty()
            && self.final_result.is_none()
    }
}

/// Usage as a provider reports it; [`super::meter::UsageMeter`] turns
/// reports into the attempt's usage so far, counting each call once.
#[derive(Debug, Clone, PartialEq)]
pub enum UsageReport {
    /// One model call's usage so far, by the call's id: a later report of
    /// the same id (claude repeats it on every content block, and its
    /// final `message_delta` has the true output count) updates it, never
    /// adds to it.
    Call { id: String, usage: TokenUsage },
    /// A whole turn's usage (codex's `turn.completed`): added.
    Turn(TokenUsage),
    /// The attempt's totals (claude's and gemini's result line): they
    /// replace everything counted before.
    Total(TokenUsage),
}

/// The provider's final result line.
#[derive(Debug, Clone, PartialEq)]
pub struct FinalResult {
    /// Whether the provider reports success.
    pub success: bool,
    /// Its final text: the answer, or the error.
    pub text: String,
}

/// Reads one provider's output lines, keeping what later lines need.
pub trait StreamParser: Send {
    /// One stdout line that is a JSON object.
    fn line(&mut self, v: &Value, out: &mut Parsed);
    /// One stderr line (the provider's log); most say nothing to pam.
    fn stderr_line(&mut self, _line: &str, _out: &mut Parsed) {}
    /// The output ended: anything held back (a message still streaming).
    fn finish(&mut self, _out: &mut Parsed) {}
}

/// The provider's final result: a failure's words as an error entry (the
/// run's last activity), the result entry, and [`Parsed::final_result`].
pub fn finish(out: &mut Parsed, success: bool, text: String) {
    if !success {
        out.push(text_entry(EntryKind::Error, &text));
    }
    out.push(Entry {
        ok: Some(success),
        ..text_entry(EntryKind::Result, &text)
    });
    out.final_result = Some(FinalResult { success, text });
}

/// `s` bounded for a transcript entry.
pub fn bounded(s: &str) -> String {
    pam_manifests::protocol::truncate_message(s, TRANSCRIPT_TEXT_MAX_BYTES)
}

/// A message entry.
pub fn message(role: &str, text: &str) -> Entry {
    Entry {
        role: Some(role.into()),
        text: Some(bounded(text)),
        ..Entry::new(EntryKind::Message)
    }
}

/// An entry of `kind` with `text`.
pub fn text_entry(kind: EntryKind, text: &str) -> Entry {
    Entry {
        text: Some(bounded(text)),
        ..Entry::new(kind)
    }
}

/// A tool call: the tool, what it acts on, its input summarized.
pub fn tool_call(tool: &str, call_id: Option<&str>, input: &Value) -> Entry {
    Entry {
        tool: Some(tool.to_string()),
        target: target_of(input),
        text: Some(bounded(&input_summary(input))),
        call_id: call_id.map(str::to_string),
        ..Entry::new(EntryKind::ToolCall)
    }
}

/// A tool call's result.
pub fn tool_result(tool: Option<&str>, call_id: Option<&str>, ok: bool, output: &str) -> Entry {
    Entry {
        tool: tool.map(str::to_string),
        call_id: call_id.map(str::to_string),
        ok: Some(ok),
        text: Some(bounded(output)),
        ..Entry::new(EntryKind::ToolResult)
    }
}

/// A refused tool call.
pub fn denied(tool: &str, target: Option<String>, why: &str) -> Entry {
    Entry {
        tool: Some(tool.to_string()),
        target,
        text: Some(bounded(why)),
        ..Entry::new(EntryKind::Denied)
    }
}

/// What a tool's input acts on: the first of the fields the providers'
/// tools name it by (a file, a command, an address, a pattern).
pub fn target_of(input: &Value) -> Option<String> {
    const FIELDS: [&str; 9] = [
        "file_path",
        "path",
        "notebook_path",
        "command",
        "cmd",
        "url",
        "pattern",
        "query",
        "description",
    ];
    FIELDS
        .iter()
        .find_map(|f| input.get(f).and_then(Value::as_str))
        .map(|t| pam_manifests::protocol::one_line(t, 1000))
}

/// A tool input as compact JSON, long string values cut (a file's whole
/// content is the worktree's business, not the transcript's).
pub fn input_summary(input: &Value) -> String {
    fn cut(v: &Value) -> Value {
        match v {
            Value::String(s) if s.len() > 2000 => {
                Value::String(pam_manifests::protocol::truncate_message(s, 2000))
            }
            Value::Array(a) => Value::Array(a.iter().map(cut).collect()),
            Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), cut(v))).collect()),
            other => other.clone(),
        }
    }
    cut(input).to_string()
}

/// A tool result's content as text: a string, or the text parts of a
/// content array.
pub fn content_text(v: Option<&Value>) -> String {
    match v {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// `v[key]` as u64, accepting integers and integral floats.
pub fn u64_at(v: &Value, key: &str) -> Option<u64> {
    let x = v.get(key)?;
    x.as_u64().or_else(|| x.as_f64().map(|f| f as u64))
}

/// `v[key]` as a string.
pub fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_tool_calls_target_is_its_file_or_command() {
        assert_eq!(
            target_of(&json!({"file_path": "/w/a.rs", "content": "x"})).as_deref(),
            Some("/w/a.rs")
        );
        assert_eq!(
            target_of(&json!({"command": "cargo\n test"})).as_deref(),
            Some("cargo test")
        );
        assert_eq!(target_of(&json!({"other": 1})), None);
    }

    #[test]
    fn input_summaries_cut_long_strings() {
        let s = input_summary(&json!({"content": "x".repeat(5000), "n": 1}));
        assert!(s.len() < 2100, "{}", s.len());
        assert!(s.contains("\"n\":1"));
    }

    #[test]
    fn content_is_a_string_or_text_parts() {
        assert_eq!(content_text(Some(&json!("ok"))), "ok");
        assert_eq!(
            content_text(Some(
                &json!([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
            )),
            "a\nb"
        );
    }
}
