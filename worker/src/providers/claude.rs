//! Claude Code `-p --output-format stream-json --verbose`.
//!
//! One JSON object per line (Claude Agent SDK message types, as documented
//! for `SDKMessage` / `SDKResultMessage`):
//! `{"type":"system","subtype":"init",…}`,
//! `{"type":"assistant","message":{"content":[…],"usage":{"input_tokens",…,"output_tokens"}},…}`,
//! `{"type":"user",…}` (tool results fed back),
//! `{"type":"stream_event",…}` (only with `--include-partial-messages`), and
//! last `{"type":"result","subtype":"success"|"error_max_turns"|"error_during_execution",
//! "is_error":bool,"usage":{…},"total_cost_usd":f64,…}`. Older builds named
//! the cost `cost_usd`; both are read.

use pam_manifests::protocol::TokenUsage;
use serde_json::Value;

use super::{str_at, summarize, u64_at, FinalResult, LineEvent, ProgressItem};

pub(super) fn parse(v: &Value) -> LineEvent {
    match str_at(v, "type") {
        Some("assistant") => {
            let msg = v.get("message").unwrap_or(&Value::Null);
            LineEvent::Progress(ProgressItem {
                summary: content_summary(msg.get("content")),
                usage: msg.get("usage").and_then(usage).map(|mut u| {
                    u.model = str_at(msg, "model").map(str::to_string);
                    u
                }),
            })
        }
        Some("result") => {
            let subtype = str_at(v, "subtype").unwrap_or("");
            let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            let success = subtype == "success" && !is_error;
            let mut u = v.get("usage").and_then(usage);
            let cost = v
                .get("total_cost_usd")
                .or_else(|| v.get("cost_usd"))
                .and_then(Value::as_f64);
            if let Some(c) = cost {
                u.get_or_insert_with(TokenUsage::default).cost_usd = Some(c);
            }
            let text = str_at(v, "result").unwrap_or(subtype);
            LineEvent::Final(FinalResult {
                success,
                summary: summarize(&format!("{subtype}: {text}"), 200),
                usage: u,
            })
        }
        Some(_) => LineEvent::Quiet,
        None => LineEvent::Unstructured,
    }
}

/// Input tokens include the cache reads and writes Claude reports apart.
fn usage(u: &Value) -> Option<TokenUsage> {
    if !u.is_object() {
        return None;
    }
    let input = u64_at(u, "input_tokens").unwrap_or(0)
        + u64_at(u, "cache_read_input_tokens").unwrap_or(0)
        + u64_at(u, "cache_creation_input_tokens").unwrap_or(0);
    Some(TokenUsage {
        input_tokens: input,
        cached_input_tokens: u64_at(u, "cache_read_input_tokens").unwrap_or(0),
        output_tokens: u64_at(u, "output_tokens").unwrap_or(0),
        model: None,
        cost_usd: None,
        by_model: Vec::new(),
    })
}

fn content_summary(content: Option<&Value>) -> String {
    let blocks = content
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let parts: Vec<String> = blocks
        .iter()
        .filter_map(|b| match str_at(b, "type") {
            Some("text") => str_at(b, "text").map(str::to_string),
            Some("tool_use") => Some(format!("tool {}", str_at(b, "name").unwrap_or("?"))),
            Some("thinking") => Some("thinking".to_string()),
            _ => None,
        })
        .collect();
    if parts.is_empty() {
        "assistant message".to_string()
    } else {
        summarize(&parts.join(" · "), 200)
    }
}

#[cfg(test)]
mod tests {
    use crate::providers::{parse_line, LineEvent, ProviderKind};
    use pam_manifests::protocol::TokenUsage;

    fn p(line: &str) -> LineEvent {
        parse_line(ProviderKind::Claude, line)
    }

    #[test]
    fn init_and_user_lines_are_quiet() {
        assert_eq!(
            p(
                r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"s1","tools":["Bash"],"model":"claude-sonnet-4-5"}"#
            ),
            LineEvent::Quiet
        );
        assert_eq!(
            p(
                r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}}"#
            ),
            LineEvent::Quiet
        );
    }

    #[test]
    fn assistant_message_is_progress_with_usage() {
        let e = p(
            r#"{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"Reading the file."},{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"a.rs"}}],"stop_reason":null,"usage":{"input_tokens":4,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":25}},"parent_tool_use_id":null,"session_id":"s1"}"#,
        );
        let LineEvent::Progress(item) = e else {
            panic!("{e:?}")
        };
        assert_eq!(item.summary, "Reading the file. · tool Read");
        assert_eq!(
            item.usage,
            Some(TokenUsage {
                input_tokens: 1104,
                cached_input_tokens: 1000,
                output_tokens: 25,
                model: Some("claude-sonnet-4-5".into()),
                cost_usd: None,
                by_model: Vec::new(),
            })
        );
    }

    #[test]
    fn result_success_and_error() {
        let ok = p(
            r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":2500,"duration_api_ms":2400,"num_turns":3,"result":"Done.","session_id":"s1","total_cost_usd":0.0123,"usage":{"input_tokens":10,"output_tokens":50}}"#,
        );
        let LineEvent::Final(f) = ok else {
            panic!("{ok:?}")
        };
        assert!(f.success);
        assert_eq!(f.usage.unwrap().cost_usd, Some(0.0123));
        let err = p(
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":10,"session_id":"s1","total_cost_usd":0.5,"usage":{"input_tokens":1,"output_tokens":2}}"#,
        );
        let LineEvent::Final(f) = err else {
            panic!("{err:?}")
        };
        assert!(!f.success);
        assert!(f.summary.starts_with("error_max_turns"));
        // subtype success but is_error (e.g. an API error surfaced as text).
        let e2 =
            p(r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: 529"}"#);
        assert!(matches!(e2, LineEvent::Final(f) if !f.success));
    }
}
