//! Held and paced turns: what a test needs to act in the middle of a run.

use std::time::{Duration, Instant};

use pam_model_server::{ModelServer, Script, Turn};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;

use crate::{start, Sse};

const WAIT: Duration = Duration::from_secs(10);
/// How long a test watches for something that must not happen.
const QUIET: Duration = Duration::from_millis(300);

fn responses_request() -> Value {
    json!({
        "model": "gpt-5.5",
        "stream": true,
        "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
    })
}

fn responses_call(server: &ModelServer) -> reqwest::RequestBuilder {
    reqwest::Client::new()
        .post(format!("{}/v1/responses", server.base_url()))
        .json(&responses_request())
}

#[tokio::test]
async fn held_request_is_answered_only_after_release() {
    let server = start(Script::new([
        Turn::text("first"),
        Turn::text("second").with_usage(10, 0, 2).held(),
    ]))
    .await;
    let first = responses_call(&server).send().await.unwrap();
    assert_eq!(first.status(), 200);
    assert_eq!(server.held_requests(), 0, "only the second turn is held");

    let mut second = tokio::spawn(responses_call(&server).send());
    let seen = server.wait_for_turn_requests(2, WAIT).await.unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(server.held_requests(), 1);
    assert!(
        tokio::time::timeout(QUIET, &mut second).await.is_err(),
        "no status line before the release"
    );

    assert_eq!(server.release_held(), 1);
    let response = second.await.unwrap().unwrap();
    assert_eq!(response.status(), 200);
    let sse = Sse::parse(&response.text().await.unwrap());
    let done = &sse.named("response.completed")[0]["response"];
    assert_eq!(done["output"][0]["content"][0]["text"], "second");
    assert_eq!(done["usage"]["input_tokens"], 10);
    server.wait_for_held(0, WAIT).await.unwrap();
    assert_eq!(server.release_held(), 0);
}

#[tokio::test]
async fn held_after_headers_starts_the_stream_then_waits() {
    let server = start(Script::new([Turn::text("late").held_after_headers()])).await;
    let mut response = tokio::time::timeout(WAIT, responses_call(&server).send())
        .await
        .expect("headers come before the release")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    assert_eq!(server.held_requests(), 1);
    assert!(
        tokio::time::timeout(QUIET, response.chunk()).await.is_err(),
        "no event before the release"
    );
    server.release_held();
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    let sse = Sse::parse(&String::from_utf8(body).unwrap());
    assert_eq!(sse.names().last(), Some(&"response.completed"));
}

#[tokio::test]
async fn held_error_turn_fails_after_release() {
    let server = start(Script::new([Turn::error(503).held_after_headers()])).await;
    let call = tokio::spawn(responses_call(&server).send());
    server.wait_for_held(1, WAIT).await.unwrap();
    server.release_held();
    let response = call.await.unwrap().unwrap();
    assert_eq!(response.status(), 503, "an error cannot follow a 200");
}

/// Sends a bare HTTP request over TCP and hangs up without reading.
async fn hang_up_after_sending(server: &ModelServer) {
    let body = responses_request().to_string();
    let mut socket = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    let head = format!(
        "POST /v1/responses HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        server.addr(),
        body.len()
    );
    socket.write_all(head.as_bytes()).await.unwrap();
    socket.write_all(body.as_bytes()).await.unwrap();
    server.wait_for_held(1, WAIT).await.unwrap();
    drop(socket);
}

#[tokio::test]
async fn client_that_disconnects_frees_a_held_request() {
    for turn in [Turn::text("x").held(), Turn::text("x").held_after_headers()] {
        let server = start(Script::new([turn.clone()])).await;
        hang_up_after_sending(&server).await;
        server
            .wait_for_held(0, WAIT)
            .await
            .unwrap_or_else(|e| panic!("{turn:?}: {e}"));
        assert_eq!(server.release_held(), 0);
        assert_eq!(server.turn_requests().len(), 1, "it still counts as asked");
    }
}

#[tokio::test]
async fn waiting_for_more_turn_requests_than_come_times_out() {
    let server = start(Script::new([Turn::text("x")])).await;
    let err = server
        .wait_for_turn_requests(1, Duration::from_millis(50))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("1 turn requests"), "{err}");
}

#[tokio::test]
async fn shutdown_ends_held_requests() {
    let server = start(Script::new([Turn::text("x").held()])).await;
    let call = tokio::spawn(responses_call(&server).send());
    server.wait_for_held(1, WAIT).await.unwrap();
    tokio::time::timeout(WAIT, server.shutdown())
        .await
        .expect("a held request does not keep the server up");
    let _ = call.await;
}

