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

use pam_manifests::protocol::TokenUsage;
use serde_json::Value;

use super::{str_at, summarize, u64_at, FinalResult, LineEvent, ProgressItem};

pub(super) fn parse(v: &Value) -> LineEvent {
    let ty = str_at(v, "type").unwrap_or("");
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
        return LineEvent::Final(FinalResult {
            success: !failed,
            summary: summarize(
                &format!(
                    "{}: {}",
                    if status.is_empty() { ty } else { &status },
                    str_at(v, "text").unwrap_or("")
                ),
                200,
            ),
            usage: usage(v),
        });
    }
    if ty.is_empty() {
        return LineEvent::Unstructured;
    }
    if ty.contains("delta") || ty.contains("chunk") {
        return LineEvent::Quiet;
    }
    let detail = str_at(v, "text")
        .or_else(|| str_at(v, "content"))
        .or_else(|| str_at(v, "name"))
        .unwrap_or("");
    LineEvent::Progress(ProgressItem {
        summary: summarize(&format!("{ty} {detail}"), 200),
        usage: usage(v),
    })
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
        cost_usd: None,
        by_model: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use crate::providers::{parse_line, LineEvent, ProviderKind};

    fn p(line: &str) -> LineEvent {
        parse_line(ProviderKind::Grok, line)
    }

    #[test]
    fn best_effort_shapes() {
        assert!(
            matches!(p(r#"{"type":"tool_call","name":"bash"}"#), LineEvent::Progress(i) if i.summary == "tool_call bash")
        );
        assert_eq!(p(r#"{"type":"text_delta","text":"He"}"#), LineEvent::Quiet);
        assert_eq!(p(r#"{"foo":1}"#), LineEvent::Unstructured);
        let LineEvent::Final(f) =
            p(r#"{"text":"final response text","stopReason":"EndTurn","sessionId":"019f"}"#)
        else {
            panic!()
        };
        assert!(f.success);
        let LineEvent::Final(f) = p(r#"{"text":"","stopReason":"Cancelled","sessionId":"019f"}"#)
        else {
            panic!()
        };
        assert!(!f.success);
    }
}
