use pam_model_server::{Api, Script, Served, Turn, Usage};
use serde_json::{json, Value};

use crate::{post, start, Sse};

/// A main-conversation request as Claude Code sends it: tools declared and
/// the working directory stated in the system prompt.
fn agent_request(stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 32000,
        "stream": stream,
        "system": [{"type": "text", "text": "Environment\n - Primary working directory: /work/repo\n - Is a git repository: true\n"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Create hello.txt"}]}],
        "tools": [
            {"name": "Bash", "input_schema": {"type": "object"}},
            {"name": "Write", "input_schema": {"type": "object"}},
        ],
    })
}

const HEADERS: &[(&str, &str)] = &[
    ("anthropic-version", "2023-06-01"),
    ("x-api-key", "sk-secret-value"),
];

#[tokio::test]
async fn streamed_tool_call_carries_preamble_tool_use_and_scripted_usage() {
    let server = start(Script::new([Turn::write_file("hello.txt", "hi\n")
        .with_preamble("I'll write it.")
        .with_usage(1500, 300, 45)]))
    .await;

    let (status, body, content_type) =
        post(&server, "/v1/messages", HEADERS, &agent_request(true)).await;
    assert_eq!(status, 200);
    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
    let sse = Sse::parse(&body);
    assert_eq!(
        sse.names(),
        [
            "message_start",
            "ping",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ]
    );

    let start_usage = &sse.named("message_start")[0]["message"]["usage"];
    assert_eq!(start_usage["input_tokens"], 1500);
    assert_eq!(start_usage["cache_read_input_tokens"], 300);
    assert_eq!(start_usage["output_tokens"], 1);

    let blocks = sse.named("content_block_start");
    assert_eq!(blocks[0]["content_block"]["type"], "text");
    assert_eq!(blocks[1]["content_block"]["type"], "tool_use");
    assert_eq!(blocks[1]["content_block"]["name"], "Write");
    assert_eq!(blocks[1]["content_block"]["input"], json!({}));

    let deltas = sse.named("content_block_delta");
    assert_eq!(deltas[0]["delta"]["text"], "I'll write it.");
    let input: Value =
        serde_json::from_str(deltas[1]["delta"]["partial_json"].as_str().unwrap()).unwrap();
    assert_eq!(
        input,
        json!({"file_path": "/work/repo/hello.txt", "content": "hi\n"})
    );

    let end = sse.named("message_delta")[0];
    assert_eq!(end["delta"]["stop_reason"], "tool_use");
    assert_eq!(end["usage"]["output_tokens"], 45);
    assert_eq!(end["usage"]["input_tokens"], 1500);
    assert_eq!(end["usage"]["cache_read_input_tokens"], 300);
    assert_eq!(server.remaining_turns(), 0);
}

#[tokio::test]
async fn bash_turn_becomes_a_bash_tool_use() {
    let server = start(Script::new([Turn::run_command("cargo test")])).await;
    let (_, body, _) = post(&server, "/v1/messages", HEADERS, &agent_request(true)).await;
    let sse = Sse::parse(&body);
    let block = &sse.named("content_block_start")[0]["content_block"];
    assert_eq!(block["name"], "Bash");
    let delta = &sse.named("content_block_delta")[0]["delta"]["partial_json"];
    let input: Value = serde_json::from_str(delta.as_str().unwrap()).unwrap();
    assert_eq!(input["command"], "cargo test");
}

#[tokio::test]
async fn non_streaming_final_text() {
    let server = start(Script::new([Turn::text("Done.").with_usage(70, 1800, 9)])).await;
    let (status, body, _) = post(&server, "/v1/messages", HEADERS, &agent_request(false)).await;
    assert_eq!(status, 200);
    let message: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": "Done."}])
    );
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(message["model"], "claude-sonnet-4-5");
    assert_eq!(message["usage"]["input_tokens"], 70);
    assert_eq!(message["usage"]["cache_read_input_tokens"], 1800);
    assert_eq!(message["usage"]["output_tokens"], 9);
}

