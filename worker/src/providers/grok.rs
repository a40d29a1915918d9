//! Grok CLI `-p … --output-format streaming-json` — a best effort.
//!
//! xAI documents the flag and that it emits "newline-delimited JSON events",
//! and that `--output-format json` prints one object with `text`,
//! `stopReason` and `sessionId`; the streaming events' fields are not
//! documented. Assumptions, to revisit against a real grok:
//! * an object with `stopReason`, or `type` = `result`/`end`/`done`, is the
//!   final result; it failed when `stopReason`/`status` says error, failed
//!   or cancelled, or `is_error` is true;
//! * any other object with a `type` is progress, except `*delta*` and
//!   `*chunk*` types, which are quiet (one per token chunk);
//! * `usage {input_tokens|prompt_tokens, output_tokens|completion_tokens}`
//!   is read where present.
//!
//! # Permission modes
//! xAI documents no permission flags for headless mode: none are passed,
//! whatever the run's permissions say (docs/agents.md).

use pam_manifests::protocol::{Entry, EntryKind, TokenUsage};
use serde_json::Value;

use super::stream::{finish, message, str_at, u64_at, Parsed, StreamParser, UsageReport};

/// Reads one run's stream.
#[derive(Default)]
pub struct Parser {
    /// Step reports, so each counts once (a step has no id of its own).
    steps: u64,
}

impl StreamParser for Parser {
    fn line(&mut self, v: &Value, out: &mut Parsed) {
        let ty = str_at(v, "type").unwrap_or("");
        if let Some(id) = str_at(v, "sessionId").or_else(|| str_at(v, "session_id")) {
            out.session_id = Some(id.to_string());
        }
        let stop = str_at(v, "stopReason").or_else(|| str_at(v, "stop_reason"));
        if stop.is_some() || matches!(ty, "result" | "end" | "done") {
            let status = stop
                .or_else(|| str_at(v, "status"))
                .unwrap_or("")
                .to_ascii_lowercase();
            let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            let failed = is_error
                || ["error", "fail", "cancel"]
                    .iter()
                    .any(|w| status.contains(w));
            if let Some(u) = usage(v) {
                out.usage.push(UsageReport::Total(u));
            }
            let text = str_at(v, "text").unwrap_or(&status).to_string();
            finish(out, !failed, text);
            return;
        }
        if ty.is_empty() || ty.contains("delta") || ty.contains("chunk") {
            return;
        }
        if let Some(u) = usage(v) {
            self.steps += 1;
            out.usage.push(UsageReport::Call {
                id: format!("step-{}", self.steps),
                usage: u,
            });
        }
        let detail = str_at(v, "text")
            .or_else(|| str_at(v, "content"))
            .unwrap_or("");
        if ty.contains("tool") {
            let name = str_at(v, "name").unwrap_or(ty);
            out.push(Entry {
                tool: Some(name.to_string()),
                text: Some(detail.to_string()),
                ..Entry::new(EntryKind::ToolCall)
            });
        } else if ty.contains("message") && !detail.is_empty() {
            out.push(message("assistant", detail));
        }
    }
}

fn usage(v: &Value) -> Option<TokenUsage> {
    let u = v.get("usage")?;
    Some(TokenUsage {
        input_tokens: u64_at(u, "input_tokens")
            .or_else(|| u64_at(u, "prompt_tokens"))
            .unwrap_or(0),
        output_tokens: u64_at(u, "output_tokens")
            .or_else(|| u64_at(u, "completion_tokens"))
            .unwrap_or(0),
        cached_input_tokens: u64_at(u, "cached_input_tokens")
            .or_else(|| {
                u.get("prompt_tokens_details")
                    .and_then(|d| u64_at(d, "cached_tokens"))
            })
            .unwrap_or(0),
        model: str_at(v, "model").map(str::to_string),
        ..TokenUsage::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::stream::StreamParser;

    fn p(line: &str) -> Parsed {
        let mut out = Parsed::default();
        Parser::default().line(&serde_json::from_str(line).unwrap(), &mut out);
        out
    }

    #[test]
    fn best_effort_shapes() {
        let tool = p(r#"{"type":"tool_call","name":"bash"}"#);
        assert_eq!(tool.entries[0].tool.as_deref(), Some("bash"));
        assert!(p(r#"{"type":"text_delta","text":"He"}"#).is_empty());
        let f = p(r#"{"text":"final response text","stopReason":"EndTurn","sessionId":"019f"}"#);
        assert!(f.final_result.unwrap().success);
        assert_eq!(f.session_id.as_deref(), Some("019f"));
        let f = p(r#"{"text":"","stopReason":"Cancelled","sessionId":"019f"}"#);
        assert!(!f.final_result.unwrap().success);
    }
}
