//! Claude Code `-p --output-format stream-json --verbose
//! --include-partial-messages` (2.1.x; the lines are the Agent SDK's
//! `SDKMessage`s; captured from the real CLI in `captures/claude/`):
//!
//! - `system` `init` {session_id, model, permissionMode}; `system`
//!   `api_retry` {attempt, max_retries, retry_delay_ms, error_status,
//!   error} for each retried API call;
//! - `assistant` {message: {id, model, content: [ONE block], usage}}: one
//!   line per content block (text, tool_use, thinking); the blocks of one
//!   API call share `message.id`, and every line carries the usage of the
//!   call's start (`output_tokens` 1), not its end;
//! - `stream_event` {event}: the raw API events (partial messages):
//!   `message_start` {message: {id, model, usage}} and `message_delta`
//!   {usage} — the call's true output count, the only live one;
//! - `user` {message: {content: [tool_result {tool_use_id, content,
//!   is_error}]}}: a refused tool call is an error result in one of the
//!   permission wordings ([`REFUSALS`]);
//! - `result` {subtype, is_error, result, session_id, total_cost_usd,
//!   usage (the main model's), modelUsage (every model's, side requests
//!   included), permission_denials [{tool_name, tool_use_id, tool_input}]}.
//!   An API error after the retries is an `assistant` line of model
//!   `<synthetic>` with the error text, then a `result` with `is_error`.
//!
//! # Permission modes
//! readOnly `--permission-mode plan`, edits `--permission-mode
//! acceptEdits` with the build and test commands of [`EDIT_TOOLS`]
//! allowed, full `--permission-mode bypassPermissions` (refused by the CLI
//! as root); `allowTools` → `--allowedTools`, `denyTools` →
//! `--disallowedTools`.

use std::collections::{HashMap, HashSet};

use pam_manifests::kinds::{PermissionMode, Permissions};
use pam_manifests::protocol::{Entry, EntryKind, ModelUsage, TokenUsage};
use serde_json::Value;

use super::stream::{
    content_text, denied, finish, message, str_at, target_of, text_entry, tool_call, tool_result,
    u64_at, Parsed, StreamParser, UsageReport,
};

/// What `edits` allows besides file edits in the working directory
/// (acceptEdits already runs read-only and file-system commands): the
/// usual build, test and version-control commands of a coding agent
/// (docs/agents.md, "Permission modes").
pub const EDIT_TOOLS: &[&str] = &[
    "Bash(git status:*)",
    "Bash(git diff:*)",
    "Bash(git log:*)",
    "Bash(git show:*)",
    "Bash(git add:*)",
    "Bash(git commit:*)",
    "Bash(make:*)",
    "Bash(cargo:*)",
    "Bash(go:*)",
    "Bash(npm:*)",
    "Bash(npx:*)",
    "Bash(node:*)",
    "Bash(pnpm:*)",
    "Bash(yarn:*)",
    "Bash(python:*)",
    "Bash(python3:*)",
    "Bash(pytest:*)",
    "Bash(uv:*)",
    "Bash(mvn:*)",
    "Bash(gradle:*)",
    "Bash(./gradlew:*)",
    "Bash(dotnet:*)",
    "Bash(bundle:*)",
    "Bash(rake:*)",
];

/// The CLI's flags for `p`.
pub fn permission_args(p: &Permissions) -> Vec<String> {
    let mode = match p.mode {
        PermissionMode::ReadOnly => "plan",
        PermissionMode::Edits => "acceptEdits",
        PermissionMode::Full => "bypassPermissions",
    };
    let mut args = vec!["--permission-mode".to_string(), mode.to_string()];
    let mut allow: Vec<String> = Vec::new();
    if p.mode == PermissionMode::Edits {
        allow.extend(EDIT_TOOLS.iter().map(|s| s.to_string()));
    }
    allow.extend(p.allow_tools.iter().cloned());
    if !allow.is_empty() {
        args.push("--allowedTools".into());
        args.extend(allow);
    }
    if !p.deny_tools.is_empty() {
        args.push("--disallowedTools".into());
        args.extend(p.deny_tools.iter().cloned());
    }
    args
}

/// How a tool result says the run's permissions refused the call: default
/// and plan mode, a command acceptEdits does not allow, a tool
/// `--disallowedTools` removed.
const REFUSALS: &[&str] = &[
    "requested permissions to",
    "requires approval",
    "while in plan mode",
    "exists but is not enabled in this context",
];

