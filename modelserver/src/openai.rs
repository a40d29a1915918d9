//! OpenAI Responses API as Codex CLI uses it with a custom model provider.

use axum::response::Response;
use serde_json::{json, Value};

use crate::common::{id, json_response, sample_for_schema, sse, Event, Reply};
use crate::script::{Action, Usage};
use crate::state::{Api, Next, Served, State};

/// One output item of the answer.
enum Item {
    Message(String),
    FunctionCall { name: String, arguments: Value },
    CustomToolCall { name: String, input: String },
}

/// Codex sends its tool list with every agent request; helper calls it
/// makes on the side (if any) do not.
fn is_side(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_none_or(|t| t.is_empty())
}

/// `(type, name)` of each top-level tool the request declares.
fn declared_tools(body: &Value) -> Vec<(String, String)> {
    body.get("tools")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    let kind = t.get("type")?.as_str()?.to_owned();
                    let name = t.get("name")?.as_str()?.to_owned();
                    Some((kind, name))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn find_tool<'a>(tools: &'a [(String, String)], name: &str) -> Option<&'a str> {
    tools
        .iter()
        .find(|(_, n)| n == name)
        .map(|(kind, _)| kind.as_str())
}

/// Codex's shell tool differs by model family: `exec_command` (unified
/// exec, `cmd` string), `shell_command` (`command` string) or the older
/// `shell` (`command` argv).
fn command_item(tools: &[(String, String)], command: &str) -> Item {
    if find_tool(tools, "shell_command").is_some() && find_tool(tools, "exec_command").is_none() {
        return Item::FunctionCall {
            name: "shell_command".to_owned(),
            arguments: json!({ "command": command }),
        };
    }
    if find_tool(tools, "shell").is_some() && find_tool(tools, "exec_command").is_none() {
        return Item::FunctionCall {
            name: "shell".to_owned(),
            arguments: json!({ "command": ["bash", "-lc", command] }),
        };
    }
    Item::FunctionCall {
        name: "exec_command".to_owned(),
        arguments: json!({ "cmd": command }),
    }
}

