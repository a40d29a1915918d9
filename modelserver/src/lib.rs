//! A scripted stand-in for the Anthropic, OpenAI Responses and Gemini APIs,
//! good enough for the real Claude Code, Codex and Gemini CLIs to run whole
//! agent loops against it offline.
//!
//! A test writes a [`Script`] of API-neutral [`Turn`]s, starts a
//! [`ModelServer`], points a CLI at [`ModelServer::base_url`] and afterwards
//! reads [`ModelServer::requests`] and [`ModelServer::side_calls`].

mod anthropic;
mod common;
mod control;
mod delivery;
mod gemini;
mod openai;
pub mod script;
mod state;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State as AxumState;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

pub use script::{Action, Hold, Script, SideReply, Turn, Usage};
pub use state::{Api, Progress, RecordedRequest, Served, SideCall};

use common::Reply;
use control::Until;
use delivery::Holding;
use state::State;

/// A running server; dropping it stops it.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl ModelServer {
    /// Serves `script` on an ephemeral port of 127.0.0.1.
    pub async fn start(script: Script) -> anyhow::Result<Self> {
        Self::bind("127.0.0.1:0".parse()?, script).await
    }

    pub async fn bind(addr: SocketAddr, script: Script) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::new(script));
        let app = Router::new().fallback(handle).with_state(state.clone());
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let served = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = rx.await;
            });
            if let Err(e) = served.await {
                eprintln!("pam-model-server: {e}");
            }
        });
        Ok(Self {
            addr,
            state,
            shutdown: Some(tx),
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash or API version.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.requests()
    }

    /// The requests that were answered with a script turn, in order.
    pub fn turn_requests(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| matches!(r.served, Served::Turn { .. }))
            .collect()
    }

    /// Side requests (answered without consuming a turn) with their usage.
    pub fn side_calls(&self) -> Vec<SideCall> {
        self.state.side_calls()
    }

    /// Turns not yet served; an error turn still counts until it has failed
    /// all its requests.
    pub fn remaining_turns(&self) -> usize {
        self.state.remaining_turns()
    }

    /// Counts of requests so far and of requests held now.
    pub fn progress(&self) -> Progress {
        *self.state.progress().borrow()
    }

    /// Lets every request held now (see [`Turn::held`]) be answered;
    /// returns how many there were. Requests of a held turn that arrive
    /// later are held in their turn.
    pub fn release_held(&self) -> usize {
        self.state.release_held()
    }

    /// Requests held right now; one whose client went away no longer
    /// counts.
    pub fn held_requests(&self) -> usize {
        self.progress().held
    }

    /// Waits until at least `n` requests have been served with (or are
    /// held in) a script turn, and returns those requests. A held turn's
    /// request counts, and can be released, as soon as this returns.
    pub async fn wait_for_turn_requests(
        &self,
        n: usize,
        timeout: Duration,
    ) -> anyhow::Result<Vec<RecordedRequest>> {
        let until = Until {
            turn_requests: Some(n),
            ..Until::default()
        };
        self.wait(until, timeout, &format!("{n} turn requests"))
            .await?;
        Ok(self.turn_requests())
    }

    /// Waits until exactly `n` requests are held (`0`: every hold has
    /// been released or its client has gone).
    pub async fn wait_for_held(&self, n: usize, timeout: Duration) -> anyhow::Result<()> {
        let until = Until {
            held: Some(n),
            ..Until::default()
        };
        self.wait(until, timeout, &format!("{n} held requests"))
            .await
    }

    async fn wait(&self, until: Until, timeout: Duration, what: &str) -> anyhow::Result<()> {
        control::wait(&self.state, until, timeout)
            .await
            .map(drop)
            .map_err(|p| anyhow::anyhow!("waited {timeout:?} for {what}; now {p:?}"))
    }

    /// Stops accepting requests and waits for the server task to end.
    pub async fn shutdown(mut self) {
        self.stop();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        // A graceful shutdown waits for open requests: held ones must end.
        self.state.release_held();
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn handle(
    AxumState(state): AxumState<Arc<State>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    if path.starts_with(control::PREFIX) {
        return control::handle(&state, &method, &path, uri.query()).await;
    }
    let body = parse_body(&body);
    let (api, model, reply, served) = route(&state, &method, &path, &headers, &body);
    let turn = match served {
        Served::Turn { index } => state.turn(index),
        _ => None,
    };
    let pace = turn.and_then(Turn::pace);
    // Registered before the request is recorded, so that a test that saw
    // it arrive can release it.
    let holding = turn.and_then(|t| t.hold).map(|mode| Holding {
        mode,
        held: state.hold(),
    });
    state.record(RecordedRequest {
        api,
        method: method.to_string(),
        path,
        query: uri.query().map(str::to_owned),
        headers: state::redacted_headers(&headers),
        body,
        model,
        served,
    });
    delivery::deliver(reply, holding, pace).await
}

fn parse_body(bytes: &Bytes) -> Value {
    if bytes.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(bytes).into_owned()))
}

