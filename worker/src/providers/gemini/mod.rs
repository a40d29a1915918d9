//! Gemini CLI `-p … --output-format stream-json` (0.61;
//! `packages/core/src/output/types.ts`; captured from the real CLI in
//! `captures/gemini/`): JSONL events with `type` and `timestamp` —
//! `init {session_id, model}`, `message {role: user|assistant, content,
//! delta?}` (the prompt echoed, then the answer in chunks), `tool_use
//! {tool_name, tool_id, parameters}`, `tool_result {tool_id, status:
//! success|error, output?, error?: {type, message}}`, `error {severity,
//! message}`, and last `result {status, error?, stats: {input_tokens
//! (cached included), output_tokens, cached, models: {MODEL: {…}}}}`.
//! Usage arrives only in the result (the model router's share included).
//! Retries show only on stderr ("Attempt 1 failed with status 500.
//! Retrying with backoff...").
//!
//! A refused call is an error result: `policy_violation` (a command no
//! `--allowed-tools` entry allows), or `tool_not_registered` for a tool the
//! approval mode did not offer ([`GUARDED`]).
//!
//! # Permission modes
//! readOnly `--approval-mode default` (no write or shell tool is offered),
//! edits `--approval-mode auto_edit` with the build and test commands of
//! [`EDIT_COMMANDS`] allowed (`--allowed-tools run_shell_command(cargo)`),
//! full `--approval-mode yolo`; `allowTools` → `--allowed-tools`. The CLI
//! has no flag to deny a tool: `denyTools` is not passed.

use std::collections::HashMap;

use pam_manifests::kinds::{PermissionMode, Permissions};
use pam_manifests::protocol::{Entry, EntryKind, ModelUsage, TokenUsage, USAGE_MODELS_MAX};
use serde_json::Value;

use super::stream::{
    denied, finish, message, str_at, target_of, text_entry, tool_call, tool_result, u64_at, Parsed,
    StreamParser, UsageReport,
};

/// The command prefixes `edits` lets `run_shell_command` run.
pub const EDIT_COMMANDS: &[&str] = &[
    "git status",
    "git diff",
    "git log",
    "git show",
    "git add",
    "git commit",
    "ls",
    "cat",
    "mkdir",
    "touch",
    "make",
    "cargo",
    "go",
    "npm",
    "npx",
    "node",
    "pnpm",
    "yarn",
    "python",
    "python3",
    "pytest",
    "uv",
    "mvn",
    "gradle",
    "./gradlew",
    "dotnet",
    "bundle",
    "rake",
];

/// Built-in tools that exist but that a mode may leave out: a call of one
/// that is "not registered" was refused by the mode.
const GUARDED: &[&str] = &[
    "write_file",
    "replace",
    "run_shell_command",
    "web_fetch",
    "save_memory",
];

/// The CLI's flags for `p`.
pub fn permission_args(p: &Permissions) -> Vec<String> {
    let mode = match p.mode {
        PermissionMode::ReadOnly => "default",
        PermissionMode::Edits => "auto_edit",
        PermissionMode::Full => "yolo",
    };
    let mut args = vec!["--approval-mode".to_string(), mode.to_string()];
    let edits = EDIT_COMMANDS
        .iter()
        .filter(|_| p.mode == PermissionMode::Edits)
        .map(|c| format!("run_shell_command({c})"));
    for tool in edits.chain(p.allow_tools.iter().cloned()) {
        args.push("--allowed-tools".into());
        args.push(tool);
    }
    args
}

/// Reads one run's stream.
#[derive(Default)]
pub struct Parser {
    /// Tool calls by id: (tool, target).
    calls: HashMap<String, (String, Option<String>)>,
    /// The answer's chunks not yet written as one message.
    answer: String,
}

impl StreamParser for Parser {
    fn line(&mut self, v: &Value, out: &mut Parsed) {
        let ty = str_at(v, "type");
        if ty == Some("message") {
            // The user's message is the prompt echoed: the transcript
            // starts with it already.
            if str_at(v, "role") == Some("assistant") {
                self.answer.push_str(str_at(v, "content").unwrap_or(""));
                // A whole message (not a chunk of one) ends here.
                if v.get("delta").and_then(Value::as_bool) != Some(true) {
                    self.flush(out);
                }
            }
            return;
        }
        self.flush(out);
        match ty {
            Some("init") => {
                let id = str_at(v, "session_id").map(str::to_string);
                out.session_id = id.clone();
                out.push(Entry {
                    session_id: id,
                    model: str_at(v, "model").map(str::to_string),
                    ..Entry::new(EntryKind::Session)
                });
            }
            Some("tool_use") => {
                let name = str_at(v, "tool_name").unwrap_or("?");
                let id = str_at(v, "tool_id");
                let input = v.get("parameters").unwrap_or(&Value::Null);
                if let Some(id) = id {
                    self.calls
                        .insert(id.to_string(), (name.to_string(), target_of(input)));
                }
                out.push(tool_call(name, id, input));
            }
            Some("tool_result") => self.tool_result(v, out),
            Some("error") => {
                let text = format!(
                    "{}: {}",
                    str_at(v, "severity").unwrap_or("error"),
                    str_at(v, "message").unwrap_or("?")
                );
                out.push(text_entry(EntryKind::Error, &text));
            }
            Some("result") => self.result(v, out),
            _ => {}
        }
    }

