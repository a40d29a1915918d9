//! Anthropic Messages API as Claude Code uses it.

use axum::response::Response;
use serde_json::{json, Value};

use crate::common::{
    approx_tokens, find_in_strings, id, json_response, resolve_path, sample_for_schema, sse,
    text_after, Event, Reply,
};
use crate::script::{Action, Usage};
use crate::state::{Api, Next, Served, State};

/// One content block of the answer.
enum Block {
    Text(String),
    ToolUse { name: &'static str, input: Value },
}

/// Main-conversation requests carry the agent's tool list; Claude Code's
/// own helper calls (titles, topic checks, summaries) send none.
fn is_side(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_none_or(|t| t.is_empty())
}

fn cwd(body: &Value) -> Option<String> {
    find_in_strings(body, &|s| {
        text_after(s, "Primary working directory: ", "\n")
    })
}

pub(crate) fn messages(state: &State, body: &Value) -> (Reply, Served) {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("claude-sonnet-4-5")
        .to_owned();
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);

    if is_side(body) {
        let side = state.side_reply().clone();
        state.record_side(Api::Anthropic, &model, side.usage);
        let text = match structured_schema(body) {
            Some(schema) => sample_for_schema(schema, &side.text).to_string(),
            None => side.text,
        };
        let blocks = vec![Block::Text(text)];
        return (reply(&model, blocks, side.usage, stream), Served::Side);
    }

    let (index, turn) = match state.next_turn() {
        Next::Turn { index, turn } => (index, turn),
        Next::Exhausted => {
            let blocks = vec![Block::Text("Script exhausted.".to_owned())];
            return (
                reply(&model, blocks, Usage::default(), stream),
                Served::Exhausted,
            );
        }
    };
    let served = Served::Turn { index };
    let mut blocks = Vec::new();
    if let Some(text) = &turn.preamble {
        blocks.push(Block::Text(text.clone()));
    }
    match &turn.action {
        Action::Error { status, body, .. } => {
            let body = body.clone().unwrap_or_else(|| error_body(*status));
            return (json_response(*status, body).into(), served);
        }
        Action::Text { text } => blocks.push(Block::Text(text.clone())),
        Action::WriteFile { path, content } => blocks.push(Block::ToolUse {
            name: "Write",
            input: json!({
                "file_path": resolve_path(path, cwd(body).as_deref()),
                "content": content,
            }),
        }),
        Action::RunCommand { command } => blocks.push(Block::ToolUse {
            name: "Bash",
            input: json!({
                "command": command,
                "description": "Run the scripted command",
            }),
        }),
    }
    (reply(&model, blocks, turn.usage, stream), served)
}

/// The JSON schema a request asks its answer to follow, if any.
fn structured_schema(body: &Value) -> Option<&Value> {
    body.pointer("/output_config/format/schema")
        .or_else(|| body.pointer("/output_format/schema"))
}

pub(crate) fn count_tokens(body: &Value) -> Response {
    json_response(200, json!({ "input_tokens": approx_tokens(body) }))
}

pub(crate) fn models() -> Response {
    let data: Vec<Value> = ["claude-opus-4-8", "claude-sonnet-4-5", "claude-haiku-4-5"]
        .iter()
        .map(|m| {
            json!({
                "type": "model",
                "id": m,
                "display_name": m,
                "created_at": "2025-01-01T00:00:00Z",
            })
        })
        .collect();
    json_response(
        200,
        json!({ "data": data, "has_more": false, "first_id": null, "last_id": null }),
    )
}

pub(crate) fn error_body(status: u16) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({
        "type": "error",
        "error": { "type": kind, "message": format!("Scripted error ({status})") },
        "request_id": id("req_"),
    })
}

fn usage_json(usage: Usage, output_tokens: u64) -> Value {
    json!({
        "input_tokens": usage.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": usage.cached_input_tokens,
        "output_tokens": output_tokens,
        "service_tier": "standard",
    })
}

fn stop_reason(blocks: &[Block]) -> &'static str {
    if blocks.iter().any(|b| matches!(b, Block::ToolUse { .. })) {
        "tool_use"
    } else {
        "end_turn"
    }
}

fn reply(model: &str, blocks: Vec<Block>, usage: Usage, stream: bool) -> Reply {
    let message_id = id("msg_");
    let stop = stop_reason(&blocks);
    let blocks: Vec<(Value, Option<Value>)> = blocks
        .into_iter()
        .map(|b| match b {
            Block::Text(text) => (json!({"type": "text", "text": text}), None),
            Block::ToolUse { name, input } => (
                json!({"type": "tool_use", "id": id("toolu_"), "name": name, "input": input}),
                Some(input),
            ),
        })
        .collect();
    if !stream {
        let content: Vec<Value> = blocks.into_iter().map(|(b, _)| b).collect();
        return json_response(
            200,
            json!({
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": null,
                "usage": usage_json(usage, usage.output_tokens),
            }),
        )
        .into();
    }

    // Like the real API: message_start carries the prompt usage with a
    // token or so of output, message_delta the final counts.
    let mut events = vec![Event::named(
        "message_start",
        json!({
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": usage_json(usage, usage.output_tokens.min(1)),
            },
        }),
    )];
    events.push(Event::named("ping", json!({"type": "ping"})));
    for (index, (block, input)) in blocks.into_iter().enumerate() {
        let (start, delta) = match input {
            None => {
                let text = block["text"].clone();
                (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": text}),
                )
            }
            Some(input) => {
                let mut start = block.clone();
                start["input"] = json!({});
                (
                    start,
                    json!({"type": "input_json_delta", "partial_json": input.to_string()}),
                )
            }
        };
        events.push(Event::named(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.push(Event::named(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
        events.push(Event::named(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push(Event::named(
        "message_delta",
        json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": usage_json(usage, usage.output_tokens),
        }),
    ));
    events.push(Event::named(
        "message_stop",
        json!({"type": "message_stop"}),
    ));
    sse(events)
}