fn body_model(body: &Value) -> Option<String> {
    body.get("model").and_then(Value::as_str).map(str::to_owned)
}

type Routed = (Api, Option<String>, Reply, Served);

fn route(state: &State, method: &Method, path: &str, headers: &HeaderMap, body: &Value) -> Routed {
    let post = method == Method::POST;
    match path {
        // Claude Code probes the base URL with `HEAD /` before its first
        // request; a plain 200 is what a reachable API host gives.
        "/" => (
            Api::Unknown,
            None,
            StatusCode::OK.into_response().into(),
            Served::Auxiliary,
        ),
        "/v1/messages" if post => {
            let (response, served) = anthropic::messages(state, body);
            (Api::Anthropic, body_model(body), response, served)
        }
        "/v1/messages/count_tokens" if post => (
            Api::Anthropic,
            body_model(body),
            anthropic::count_tokens(body).into(),
            Served::Auxiliary,
        ),
        "/v1/responses" if post => {
            let (response, served) = openai::responses(state, body);
            (Api::OpenAi, body_model(body), response, served)
        }
        "/v1/models" if method == Method::GET => {
            if headers.contains_key("anthropic-version") {
                let models = anthropic::models().into();
                (Api::Anthropic, None, models, Served::Auxiliary)
            } else {
                (
                    Api::OpenAi,
                    None,
                    openai::models().into(),
                    Served::Auxiliary,
                )
            }
        }
        "/v1beta/models" if method == Method::GET => (
            Api::Gemini,
            None,
            gemini::models().into(),
            Served::Auxiliary,
        ),
        _ => match path
            .strip_prefix("/v1beta/models/")
            .and_then(gemini::parse_target)
        {
            Some((model, gemini::Method::CountTokens)) if post => (
                Api::Gemini,
                Some(model),
                gemini::count_tokens(body).into(),
                Served::Auxiliary,
            ),
            Some((model, m)) if post => {
                let streaming = matches!(m, gemini::Method::Stream);
                let (response, served) = gemini::generate(state, &model, body, streaming);
                (Api::Gemini, Some(model), response, served)
            }
            _ => not_found(path, headers),
        },
    }
}

/// Unknown paths get the 404 the API the client speaks would give, so a
/// CLI's optional call fails the way it does against the real service.
fn not_found(path: &str, headers: &HeaderMap) -> Routed {
    let (api, body) = if headers.contains_key("anthropic-version") {
        (Api::Anthropic, anthropic::error_body(404))
    } else if headers.contains_key("x-goog-api-key") || path.starts_with("/v1beta") {
        (Api::Gemini, gemini::error_body(404))
    } else {
        (
            Api::Unknown,
            json!({"error": {"message": format!("Unknown path {path}"), "type": "invalid_request_error", "code": "unknown_url"}}),
        )
    };
    (
        api,
        None,
        common::json_response(404, body).into(),
        Served::NotFound,
    )
}
