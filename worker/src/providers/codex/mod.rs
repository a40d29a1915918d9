//! Codex CLI `exec --json` (0.171; `codex-rs/exec/src/exec_events.rs`;
//! captured from the real CLI in `captures/codex/`): JSONL events tagged
//! by `type` —
//! `thread.started {thread_id}`, `turn.started`, `item.started` /
//! `item.completed {item: {id, type, …}}` with item types `agent_message
//! {text}`, `reasoning`, `command_execution {command, aggregated_output,
//! exit_code, status}`, `file_change {changes: [{path, kind}], status}`,
//! `mcp_tool_call`, `web_search`, `todo_list`, `error {message}` (a
//! warning); `turn.completed {usage: {input_tokens (cached included),
//! cached_input_tokens, output_tokens, …}}`, `turn.failed {error:
//! {message}}`, and top-level `error {message}` ("Reconnecting... 1/5 …"
//! for a retried call). `codex exec` runs one turn, so `turn.completed` /
//! `turn.failed` is the final result, and usage arrives only there.
//!
//! The sandbox's refusals rarely reach the stream: a rejected patch is an
//! `ERROR codex_core::tools::router` line on stderr ([`Parser::stderr_line`]),
//! a command the sandbox stopped shows, when it shows at all, as a failed
//! `command_execution` whose output says "Read-only file system".
//!
//! # Permission modes
//! `codex exec` never asks (its approval policy is fixed to never):
//! readOnly `--sandbox read-only`, edits `--sandbox workspace-write`, full
//! `--sandbox danger-full-access`. Codex has no tool lists: `allowTools`
//! and `denyTools` are not passed.

use std::collections::HashSet;

use pam_manifests::kinds::{PermissionMode, Permissions};
use pam_manifests::protocol::{Entry, EntryKind, TokenUsage};
use serde_json::{json, Value};

use super::stream::{
    denied, finish, message, str_at, text_entry, tool_call, tool_result, u64_at, Parsed,
    StreamParser, UsageReport,
};

/// The CLI's flags for `p`.
pub fn permission_args(p: &Permissions) -> Vec<String> {
    let sandbox = match p.mode {
        PermissionMode::ReadOnly => "read-only",
        PermissionMode::Edits => "workspace-write",
        PermissionMode::Full => "danger-full-access",
    };
    vec!["--sandbox".into(), sandbox.into()]
}

/// What a sandbox refusal of a write prints.
const READ_ONLY_FS: &str = "Read-only file system";

/// Reads one run's stream.
#[derive(Default)]
pub struct Parser {
    /// Items whose call was reported (`item.started`).
    started: HashSet<String>,
    /// The model's last message: the run's answer.
    last_message: Option<String>,
}

impl StreamParser for Parser {
    fn line(&mut self, v: &Value, out: &mut Parsed) {
        match str_at(v, "type") {
            Some("thread.started") => {
                let id = str_at(v, "thread_id").map(str::to_string);
                out.session_id = id.clone();
                out.push(Entry {
                    session_id: id,
                    ..Entry::new(EntryKind::Session)
                });
            }
            Some("item.started") => self.started(v.get("item").unwrap_or(&Value::Null), out),
            Some("item.completed") => self.completed(v.get("item").unwrap_or(&Value::Null), out),
            Some("error") => {
                let text = str_at(v, "message").unwrap_or("?");
                let kind = if text.starts_with("Reconnecting") {
                    EntryKind::Retry
                } else {
                    EntryKind::Error
                };
                out.push(text_entry(kind, text));
            }
            Some("turn.completed") => {
                if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
                    let usage = TokenUsage {
                        input_tokens: u64_at(u, "input_tokens").unwrap_or(0),
                        cached_input_tokens: u64_at(u, "cached_input_tokens").unwrap_or(0),
                        output_tokens: u64_at(u, "output_tokens").unwrap_or(0),
                        ..TokenUsage::default()
                    };
                    out.usage.push(UsageReport::Turn(usage.clone()));
                    out.push(Entry {
                        usage: Some(usage),
                        ..Entry::new(EntryKind::Usage)
                    });
                }
                let text = self
                    .last_message
                    .clone()
                    .unwrap_or_else(|| "turn completed".into());
                finish(out, true, text);
            }
            Some("turn.failed") => {
                let text = error_words(v.pointer("/error/message").and_then(Value::as_str));
                finish(out, false, text);
            }
            _ => {}
        }
    }

    /// `ERROR codex_core::tools::router: error=patch rejected: writing is
    /// blocked by read-only sandbox; …`: the only trace of a refused patch.
    fn stderr_line(&mut self, line: &str, out: &mut Parsed) {
        let Some((_, why)) = line
            .split_once("codex_core::tools::router:")
            .and_then(|(_, rest)| rest.split_once("error="))
        else {
            return;
        };
        if why.contains("rejected") || why.contains("blocked") {
            let tool = if why.starts_with("patch") {
                "apply_patch"
            } else {
                "shell"
            };
            out.push(denied(tool, None, why.trim()));
        } else {
            out.push(text_entry(EntryKind::Error, why.trim()));
        }
    }
}

