use pam_model_server::{Api, Script, Served, Turn, Usage};
use serde_json::{json, Value};

use crate::{post, start, Sse};

const HEADERS: &[(&str, &str)] = &[("x-goog-api-key", "gk-secret-value")];
const STREAM: &str = "/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse";

fn agent_request() -> Value {
    json!({
        "contents": [{"role": "user", "parts": [
            {"text": "<session_context>\n- **Workspace Directories:**\n  - /work/repo\n- **Directory Structure:**\n</session_context>"},
            {"text": "Create hello.txt"},
        ]}],
        "tools": [{"functionDeclarations": [
            {"name": "write_file"}, {"name": "run_shell_command"}, {"name": "read_file"},
        ]}],
    })
}

fn only_chunk(body: &str) -> Value {
    let sse = Sse::parse(body);
    assert_eq!(sse.events.len(), 1);
    assert_eq!(sse.events[0].0, None, "Gemini events are data-only");
    sse.events[0].1.clone()
}

#[tokio::test]
async fn streamed_write_file_call_with_usage_metadata() {
    let server = start(Script::new([Turn::write_file("hello.txt", "hi\n")
        .with_preamble("Writing.")
        .with_usage(1500, 300, 45)]))
    .await;
    let (status, body, content_type) = post(&server, STREAM, HEADERS, &agent_request()).await;
    assert_eq!(status, 200);
    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
    let chunk = only_chunk(&body);
    let candidate = &chunk["candidates"][0];
    assert_eq!(candidate["finishReason"], "STOP");
    assert_eq!(candidate["content"]["role"], "model");
    let parts = candidate["content"]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["text"], "Writing.");
    assert_eq!(parts[1]["functionCall"]["name"], "write_file");
    assert_eq!(
        parts[1]["functionCall"]["args"],
        json!({"file_path": "/work/repo/hello.txt", "content": "hi\n"})
    );
    assert_eq!(
        chunk["usageMetadata"],
        json!({
            "promptTokenCount": 1800,
            "candidatesTokenCount": 45,
            "cachedContentTokenCount": 300,
            "totalTokenCount": 1845,
        })
    );
    assert_eq!(chunk["modelVersion"], "gemini-3.8-flash");

    let recorded = &server.requests()[0];
    assert_eq!(recorded.api, Api::Gemini);
    assert_eq!(
        recorded.path,
        "/v1beta/models/gemini-3.8-flash:streamGenerateContent"
    );
    assert_eq!(recorded.query.as_deref(), Some("alt=sse"));
    assert_eq!(recorded.model.as_deref(), Some("gemini-3.8-flash"));
    assert_eq!(recorded.headers["x-goog-api-key"], "[redacted]");
}

#[tokio::test]
async fn shell_turn_and_final_text() {
    let server = start(Script::new([
        Turn::run_command("cargo test"),
        Turn::text("Done.").with_usage(70, 1800, 9),
    ]))
    .await;
    let (_, body, _) = post(&server, STREAM, HEADERS, &agent_request()).await;
    let call = &only_chunk(&body)["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call["name"], "run_shell_command");
    assert_eq!(call["args"]["command"], "cargo test");

    let (_, body, _) = post(&server, STREAM, HEADERS, &agent_request()).await;
    let chunk = only_chunk(&body);
    assert_eq!(
        chunk["candidates"][0]["content"]["parts"][0]["text"],
        "Done."
    );
    assert_eq!(chunk["usageMetadata"]["promptTokenCount"], 1870);
}

#[tokio::test]
async fn error_turn_uses_google_error_envelope() {
    let server = start(Script::new([Turn::error(503)])).await;
    let (status, body, _) = post(&server, STREAM, HEADERS, &agent_request()).await;
    assert_eq!(status, 503);
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], 503);
    assert_eq!(error["error"]["status"], "UNAVAILABLE");
}

#[tokio::test]
async fn routing_classifier_gets_schema_shaped_json_and_keeps_the_turn() {
    let server =
        start(Script::new([Turn::text("main")]).with_side_reply("simple", Usage::new(120, 0, 6)))
            .await;
    let classifier = json!({
        "contents": [{"role": "user", "parts": [{"text": "Create hello.txt"}]}],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "OBJECT", "properties": {
                "complexity_reasoning": {"type": "STRING"},
                "complexity_score": {"type": "INTEGER"},
            }},
        },
    });
    let (status, body, _) = post(
        &server,
        "/v1beta/models/gemini-3.5-flash-lite:generateContent",
        HEADERS,
        &classifier,
    )
    .await;
    assert_eq!(status, 200);
    let response: Value = serde_json::from_str(&body).unwrap();
    let text = response["candidates"][0]["content"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(text).unwrap(),
        json!({"complexity_reasoning": "simple", "complexity_score": 1})
    );
    assert_eq!(response["usageMetadata"]["promptTokenCount"], 120);
    assert_eq!(server.remaining_turns(), 1);
    assert_eq!(server.requests()[0].served, Served::Side);
    assert_eq!(server.side_calls()[0].model, "gemini-3.5-flash-lite");
}

#[tokio::test]
async fn non_streaming_generate_and_count_tokens() {
    let server = start(Script::new([Turn::text("plain")])).await;
    let (status, body, _) = post(
        &server,
        "/v1beta/models/gemini-3.8-flash:generateContent",
        HEADERS,
        &agent_request(),
    )
    .await;
    assert_eq!(status, 200);
    let response: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        response["candidates"][0]["content"]["parts"][0]["text"],
        "plain"
    );

    let (status, body, _) = post(
        &server,
        "/v1beta/models/gemini-3.8-flash:countTokens",
        HEADERS,
        &agent_request(),
    )
    .await;
    assert_eq!(status, 200);
    let count: Value = serde_json::from_str(&body).unwrap();
    assert!(count["totalTokens"].as_u64().unwrap() > 0);
    assert_eq!(server.requests()[1].served, Served::Auxiliary);
}