/// Whether a tool result's text is a permission refusal.
fn is_refusal(text: &str) -> bool {
    REFUSALS.iter().any(|r| text.contains(r))
}

/// Reads one run's stream.
#[derive(Default)]
pub struct Parser {
    /// Tool calls by id: (tool, target), for their results and refusals.
    calls: HashMap<String, (String, Option<String>)>,
    /// Tool calls reported refused (the result's list repeats them).
    refused: HashSet<String>,
    /// The API call whose `stream_event`s are arriving.
    streaming: Option<(String, Option<String>)>,
    /// The main model (the init line's, without a `[1m]` suffix).
    model: Option<String>,
}

impl StreamParser for Parser {
    fn line(&mut self, v: &Value, out: &mut Parsed) {
        match str_at(v, "type") {
            Some("system") => self.system(v, out),
            Some("stream_event") => self.stream_event(v.get("event").unwrap_or(&Value::Null), out),
            Some("assistant") => self.assistant(v, out),
            Some("user") => self.user(v, out),
            Some("result") => self.result(v, out),
            _ => {}
        }
    }
}

impl Parser {
    fn system(&mut self, v: &Value, out: &mut Parsed) {
        match str_at(v, "subtype") {
            Some("init") => {
                let id = str_at(v, "session_id").map(str::to_string);
                self.model = str_at(v, "model").map(plain_model);
                out.session_id = id.clone();
                out.push(Entry {
                    session_id: id,
                    model: self.model.clone(),
                    ..Entry::new(EntryKind::Session)
                });
            }
            Some("api_retry") => {
                let n = |k| u64_at(v, k).map_or("?".to_string(), |n| n.to_string());
                let status = u64_at(v, "error_status").map_or(String::new(), |s| format!("{s} "));
                let delay = v
                    .get("retry_delay_ms")
                    .and_then(Value::as_f64)
                    .map_or(String::new(), |ms| format!(", next in {:.1}s", ms / 1000.0));
                let text = format!(
                    "retrying the API call, attempt {} of {}: {status}{}{delay}",
                    n("attempt"),
                    n("max_retries"),
                    str_at(v, "error").unwrap_or("error"),
                );
                out.push(text_entry(EntryKind::Retry, &text));
            }
            _ => {}
        }
    }

    /// Partial messages: a call's start names it; its delta has the
    /// true output count.
    fn stream_event(&mut self, e: &Value, out: &mut Parsed) {
        match str_at(e, "type") {
            Some("message_start") => {
                let msg = e.get("message").unwrap_or(&Value::Null);
                let Some(id) = str_at(msg, "id") else { return };
                let model = str_at(msg, "model").map(plain_model);
                self.streaming = Some((id.to_string(), model.clone()));
                if let Some(u) = msg.get("usage").and_then(|u| usage(u, model)) {
                    out.usage.push(UsageReport::Call {
                        id: id.to_string(),
                        usage: u,
                    });
                }
            }
            Some("message_delta") => {
                let Some((id, model)) = self.streaming.clone() else {
                    return;
                };
                if let Some(u) = e.get("usage").and_then(|u| usage(u, model)) {
                    out.usage.push(UsageReport::Call { id, usage: u });
                }
            }
            _ => {}
        }
    }

    fn assistant(&mut self, v: &Value, out: &mut Parsed) {
        let msg = v.get("message").unwrap_or(&Value::Null);
        let model = str_at(msg, "model").map(plain_model);
        let synthetic = model.as_deref() == Some("<synthetic>");
        if let (Some(id), false) = (str_at(msg, "id"), synthetic) {
            if let Some(u) = msg.get("usage").and_then(|u| usage(u, model.clone())) {
                out.usage.push(UsageReport::Call {
                    id: id.to_string(),
                    usage: u,
                });
            }
        }
        let blocks = msg.get("content").and_then(Value::as_array);
        for b in blocks.map(Vec::as_slice).unwrap_or(&[]) {
            match str_at(b, "type") {
                // An API error after the retries speaks as the assistant.
                Some("text") if synthetic => out.push(text_entry(
                    EntryKind::Error,
                    str_at(b, "text").unwrap_or(""),
                )),
                Some("text") => out.push(message("assistant", str_at(b, "text").unwrap_or(""))),
                Some("tool_use") => {
                    let (id, name) = (str_at(b, "id"), str_at(b, "name").unwrap_or("?"));
                    let input = b.get("input").unwrap_or(&Value::Null);
                    if let Some(id) = id {
                        self.calls
                            .insert(id.to_string(), (name.to_string(), target_of(input)));
                    }
                    out.push(tool_call(name, id, input));
                }
                _ => {}
            }
        }
    }