#[tokio::test]
async fn error_turn_fails_the_scripted_number_of_requests_then_moves_on() {
    let server = start(Script::new([
        Turn::error(529).times(2),
        Turn::text("Recovered."),
    ]))
    .await;
    for _ in 0..2 {
        let (status, body, _) = post(&server, "/v1/messages", HEADERS, &agent_request(true)).await;
        assert_eq!(status, 529);
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["type"], "error");
        assert_eq!(error["error"]["type"], "overloaded_error");
    }
    let (status, body, _) = post(&server, "/v1/messages", HEADERS, &agent_request(true)).await;
    assert_eq!(status, 200);
    assert!(body.contains("Recovered."));

    let served: Vec<Served> = server.requests().into_iter().map(|r| r.served).collect();
    assert_eq!(
        served,
        [
            Served::Turn { index: 0 },
            Served::Turn { index: 0 },
            Served::Turn { index: 1 }
        ]
    );
}

#[tokio::test]
async fn custom_error_body_is_served_verbatim() {
    let body =
        json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}});
    let server = start(Script::new([Turn::error(429).with_body(body.clone())])).await;
    let (status, text, _) = post(&server, "/v1/messages", HEADERS, &agent_request(false)).await;
    assert_eq!(status, 429);
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), body);
}

#[tokio::test]
async fn title_request_gets_json_side_reply_without_consuming_a_turn() {
    let server = start(
        Script::new([Turn::text("Main answer.")])
            .with_side_reply("Create greeting file", Usage::new(120, 0, 6)),
    )
    .await;
    let title_request = json!({
        "model": "claude-haiku-4-5",
        "max_tokens": 64000,
        "stream": true,
        "tools": [],
        "system": [{"type": "text", "text": "Generate a concise, sentence-case title"}],
        "messages": [{"role": "user", "content": "<session>Create hello.txt</session>"}],
        "output_config": {"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]
        }}},
    });
    let (status, body, _) = post(&server, "/v1/messages", HEADERS, &title_request).await;
    assert_eq!(status, 200);
    let sse = Sse::parse(&body);
    let text = sse.named("content_block_delta")[0]["delta"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        serde_json::from_str::<Value>(&text).unwrap(),
        json!({"title": "Create greeting file"})
    );
    assert_eq!(sse.named("message_delta")[0]["usage"]["output_tokens"], 6);
    assert_eq!(server.remaining_turns(), 1);

    let side = server.side_calls();
    assert_eq!(side.len(), 1);
    assert_eq!(side[0].api, Api::Anthropic);
    assert_eq!(side[0].model, "claude-haiku-4-5");
    assert_eq!(side[0].usage, Usage::new(120, 0, 6));

    let (_, body, _) = post(&server, "/v1/messages", HEADERS, &agent_request(true)).await;
    assert!(body.contains("Main answer."));
    assert_eq!(server.remaining_turns(), 0);
}

#[tokio::test]
async fn recording_redacts_keys_and_keeps_the_body() {
    let server = start(Script::new([Turn::text("ok")])).await;
    post(
        &server,
        "/v1/messages?beta=true",
        HEADERS,
        &agent_request(true),
    )
    .await;
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.api, Api::Anthropic);
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.query.as_deref(), Some("beta=true"));
    assert_eq!(r.model.as_deref(), Some("claude-sonnet-4-5"));
    assert_eq!(r.headers["x-api-key"], "[redacted]");
    assert_eq!(r.headers["anthropic-version"], "2023-06-01");
    assert!(r.body_contains("Create hello.txt"));
    assert!(!serde_json::to_string(r)
        .unwrap()
        .contains("sk-secret-value"));
}

#[tokio::test]
async fn count_tokens_and_unknown_paths() {
    let server = start(Script::default()).await;
    let (status, body, _) = post(
        &server,
        "/v1/messages/count_tokens",
        HEADERS,
        &agent_request(false),
    )
    .await;
    assert_eq!(status, 200);
    let count: Value = serde_json::from_str(&body).unwrap();
    assert!(count["input_tokens"].as_u64().unwrap() > 0);

    let (status, body, _) = post(&server, "/v1/nowhere", HEADERS, &json!({})).await;
    assert_eq!(status, 404);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["error"]["type"],
        "not_found_error"
    );
    assert_eq!(server.requests()[1].served, Served::NotFound);
}

#[tokio::test]
async fn exhausted_script_answers_text_with_zero_usage() {
    let server = start(Script::default()).await;
    let (status, body, _) = post(&server, "/v1/messages", HEADERS, &agent_request(false)).await;
    assert_eq!(status, 200);
    let message: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(message["usage"]["input_tokens"], 0);
    assert_eq!(server.requests()[0].served, Served::Exhausted);
}