/// Reads the body chunk by chunk: (time from the start, chunk text).
async fn timed_chunks(response: &mut reqwest::Response, start: Instant) -> Vec<(Duration, String)> {
    let mut chunks = Vec::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        chunks.push((
            start.elapsed(),
            String::from_utf8_lossy(&chunk).into_owned(),
        ));
    }
    chunks
}

#[tokio::test]
async fn paced_stream_takes_at_least_the_delays() {
    let pace = Duration::from_millis(40);
    let server = start(Script::new([Turn::write_file("a.txt", "x\n")
        .with_preamble("Writing.")
        .paced(pace)]))
    .await;
    let request = json!({
        "model": "claude-sonnet-4-5", "stream": true, "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"name": "Write", "input_schema": {"type": "object"}}],
    });
    let start = Instant::now();
    let mut response = reqwest::Client::new()
        .post(format!("{}/v1/messages", server.base_url()))
        .header("anthropic-version", "2023-06-01")
        .json(&request)
        .send()
        .await
        .unwrap();
    let chunks = timed_chunks(&mut response, start).await;
    let body: String = chunks.iter().map(|(_, c)| c.as_str()).collect();
    let events = Sse::parse(&body).events.len();
    assert_eq!(events, 10);
    // Measured from the request: a slow reader may merge chunks, but the
    // last event cannot leave before the sum of the delays.
    let (last, _) = chunks.last().unwrap();
    assert!(
        *last >= pace * (events as u32 - 1),
        "{events} events in {last:?}"
    );
    assert!(chunks.len() > 1, "streamed in pieces");
    assert!(
        chunks[0].1.contains("message_start") && !chunks[0].1.contains("message_stop"),
        "the start arrives before the end: {:?}",
        chunks[0].1
    );
}

#[tokio::test]
async fn paced_gemini_stream_sends_a_chunk_per_part() {
    let pace = Duration::from_millis(200);
    let server = start(Script::new([Turn::run_command("ls")
        .with_preamble("Looking.")
        .with_usage(100, 20, 5)
        .paced(pace)]))
    .await;
    let request = json!({
        "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
        "tools": [{"functionDeclarations": [{"name": "run_shell_command"}]}],
    });
    let start = Instant::now();
    let mut response = reqwest::Client::new()
        .post(format!(
            "{}/v1beta/models/gemini-3.8-flash:streamGenerateContent?alt=sse",
            server.base_url()
        ))
        .json(&request)
        .send()
        .await
        .unwrap();
    let chunks = timed_chunks(&mut response, start).await;
    assert!(chunks.last().unwrap().0 >= pace);
    let body: String = chunks.iter().map(|(_, c)| c.as_str()).collect();
    let sse = Sse::parse(&body);
    assert_eq!(sse.events.len(), 2);
    let (first, last) = (&sse.events[0].1, &sse.events[1].1);
    assert_eq!(
        first["candidates"][0]["content"]["parts"][0]["text"],
        "Looking."
    );
    assert!(first.get("usageMetadata").is_none());
    assert!(first["candidates"][0].get("finishReason").is_none());
    let call = &last["candidates"][0]["content"]["parts"][0]["functionCall"];
    assert_eq!(call["name"], "run_shell_command");
    assert_eq!(last["candidates"][0]["finishReason"], "STOP");
    assert_eq!(last["usageMetadata"]["promptTokenCount"], 120);
}

#[tokio::test]
async fn control_endpoints_wait_and_release() {
    let server = start(Script::new([Turn::text("x").held()])).await;
    let control = |path: &str| format!("{}/_pam/{path}", server.base_url());
    let client = reqwest::Client::new();
    let timed_out = client
        .get(control("wait?turn_requests=1&timeout_ms=50"))
        .send()
        .await
        .unwrap();
    assert_eq!(timed_out.status(), 408);

    let call = tokio::spawn(responses_call(&server).send());
    let reached: Value = client
        .get(control("wait?turn_requests=1&held=1&timeout_ms=10000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        reached,
        json!({"requests": 1, "turn_requests": 1, "held": 1})
    );
    let released: Value = client
        .post(control("release"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(released, json!({"released": 1}));
    assert_eq!(call.await.unwrap().unwrap().status(), 200);
    let state: Value = client
        .get(control("state"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(state["held"], 0);
    assert_eq!(server.requests().len(), 1, "control calls are not recorded");
    let bad = client.get(control("wait?soon=1")).send().await.unwrap();
    assert_eq!(bad.status(), 400);
}