    fn user(&mut self, v: &Value, out: &mut Parsed) {
        let content = v.pointer("/message/content").and_then(Value::as_array);
        for b in content.map(Vec::as_slice).unwrap_or(&[]) {
            if str_at(b, "type") != Some("tool_result") {
                continue;
            }
            let id = str_at(b, "tool_use_id");
            let error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            let text = content_text(b.get("content"));
            let (tool, target) = id
                .and_then(|id| self.calls.get(id).cloned())
                .map_or((None, None), |(t, g)| (Some(t), g));
            out.push(tool_result(tool.as_deref(), id, !error, &text));
            if error && is_refusal(&text) {
                if let Some(id) = id {
                    self.refused.insert(id.to_string());
                }
                out.push(denied(tool.as_deref().unwrap_or("?"), target, &text));
            }
        }
    }

    fn result(&mut self, v: &Value, out: &mut Parsed) {
        let subtype = str_at(v, "subtype").unwrap_or("");
        let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
        let success = subtype == "success" && !is_error;
        if let Some(id) = str_at(v, "session_id") {
            out.session_id = Some(id.to_string());
        }
        // The final list names every refusal, the live ones included.
        let denials = v.get("permission_denials").and_then(Value::as_array);
        for d in denials.map(Vec::as_slice).unwrap_or(&[]) {
            let id = str_at(d, "tool_use_id").unwrap_or("");
            if !self.refused.insert(id.to_string()) && !id.is_empty() {
                continue;
            }
            let tool = str_at(d, "tool_name").unwrap_or("?");
            let target = d.get("tool_input").and_then(target_of);
            out.push(denied(tool, target, "refused by the run's permissions"));
        }
        if let Some(total) = self.totals(v) {
            out.usage.push(UsageReport::Total(total.clone()));
            out.push(Entry {
                usage: Some(total),
                ..Entry::new(EntryKind::Usage)
            });
        }
        let text = str_at(v, "result").unwrap_or(subtype).to_string();
        finish(out, success, text);
    }

    /// The attempt's totals: every model's (`modelUsage`, side requests
    /// included), else the main model's (`usage`); the cost the CLI
    /// computed.
    fn totals(&self, v: &Value) -> Option<TokenUsage> {
        let cost = v
            .get("total_cost_usd")
            .or_else(|| v.get("cost_usd"))
            .and_then(Value::as_f64);
        let by_model: Vec<ModelUsage> = v
            .get("modelUsage")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(name, u)| {
                        let cached = u64_at(u, "cacheReadInputTokens").unwrap_or(0);
                        ModelUsage {
                            model: plain_model(name),
                            input_tokens: u64_at(u, "inputTokens").unwrap_or(0)
                                + cached
                                + u64_at(u, "cacheCreationInputTokens").unwrap_or(0),
                            cached_input_tokens: cached,
                            output_tokens: u64_at(u, "outputTokens").unwrap_or(0),
                            cost_usd: u.get("costUSD").and_then(Value::as_f64),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut total = if by_model.is_empty() {
            usage(v.get("usage")?, self.model.clone())?
        } else {
            TokenUsage {
                input_tokens: by_model.iter().map(|m| m.input_tokens).sum(),
                cached_input_tokens: by_model.iter().map(|m| m.cached_input_tokens).sum(),
                output_tokens: by_model.iter().map(|m| m.output_tokens).sum(),
                model: self.model.clone(),
                by_model,
                ..TokenUsage::default()
            }
        };
        total.cost_usd = cost;
        Some(total)
    }
}

/// One API call's usage: input includes the cache reads and writes Claude
/// reports apart.
fn usage(u: &Value, model: Option<String>) -> Option<TokenUsage> {
    if !u.is_object() {
        return None;
    }
    let cached = u64_at(u, "cache_read_input_tokens").unwrap_or(0);
    Some(TokenUsage {
        input_tokens: u64_at(u, "input_tokens").unwrap_or(0)
            + cached
            + u64_at(u, "cache_creation_input_tokens").unwrap_or(0),
        cached_input_tokens: cached,
        output_tokens: u64_at(u, "output_tokens").unwrap_or(0),
        model,
        ..TokenUsage::default()
    })
}

/// A model name without the context-window suffix the CLI adds
/// (`claude-opus-4-8[1m]`), as pamd's price table names it.
fn plain_model(m: &str) -> String {
    m.split('[').next().unwrap_or(m).to_string()
}

#[cfg(test)]
mod tests;
