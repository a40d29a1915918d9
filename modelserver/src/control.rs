//! `/_pam/…`: the test's own endpoints, for driving a server started as a
//! separate process (shell scripts); not recorded as requests.
//!
//! * `GET /_pam/state` → `{"requests", "turn_requests", "held"}`
//! * `POST /_pam/release` → `{"released": N}`, see
//!   [`crate::ModelServer::release_held`]
//! * `GET /_pam/wait?turn_requests=N&held=M&requests=R&timeout_ms=T` →
//!   the state once every given count is reached (at least N turn
//!   requests, R requests, exactly M held), or `408` with the state after
//!   `T` ms (default 30 000).

use std::sync::Arc;
use std::time::Duration;

use axum::http::Method;
use axum::response::Response;
use serde_json::json;

use crate::common::json_response;
use crate::state::{Progress, State};

pub(crate) const PREFIX: &str = "/_pam/";

/// What `/_pam/wait` waits for; `None` fields are not looked at.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Until {
    pub requests: Option<usize>,
    pub turn_requests: Option<usize>,
    pub held: Option<usize>,
}

impl Until {
    pub(crate) fn reached(&self, p: &Progress) -> bool {
        self.requests.is_none_or(|n| p.requests >= n)
            && self.turn_requests.is_none_or(|n| p.turn_requests >= n)
            && self.held.is_none_or(|n| p.held == n)
    }
}

/// Waits until `until` holds; `Err` carries the counts at the timeout.
pub(crate) async fn wait(
    state: &State,
    until: Until,
    timeout: Duration,
) -> Result<Progress, Progress> {
    let mut rx = state.progress();
    let waited = tokio::time::timeout(timeout, rx.wait_for(|p| until.reached(p)))
        .await
        .map(|r| r.map(|progress| *progress));
    match waited {
        Ok(Ok(progress)) => Ok(progress),
        _ => Err(*rx.borrow()),
    }
}

pub(crate) async fn handle(
    state: &Arc<State>,
    method: &Method,
    path: &str,
    query: Option<&str>,
) -> Response {
    let progress = |p: Progress| json!(p);
    match (method.as_str(), &path[PREFIX.len()..]) {
        ("GET", "state") => json_response(200, progress(*state.progress().borrow())),
        ("POST", "release") => json_response(200, json!({"released": state.release_held()})),
        ("GET", "wait") => {
            let mut until = Until::default();
            let mut timeout = Duration::from_secs(30);
            for (key, value) in query
                .unwrap_or("")
                .split('&')
                .filter_map(|kv| kv.split_once('='))
            {
                let Ok(n) = value.parse::<usize>() else {
                    return bad_request(&format!("{key}={value} is not a number"));
                };
                match key {
                    "requests" => until.requests = Some(n),
                    "turn_requests" => until.turn_requests = Some(n),
                    "held" => until.held = Some(n),
                    "timeout_ms" => timeout = Duration::from_millis(n as u64),
                    other => return bad_request(&format!("unknown parameter {other}")),
                }
            }
            match wait(state, until, timeout).await {
                Ok(p) => json_response(200, progress(p)),
                Err(p) => json_response(408, progress(p)),
            }
        }
        _ => json_response(
            404,
            json!({"error": format!("{method} {path}: not a control endpoint")}),
        ),
    }
}

fn bad_request(message: &str) -> Response {
    json_response(400, json!({ "error": message }))
}
