//! Gemini API (generativelanguage v1beta) as Gemini CLI uses it.

use axum::response::Response;
use serde_json::{json, Value};

use crate::common::{
    approx_tokens, find_in_strings, id, json_response, resolve_path, sample_for_schema, sse,
    text_after, Event, Reply,
};
use crate::script::{Action, Usage};
use crate::state::{Api, Next, Served, State};

/// The three model methods the CLI calls, from the `model:method` path tail.
pub(crate) enum Method {
    Stream,
    Generate,
    CountTokens,
}

/// Splits `gemini-x:streamGenerateContent` into the model and the method.
pub(crate) fn parse_target(target: &str) -> Option<(String, Method)> {
    let (model, method) = target.rsplit_once(':')?;
    let method = match method {
        "streamGenerateContent" => Method::Stream,
        "generateContent" => Method::Generate,
        "countTokens" => Method::CountTokens,
        _ => return None,
    };
    Some((model.to_owned(), method))
}

/// The agent conversation declares function tools; the CLI's routing
/// classifier, next-speaker check and summaries do not.
fn is_side(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_none_or(|t| t.is_empty())
}

fn cwd(body: &Value) -> Option<String> {
    find_in_strings(body, &|s| {
        text_after(s, "Workspace Directories:**\n  - ", "\n")
    })
}

pub(crate) fn generate(
    state: &State,
    model: &str,
    body: &Value,
    streaming: bool,
) -> (Reply, Served) {
    if is_side(body) {
        let side = state.side_reply().clone();
        state.record_side(Api::Gemini, model, side.usage);
        let schema = body
            .pointer("/generationConfig/responseJsonSchema")
            .or_else(|| body.pointer("/generationConfig/responseSchema"));
        let text = match schema {
            Some(schema) => sample_for_schema(schema, &side.text).to_string(),
            None => side.text,
        };
        let parts = vec![json!({"text": text})];
        let answer = answer(model, parts, side.usage, streaming, false);
        return (answer, Served::Side);
    }

    let (index, turn) = match state.next_turn() {
        Next::Turn { index, turn } => (index, turn),
        Next::Exhausted => {
            let parts = vec![json!({"text": "Script exhausted."})];
            return (
                answer(model, parts, Usage::default(), streaming, false),
                Served::Exhausted,
            );
        }
    };
    let served = Served::Turn { index };
    let mut parts = Vec::new();
    if let Some(text) = &turn.preamble {
        parts.push(json!({"text": text}));
    }
    match &turn.action {
        Action::Error { status, body, .. } => {
            let body = body.clone().unwrap_or_else(|| error_body(*status));
            return (json_response(*status, body).into(), served);
        }
        Action::Text { text } => parts.push(json!({"text": text})),
        Action::WriteFile { path, content } => parts.push(json!({
            "functionCall": {
                "id": id("call_"),
                "name": "write_file",
                "args": {
                    "file_path": resolve_path(path, cwd(body).as_deref()),
                    "content": content,
                },
            }
        })),
        Action::RunCommand { command } => parts.push(json!({
            "functionCall": {
                "id": id("call_"),
                "name": "run_shell_command",
                "args": { "command": command, "description": "Run the scripted command" },
            }
        })),
    }
    let paced = turn.pace_ms.is_some();
    (answer(model, parts, turn.usage, streaming, paced), served)
}

pub(crate) fn count_tokens(body: &Value) -> Response {
    json_response(200, json!({ "totalTokens": approx_tokens(body) }))
}

pub(crate) fn error_body(status: u16) -> Value {
    let kind = match status {
        400 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        503 => "UNAVAILABLE",
        504 => "DEADLINE_EXCEEDED",
        _ => "INTERNAL",
    };
    json!({
        "error": {
            "code": status,
            "message": format!("Scripted error ({status})"),
            "status": kind,
        }
    })
}

pub(crate) fn models() -> Response {
    let models: Vec<Value> = ["gemini-3.1-pro-preview", "gemini-3.5-flash-lite"]
        .iter()
        .map(|m| {
            json!({
                "name": format!("models/{m}"),
                "displayName": m,
                "supportedGenerationMethods": ["generateContent", "countTokens"],
            })
        })
        .collect();
    json_response(200, json!({ "models": models }))
}

/// The answer as one chunk, or, when `per_part` (a paced stream), one
/// chunk per part with the finish reason and usage on the last, as the
/// real API spreads a long answer.
fn answer(model: &str, parts: Vec<Value>, usage: Usage, streaming: bool, per_part: bool) -> Reply {
    let response_id = id("");
    let usage = json!({
        "promptTokenCount": usage.prompt_total(),
        "candidatesTokenCount": usage.output_tokens,
        "cachedContentTokenCount": usage.cached_input_tokens,
        "totalTokenCount": usage.prompt_total() + usage.output_tokens,
    });
    let chunk = |parts: Vec<Value>, last: bool| {
        let mut candidate = json!({ "content": { "role": "model", "parts": parts }, "index": 0 });
        let mut chunk =
            json!({ "candidates": [], "modelVersion": model, "responseId": response_id });
        if last {
            candidate["finishReason"] = json!("STOP");
            chunk["usageMetadata"] = usage.clone();
        }
        chunk["candidates"] = json!([candidate]);
        chunk
    };
    if !streaming {
        return json_response(200, chunk(parts, true)).into();
    }
    if !per_part || parts.len() < 2 {
        return sse(vec![Event::data(chunk(parts, true))]);
    }
    let count = parts.len();
    let events = parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| Event::data(chunk(vec![part], i + 1 == count)))
        .collect();
    sse(events)
}
