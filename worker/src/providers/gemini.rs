//! Gemini CLI `-p … --output-format stream-json`.
//!
//! JSONL events (google-gemini/gemini-cli, `packages/core/src/output/types.ts`,
//! `JsonStreamEventType`), each with `type` and `timestamp`:
//! `init {session_id, model}`, `message {role: user|assistant, content,
//! delta?}`, `tool_use {tool_name, tool_id, parameters}`, `tool_result
//! {tool_id, status: success|error, output?, error?}`, `error {severity:
//! warning|error, message}` (non-fatal), and last `result {status:
//! success|error, error?, stats?: {total_tokens, input_tokens, output_tokens,
//! cached, input, duration_ms, tool_calls}}`.
//!
//! Progress: assistant messages that are not deltas, tool uses, tool results
//! and error events. Streamed `delta: true` chunks are quiet, or a long
//! answer would become one signal per token chunk.

use pam_manifests::protocol::TokenUsage;
use serde_json::Value;

use super::{str_at, summarize, u64_at, FinalResult, LineEvent, ProgressItem};

pub(super) fn parse(v: &Value) -> LineEvent {
    let progress = |summary: String| {
        LineEvent::Progress(ProgressItem {
            summary: summarize(&summary, 200),
            usage: None,
        })
    };
    match str_at(v, "type") {
        Some("message") => {
            let delta = v.get("delta").and_then(Value::as_bool).unwrap_or(false);
            if str_at(v, "role") == Some("assistant") && !delta {
                progress(
                    str_at(v, "content")
                        .unwrap_or("assistant message")
                        .to_string(),
                )
            } else {
                LineEvent::Quiet
            }
        }
        Some("tool_use") => progress(format!("tool {}", str_at(v, "tool_name").unwrap_or("?"))),
        Some("tool_result") => progress(format!(
            "tool result {}",
            str_at(v, "status").unwrap_or("?")
        )),
        Some("error") => progress(format!(
            "{}: {}",
            str_at(v, "severity").unwrap_or("error"),
            str_at(v, "message").unwrap_or("?")
        )),
        Some("result") => {
            let success = str_at(v, "status") == Some("success");
            let summary = match v.get("error").and_then(|e| str_at(e, "message")) {
                Some(m) => format!("error: {m}"),
                None => str_at(v, "status").unwrap_or("?").to_string(),
            };
            LineEvent::Final(FinalResult {
                success,
                summary: summarize(&summary, 200),
                usage: v.get("stats").map(|s| TokenUsage {
                    input_tokens: u64_at(s, "input_tokens").unwrap_or(0),
                    cached_input_tokens: u64_at(s, "cached").unwrap_or(0),
                    output_tokens: u64_at(s, "output_tokens").unwrap_or(0),
                    model: None,
                    cost_usd: None,
                    by_model: Vec::new(),
                }),
            })
        }
        Some(_) => LineEvent::Quiet,
        None => LineEvent::Unstructured,
    }
}

#[cfg(test)]
mod tests {
    use crate::providers::{parse_line, LineEvent, ProviderKind};

    fn p(line: &str) -> LineEvent {
        parse_line(ProviderKind::Gemini, line)
    }

    #[test]
    fn events() {
        assert_eq!(
            p(
                r#"{"type":"init","timestamp":"2025-10-10T12:00:00.000Z","session_id":"abc123","model":"gemini-2.5-flash"}"#
            ),
            LineEvent::Quiet
        );
        assert_eq!(
            p(
                r#"{"type":"message","timestamp":"2025-10-10T12:00:01.000Z","role":"user","content":"List files"}"#
            ),
            LineEvent::Quiet
        );
        assert_eq!(
            p(r#"{"type":"message","role":"assistant","content":"Here","delta":true}"#),
            LineEvent::Quiet
        );
        let LineEvent::Progress(i) = p(
            r#"{"type":"tool_use","timestamp":"2025-10-10T12:00:02.000Z","tool_name":"Bash","tool_id":"bash-123","parameters":{"command":"ls -la"}}"#,
        ) else {
            panic!()
        };
        assert_eq!(i.summary, "tool Bash");
        let LineEvent::Progress(i) = p(
            r#"{"type":"tool_result","timestamp":"2025-10-10T12:00:03.000Z","tool_id":"bash-123","status":"success","output":"file1.txt"}"#,
        ) else {
            panic!()
        };
        assert_eq!(i.summary, "tool result success");
        assert!(matches!(
            p(r#"{"type":"message","role":"assistant","content":"Here are the files."}"#),
            LineEvent::Progress(_)
        ));
    }

    #[test]
    fn result() {
        let LineEvent::Final(f) = p(
            r#"{"type":"result","timestamp":"2025-10-10T12:00:05.000Z","status":"success","stats":{"total_tokens":250,"input_tokens":50,"output_tokens":200,"cached":0,"input":50,"duration_ms":3000,"tool_calls":1}}"#,
        ) else {
            panic!()
        };
        assert!(f.success);
        let u = f.usage.unwrap();
        assert_eq!((u.input_tokens, u.output_tokens), (50, 200));
        let LineEvent::Final(f) = p(
            r#"{"type":"result","status":"error","error":{"type":"FatalTurnLimitedError","message":"turn limit"}}"#,
        ) else {
            panic!()
        };
        assert!(!f.success);
        assert_eq!(f.summary, "error: turn limit");
    }
}
