use pam_model_server::{Api, Script, Turn, Usage};
use serde_json::{json, Value};

use crate::{post, start, Sse};

const HEADERS: &[(&str, &str)] = &[("authorization", "Bearer sk-secret-value")];

/// Tools as codex 0.171 declares them for a bundled model: unified exec as
/// a function, apply_patch as a freeform (custom) tool.
fn codex_request(tools: Value) -> Value {
    json!({
        "model": "gpt-5.5",
        "stream": true,
        "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "<environment_context>\n  <cwd>/work/repo</cwd>\n</environment_context>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Create hello.txt"}]},
        ],
        "tools": tools,
    })
}

fn codex_tools() -> Value {
    json!([
        {"type": "function", "name": "exec_command", "parameters": {"type": "object"}},
        {"type": "custom", "name": "apply_patch", "format": {"type": "grammar"}},
        {"type": "web_search"},
    ])
}

fn completed(sse: &Sse) -> &Value {
    &sse.named("response.completed")[0]["response"]
}

#[tokio::test]
async fn write_becomes_a_freeform_apply_patch_call() {
    let server = start(Script::new([Turn::write_file(
        "src/hello.txt",
        "one\ntwo\n",
    )
    .with_preamble("Writing it.")
    .with_usage(1500, 300, 45)]))
    .await;
    let (status, body, content_type) = post(
        &server,
        "/v1/responses",
        HEADERS,
        &codex_request(codex_tools()),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(content_type.as_deref(), Some("text/event-stream"));
    let sse = Sse::parse(&body);
    let names = sse.names();
    assert_eq!(names.first(), Some(&"response.created"));
    assert_eq!(names.last(), Some(&"response.completed"));
    assert!(names.contains(&"response.custom_tool_call_input.delta"));
    for (i, (_, data)) in sse.events.iter().enumerate() {
        assert_eq!(data["sequence_number"], i);
    }

    let done = sse.named("response.output_item.done");
    assert_eq!(done.len(), 2);
    assert_eq!(done[0]["item"]["type"], "message");
    assert_eq!(done[0]["item"]["content"][0]["text"], "Writing it.");
    let call = &done[1]["item"];
    assert_eq!(call["type"], "custom_tool_call");
    assert_eq!(call["name"], "apply_patch");
    assert_eq!(
        call["input"],
        "*** Begin Patch\n*** Add File: src/hello.txt\n+one\n+two\n*** End Patch\n"
    );
    assert!(call["call_id"].as_str().unwrap().starts_with("call_"));

    let usage = &completed(&sse)["usage"];
    assert_eq!(usage["input_tokens"], 1800);
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 300);
    assert_eq!(usage["output_tokens"], 45);
    assert_eq!(usage["total_tokens"], 1845);
    assert_eq!(completed(&sse)["output"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn command_uses_whichever_shell_tool_is_declared() {
    let cases = [
        (codex_tools(), "exec_command", json!({"cmd": "cargo test"})),
        (
            json!([{"type": "function", "name": "shell_command"}]),
            "shell_command",
            json!({"command": "cargo test"}),
        ),
        (
            json!([{"type": "function", "name": "shell"}]),
            "shell",
            json!({"command": ["bash", "-lc", "cargo test"]}),
        ),
    ];
    for (tools, name, arguments) in cases {
        let server = start(Script::new([Turn::run_command("cargo test")])).await;
        let (_, body, _) = post(&server, "/v1/responses", HEADERS, &codex_request(tools)).await;
        let sse = Sse::parse(&body);
        let item = &sse.named("response.output_item.done")[0]["item"];
        assert_eq!(item["type"], "function_call");
        assert_eq!(item["name"], name);
        let parsed: Value = serde_json::from_str(item["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(parsed, arguments);
    }
}

#[tokio::test]
async fn write_without_apply_patch_goes_through_the_shell() {
    let server = start(Script::new([Turn::write_file("a.txt", "x")])).await;
    let tools = json!([{"type": "function", "name": "exec_command"}]);
    let (_, body, _) = post(&server, "/v1/responses", HEADERS, &codex_request(tools)).await;
    let sse = Sse::parse(&body);
    let item = &sse.named("response.output_item.done")[0]["item"];
    assert_eq!(item["name"], "exec_command");
    assert!(item["arguments"]
        .as_str()
        .unwrap()
        .contains("cat > 'a.txt'"));
}

#[tokio::test]
async fn final_text_streams_deltas_and_usage() {
    let server = start(Script::new([
        Turn::text("All done.").with_usage(70, 1800, 9)
    ]))
    .await;
    let (_, body, _) = post(
        &server,
        "/v1/responses",
        HEADERS,
        &codex_request(codex_tools()),
    )
    .await;
    let sse = Sse::parse(&body);
    assert_eq!(
        sse.named("response.output_text.delta")[0]["delta"],
        "All done."
    );
    let usage = &completed(&sse)["usage"];
    assert_eq!(usage["input_tokens"], 1870);
    assert_eq!(usage["input_tokens_details"]["cached_tokens"], 1800);
    assert_eq!(usage["output_tokens"], 9);
    assert_eq!(completed(&sse)["status"], "completed");
}

#[tokio::test]
async fn error_turn_answers_with_openai_error_envelope() {
    let server = start(Script::new([Turn::error(500).times(2), Turn::text("ok")])).await;
    for _ in 0..2 {
        let (status, body, _) = post(
            &server,
            "/v1/responses",
            HEADERS,
            &codex_request(codex_tools()),
        )
        .await;
        assert_eq!(status, 500);
        let error: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(error["error"]["type"], "server_error");
    }
    let (status, _, _) = post(
        &server,
        "/v1/responses",
        HEADERS,
        &codex_request(codex_tools()),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(server.remaining_turns(), 0);
}

#[tokio::test]
async fn toolless_request_is_a_side_call() {
    let server = start(Script::new([Turn::text("main")])).await;
    let mut request = codex_request(json!([]));
    request["model"] = json!("gpt-5.5-mini");
    let (status, body, _) = post(&server, "/v1/responses", HEADERS, &request).await;
    assert_eq!(status, 200);
    assert!(body.contains("Scripted side reply"));
    assert_eq!(server.remaining_turns(), 1);
    let side = server.side_calls();
    assert_eq!(side[0].api, Api::OpenAi);
    assert_eq!(side[0].model, "gpt-5.5-mini");
    assert_eq!(side[0].usage, Usage::new(7, 0, 3));
    assert_eq!(server.requests()[0].headers["authorization"], "[redacted]");
}

#[tokio::test]
async fn models_list() {
    let server = start(Script::default()).await;
    let response = reqwest::get(format!("{}/v1/models", server.base_url()))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    let list: Value = response.json().await.unwrap();
    assert_eq!(list["object"], "list");
    assert!(!list["data"].as_array().unwrap().is_empty());
}