    /// `Attempt 1 failed with status 500. Retrying with backoff... …`.
    fn stderr_line(&mut self, line: &str, out: &mut Parsed) {
        let Some(rest) = line.trim().strip_prefix("Attempt ") else {
            return;
        };
        if let Some((n, why)) = rest.split_once(" failed") {
            if why.contains("Retrying") {
                let status = why
                    .split("status ")
                    .nth(1)
                    .and_then(|s| s.split('.').next())
                    .unwrap_or("an error");
                let text = format!("retrying the API call after attempt {n}: {status}");
                out.push(text_entry(EntryKind::Retry, &text));
            }
        }
    }

    fn finish(&mut self, out: &mut Parsed) {
        self.flush(out);
    }
}

impl Parser {
    /// The answer streamed so far, as one message.
    fn flush(&mut self, out: &mut Parsed) {
        if !self.answer.is_empty() {
            out.push(message("assistant", &std::mem::take(&mut self.answer)));
        }
    }

    fn tool_result(&mut self, v: &Value, out: &mut Parsed) {
        let id = str_at(v, "tool_id");
        let ok = str_at(v, "status") == Some("success");
        let error = v.get("error").unwrap_or(&Value::Null);
        let text = str_at(v, "output")
            .or_else(|| str_at(error, "message"))
            .unwrap_or("");
        let (tool, target) = id
            .and_then(|id| self.calls.get(id).cloned())
            .map_or((None, None), |(t, g)| (Some(t), g));
        out.push(tool_result(tool.as_deref(), id, ok, text));
        let refused = match str_at(error, "type") {
            Some("policy_violation") => true,
            Some("tool_not_registered") => tool.as_deref().is_some_and(|t| GUARDED.contains(&t)),
            Some("invalid_tool_params") => text.starts_with("Access denied"),
            _ => false,
        };
        if !ok && refused {
            out.push(denied(tool.as_deref().unwrap_or("?"), target, text));
        }
    }

    fn result(&mut self, v: &Value, out: &mut Parsed) {
        let success = str_at(v, "status") == Some("success");
        if let Some(total) = v.get("stats").and_then(totals) {
            out.usage.push(UsageReport::Total(total.clone()));
            out.push(Entry {
                usage: Some(total),
                ..Entry::new(EntryKind::Usage)
            });
        }
        let text = match v.pointer("/error/message").and_then(Value::as_str) {
            Some(m) => api_error_words(m),
            None => str_at(v, "status").unwrap_or("done").to_string(),
        };
        finish(out, success, text);
    }
}

/// `stats`: every model's (the router's share included).
fn totals(s: &Value) -> Option<TokenUsage> {
    if !s.is_object() {
        return None;
    }
    let mut by_model: Vec<ModelUsage> = s
        .get("models")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter(|(_, u)| u64_at(u, "total_tokens").unwrap_or(1) > 0)
                .take(USAGE_MODELS_MAX)
                .map(|(name, u)| ModelUsage {
                    model: name.clone(),
                    input_tokens: u64_at(u, "input_tokens").unwrap_or(0),
                    cached_input_tokens: u64_at(u, "cached").unwrap_or(0),
                    output_tokens: u64_at(u, "output_tokens").unwrap_or(0),
                    cost_usd: None,
                })
                .collect()
        })
        .unwrap_or_default();
    // The main model: the one that used the most.
    by_model.sort_by_key(|m| std::cmp::Reverse(m.input_tokens + m.output_tokens));
    Some(TokenUsage {
        input_tokens: u64_at(s, "input_tokens").unwrap_or(0),
        cached_input_tokens: u64_at(s, "cached").unwrap_or(0),
        output_tokens: u64_at(s, "output_tokens").unwrap_or(0),
        model: by_model.first().map(|m| m.model.clone()),
        by_model: if by_model.len() > 1 {
            by_model
        } else {
            Vec::new()
        },
        ..TokenUsage::default()
    })
}

/// `[API Error: {"error":{"code":500,"message":"…","status":"INTERNAL"}}]`
/// → `API Error 500: …`; other texts as they are.
fn api_error_words(m: &str) -> String {
    let inner = m
        .strip_prefix("[API Error: ")
        .and_then(|r| r.strip_suffix(']'));
    let parsed = inner.and_then(|j| serde_json::from_str::<Value>(j).ok());
    match parsed.as_ref().and_then(|v| v.get("error")) {
        Some(e) => format!(
            "API Error {}: {}",
            e.get("code").map_or("?".to_string(), |c| c.to_string()),
            str_at(e, "message").unwrap_or("?")
        ),
        None => m.to_string(),
    }
}

#[cfg(test)]
mod tests;