impl Parser {
    fn started(&mut self, item: &Value, out: &mut Parsed) {
        if let Some(call) = call_of(item) {
            if let Some(id) = str_at(item, "id") {
                self.started.insert(id.to_string());
            }
            out.push(call);
        }
    }

    fn completed(&mut self, item: &Value, out: &mut Parsed) {
        match str_at(item, "type") {
            Some("agent_message") => {
                let text = str_at(item, "text").unwrap_or("");
                self.last_message = Some(text.to_string());
                out.push(message("assistant", text));
            }
            Some("error") => out.push(text_entry(
                EntryKind::Error,
                str_at(item, "message").unwrap_or("?"),
            )),
            Some("command_execution" | "file_change" | "mcp_tool_call" | "web_search") => {
                let id = str_at(item, "id");
                let Some(call) = call_of(item) else { return };
                if !id.is_some_and(|id| self.started.contains(id)) {
                    out.push(call.clone());
                }
                let ok = str_at(item, "status") == Some("completed")
                    && item.get("exit_code").and_then(Value::as_i64).unwrap_or(0) == 0;
                let output = str_at(item, "aggregated_output").unwrap_or("");
                let tool = call.tool.as_deref();
                out.push(tool_result(tool, id, ok, output));
                if !ok && output.contains(READ_ONLY_FS) {
                    out.push(denied(tool.unwrap_or("shell"), call.target.clone(), output));
                }
            }
            _ => {}
        }
    }
}

/// The tool call an item stands for: `shell` with its command (without
/// the `bash -lc '…'` around it), `apply_patch` with the files, the MCP
/// tool, the web search.
fn call_of(item: &Value) -> Option<Entry> {
    let id = str_at(item, "id");
    let e = match str_at(item, "type")? {
        "command_execution" => {
            let command = unwrap_shell(str_at(item, "command").unwrap_or(""));
            tool_call("shell", id, &json!({ "command": command }))
        }
        "file_change" => {
            let paths: Vec<&str> = item
                .get("changes")
                .and_then(Value::as_array)
                .map(|c| c.iter().filter_map(|ch| str_at(ch, "path")).collect())
                .unwrap_or_default();
            tool_call(
                "apply_patch",
                id,
                &json!({ "path": paths.join(", "), "changes": item.get("changes") }),
            )
        }
        "mcp_tool_call" => {
            let name = format!(
                "mcp:{}/{}",
                str_at(item, "server").unwrap_or("?"),
                str_at(item, "tool").unwrap_or("?")
            );
            tool_call(&name, id, item.get("arguments").unwrap_or(&Value::Null))
        }
        "web_search" => tool_call("web_search", id, &json!({ "query": str_at(item, "query") })),
        _ => return None,
    };
    Some(e)
}

/// `/bin/bash -lc 'cat a && ls'` → `cat a && ls`.
fn unwrap_shell(command: &str) -> String {
    for shell in ["/bin/bash -lc ", "bash -lc ", "/bin/sh -c ", "sh -c "] {
        if let Some(rest) = command.strip_prefix(shell) {
            let rest = rest.trim();
            if let Some(inner) = rest.strip_prefix('\'').and_then(|r| r.strip_suffix('\'')) {
                return inner.to_string();
            }
            return rest.to_string();
        }
    }
    command.to_string()
}

/// An API error's words: codex passes a 4xx body on as its JSON text
/// (`{"error":{"message":…}}`); the message inside it, else the text.
fn error_words(text: Option<&str>) -> String {
    let text = text.unwrap_or("the turn failed");
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .unwrap_or_else(|| text.to_string())
}

#[cfg(test)]
mod tests;
