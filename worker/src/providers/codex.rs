//! Codex CLI `exec --json`.
//!
//! JSONL `ThreadEvent`s tagged by `type` (openai/codex,
//! `codex-rs/exec/src/exec_events.rs`): `thread.started {thread_id}`,
//! `turn.started`, `item.started|item.updated|item.completed {item: {id,
//! type: agent_message|reasoning|command_execution|file_change|mcp_tool_call|
//! web_search|todo_list|error, …}}`, `turn.completed {usage: {input_tokens,
//! cached_input_tokens, output_tokens}}`, `turn.failed {error: {message}}`,
//! and `error {message}` (a stream error). `codex exec` runs one turn, so
//! `turn.completed` / `turn.failed` is the final result. A top-level `error`
//! is reported as progress, not as the end: codex also emits it for
//! retried stream errors, and `turn.failed` follows when it is fatal.

use pam_manifests::protocol::TokenUsage;
use serde_json::Value;

use super::{str_at, summarize, u64_at, FinalResult, LineEvent, ProgressItem};

pub(super) fn parse(v: &Value) -> LineEvent {
    match str_at(v, "type") {
        Some("item.completed") => {
            let item = v.get("item").unwrap_or(&Value::Null);
            LineEvent::Progress(ProgressItem {
                summary: item_summary(item),
                usage: None,
            })
        }
        Some("turn.completed") => LineEvent::Final(FinalResult {
            success: true,
            summary: "turn completed".into(),
            usage: v.get("usage").map(|u| TokenUsage {
                input_tokens: u64_at(u, "input_tokens").unwrap_or(0),
                cached_input_tokens: u64_at(u, "cached_input_tokens").unwrap_or(0),
                output_tokens: u64_at(u, "output_tokens").unwrap_or(0),
                model: None,
                cost_usd: None,
                by_model: Vec::new(),
            }),
        }),
        Some("turn.failed") => LineEvent::Final(FinalResult {
            success: false,
            summary: summarize(
                &format!(
                    "turn failed: {}",
                    v.get("error")
                        .and_then(|e| str_at(e, "message"))
                        .unwrap_or("?")
                ),
                200,
            ),
            usage: None,
        }),
        Some("error") => LineEvent::Progress(ProgressItem {
            summary: summarize(
                &format!("error: {}", str_at(v, "message").unwrap_or("?")),
                200,
            ),
            usage: None,
        }),
        Some(_) => LineEvent::Quiet,
        None => LineEvent::Unstructured,
    }
}

fn item_summary(item: &Value) -> String {
    let kind = str_at(item, "type").unwrap_or("item");
    let detail = match kind {
        "agent_message" | "reasoning" | "plan" => str_at(item, "text").map(str::to_string),
        "command_execution" => {
            str_at(item, "command").map(|c| match item.get("exit_code").and_then(Value::as_i64) {
                Some(code) => format!("{c} (exit {code})"),
                None => c.to_string(),
            })
        }
        "mcp_tool_call" => str_at(item, "tool").map(str::to_string),
        "web_search" => str_at(item, "query").map(str::to_string),
        "error" => str_at(item, "message").map(str::to_string),
        "file_change" => item.get("changes").and_then(Value::as_array).map(|c| {
            c.iter()
                .filter_map(|ch| str_at(ch, "path"))
                .collect::<Vec<_>>()
                .join(", ")
        }),
        _ => None,
    };
    match detail {
        Some(d) => summarize(&format!("{kind}: {d}"), 200),
        None => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use crate::providers::{parse_line, LineEvent, ProviderKind};

    fn p(line: &str) -> LineEvent {
        parse_line(ProviderKind::Codex, line)
    }

    #[test]
    fn lifecycle_events() {
        assert_eq!(
            p(r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}"#),
            LineEvent::Quiet
        );
        assert_eq!(p(r#"{"type":"turn.started"}"#), LineEvent::Quiet);
        assert_eq!(
            p(
                r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#
            ),
            LineEvent::Quiet
        );
        let LineEvent::Progress(i) = p(
            r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"a\nb\n","exit_code":0,"status":"completed"}}"#,
        ) else {
            panic!()
        };
        assert_eq!(i.summary, "command_execution: bash -lc ls (exit 0)");
        let LineEvent::Progress(i) = p(
            r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Repo contains docs."}}"#,
        ) else {
            panic!()
        };
        assert_eq!(i.summary, "agent_message: Repo contains docs.");
    }

    #[test]
    fn turn_completed_and_failed_are_final() {
        let LineEvent::Final(f) = p(
            r#"{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}"#,
        ) else {
            panic!()
        };
        assert!(f.success);
        let u = f.usage.unwrap();
        assert_eq!(
            (u.input_tokens, u.cached_input_tokens, u.output_tokens),
            (24763, 24448, 122)
        );
        let LineEvent::Final(f) =
            p(r#"{"type":"turn.failed","error":{"message":"stream disconnected"}}"#)
        else {
            panic!()
        };
        assert!(!f.success);
        assert_eq!(f.summary, "turn failed: stream disconnected");
        assert!(matches!(
            p(r#"{"type":"error","message":"Reconnecting... 1/5"}"#),
            LineEvent::Progress(_)
        ));
    }
}