/// An apply_patch "Add File" hunk; relative paths are what Codex resolves
/// against its working root.
fn add_file_patch(path: &str, content: &str) -> String {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in content.lines() {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch\n");
    patch
}

fn write_item(tools: &[(String, String)], path: &str, content: &str) -> Item {
    let patch = add_file_patch(path, content);
    match find_tool(tools, "apply_patch") {
        Some("custom") => Item::CustomToolCall {
            name: "apply_patch".to_owned(),
            input: patch,
        },
        Some(_) => Item::FunctionCall {
            name: "apply_patch".to_owned(),
            arguments: json!({ "input": patch }),
        },
        // Without an edit tool the model would write through the shell.
        None => command_item(
            tools,
            &format!("cat > '{path}' <<'PAM_EOF'\n{content}\nPAM_EOF"),
        ),
    }
}

pub(crate) fn responses(state: &State, body: &Value) -> (Reply, Served) {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("gpt-5.5")
        .to_owned();

    if is_side(body) {
        let side = state.side_reply().clone();
        state.record_side(Api::OpenAi, &model, side.usage);
        let text = match body.pointer("/text/format/schema") {
            Some(schema) => sample_for_schema(schema, &side.text).to_string(),
            None => side.text,
        };
        return (
            stream(&model, vec![Item::Message(text)], side.usage),
            Served::Side,
        );
    }

    let (index, turn) = match state.next_turn() {
        Next::Turn { index, turn } => (index, turn),
        Next::Exhausted => {
            let items = vec![Item::Message("Script exhausted.".to_owned())];
            return (stream(&model, items, Usage::default()), Served::Exhausted);
        }
    };
    let served = Served::Turn { index };
    let tools = declared_tools(body);
    let mut items = Vec::new();
    if let Some(text) = &turn.preamble {
        items.push(Item::Message(text.clone()));
    }
    match &turn.action {
        Action::Error { status, body, .. } => {
            let body = body.clone().unwrap_or_else(|| error_body(*status));
            return (json_response(*status, body).into(), served);
        }
        Action::Text { text } => items.push(Item::Message(text.clone())),
        Action::WriteFile { path, content } => items.push(write_item(&tools, path, content)),
        Action::RunCommand { command } => items.push(command_item(&tools, command)),
    }
    (stream(&model, items, turn.usage), served)
}

pub(crate) fn error_body(status: u16) -> Value {
    let kind = match status {
        400 | 404 | 413 => "invalid_request_error",
        401 | 403 => "authentication_error",
        429 => "rate_limit_exceeded",
        _ => "server_error",
    };
    json!({
        "error": {
            "message": format!("Scripted error ({status})"),
            "type": kind,
            "param": null,
            "code": null,
        }
    })
}

pub(crate) fn models() -> Response {
    let data: Vec<Value> = ["gpt-5.5", "gpt-5-codex"]
        .iter()
        .map(|m| json!({"id": m, "object": "model", "created": 0, "owned_by": "openai"}))
        .collect();
    json_response(200, json!({"object": "list", "data": data}))
}

fn usage_json(usage: Usage) -> Value {
    json!({
        "input_tokens": usage.prompt_total(),
        "input_tokens_details": { "cached_tokens": usage.cached_input_tokens },
        "output_tokens": usage.output_tokens,
        "output_tokens_details": { "reasoning_tokens": 0 },
        "total_tokens": usage.prompt_total() + usage.output_tokens,
    })
}

fn response_object(
    response_id: &str,
    model: &str,
    status: &str,
    output: Value,
    usage: Value,
) -> Value {
    json!({
        "id": response_id,
        "object": "response",
        "created_at": 1_700_000_000,
        "status": status,
        "model": model,
        "output": output,
        "parallel_tool_calls": true,
        "tool_choice": "auto",
        "usage": usage,
    })
}

/// The in-progress and done forms of an item, plus its delta events.
fn item_events(item: Item, output_index: usize, events: &mut Vec<(&'static str, Value)>) -> Value {
    match item {
        Item::Message(text) => {
            let item_id = id("msg_");
            let part_start = json!({"type": "output_text", "text": "", "annotations": []});
            let part_done = json!({"type": "output_text", "text": text, "annotations": []});
            let done = json!({
                "id": item_id, "type": "message", "status": "completed",
                "role": "assistant", "content": [part_done.clone()],
            });
            let at = json!({"item_id": item_id, "output_index": output_index, "content_index": 0});
            events.push((
                "response.output_item.added",
                json!({"output_index": output_index, "item": {
                    "id": item_id, "type": "message", "status": "in_progress",
                    "role": "assistant", "content": [],
                }}),
            ));
            events.push((
                "response.content_part.added",
                merge(&at, json!({"part": part_start})),
            ));
            events.push((
                "response.output_text.delta",
                merge(&at, json!({"delta": text})),
            ));
            events.push((
                "response.output_text.done",
                merge(&at, json!({"text": text})),
            ));
            events.push((
                "response.content_part.done",
                merge(&at, json!({"part": part_done})),
            ));
            done
        }
        Item::FunctionCall { name, arguments } => {
            let item_id = id("fc_");
            let arguments = arguments.to_string();
            let base = json!({"id": item_id, "type": "function_call", "call_id": id("call_"), "name": name});
            let at = json!({"item_id": item_id, "output_index": output_index});
            events.push((
                "response.output_item.added",
                json!({"output_index": output_index, "item": merge(&base, json!({"status": "in_progress", "arguments": ""}))}),
            ));
            events.push((
                "response.function_call_arguments.delta",
                merge(&at, json!({"delta": arguments})),
            ));
            events.push((
                "response.function_call_arguments.done",
                merge(&at, json!({"arguments": arguments})),
            ));
            merge(
                &base,
                json!({"status": "completed", "arguments": arguments}),
            )
        }
        Item::CustomToolCall { name, input } => {
            let item_id = id("ctc_");
            let base = json!({"id": item_id, "type": "custom_tool_call", "call_id": id("call_"), "name": name});
            let at = json!({"item_id": item_id, "output_index": output_index});
            events.push((
                "response.output_item.added",
                json!({"output_index": output_index, "item": merge(&base, json!({"status": "in_progress", "input": ""}))}),
            ));
            events.push((
                "response.custom_tool_call_input.delta",
                merge(&at, json!({"delta": input})),
            ));
            events.push((
                "response.custom_tool_call_input.done",
                merge(&at, json!({"input": input})),
            ));
            merge(&base, json!({"status": "completed", "input": input}))
        }
    }
}

fn merge(base: &Value, extra: Value) -> Value {
    let mut out = base.clone();
    if let (Some(out), Value::Object(extra)) = (out.as_object_mut(), extra) {
        out.extend(extra);
    }
    out
}

fn stream(model: &str, items: Vec<Item>, usage: Usage) -> Reply {
    let response_id = id("resp_");
    let mut raw: Vec<(&'static str, Value)> = vec![
        (
            "response.created",
            json!({"response": response_object(&response_id, model, "in_progress", json!([]), Value::Null)}),
        ),
        (
            "response.in_progress",
            json!({"response": response_object(&response_id, model, "in_progress", json!([]), Value::Null)}),
        ),
    ];
    let mut output = Vec::new();
    for (output_index, item) in items.into_iter().enumerate() {
        let done = item_events(item, output_index, &mut raw);
        raw.push((
            "response.output_item.done",
            json!({"output_index": output_index, "item": done}),
        ));
        output.push(done);
    }
    raw.push((
        "response.completed",
        json!({"response": response_object(&response_id, model, "completed", Value::Array(output), usage_json(usage))}),
    ));
    let events = raw
        .into_iter()
        .enumerate()
        .map(|(seq, (name, data))| {
            let data = merge(&json!({"type": name, "sequence_number": seq}), data);
            Event::named(name, data)
        })
        .collect();
    sse(events)
}
