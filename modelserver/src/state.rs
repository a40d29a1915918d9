//! The server's memory: the turns still to serve and every request seen.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, watch};

use crate::script::{Action, Script, SideReply, Turn, Usage};

/// Header names whose values are credentials; recorded as `[redacted]` so a
/// capture or a test failure message never shows a key.
const SECRET_HEADERS: &[&str] = &[
    "authorization",
    "x-api-key",
    "x-goog-api-key",
    "api-key",
    "cookie",
    "proxy-authorization",
];

/// Which API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Api {
    Anthropic,
    OpenAi,
    Gemini,
    Unknown,
}

/// How the server answered a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Served {
    /// A turn of the main conversation (index into the script).
    Turn { index: usize },
    /// The script had no turn left: a plain text answer with zero usage.
    Exhausted,
    /// A side request, answered with the side reply.
    Side,
    /// Anything else the API offers (token counts, model lists, probes).
    Auxiliary,
    /// A path this server does not know; answered 404 like the real API.
    NotFound,
}

/// One HTTP request as the server received it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub api: Api,
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Lower-case names; secret values redacted.
    pub headers: BTreeMap<String, String>,
    /// The JSON body, or `Null` when there was none (a non-JSON body is kept
    /// as a string).
    pub body: serde_json::Value,
    /// Model named in the body or the path, when there is one.
    pub model: Option<String>,
    pub served: Served,
}

impl RecordedRequest {
    /// Whether any string in the JSON body (keys excluded) contains
    /// `needle`, e.g. an earlier turn's text in a resumed conversation.
    pub fn body_contains(&self, needle: &str) -> bool {
        crate::common::any_string(&self.body, &|s| s.contains(needle))
    }
}

/// A side request and the usage it was answered with, for per-model sums.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SideCall {
    pub api: Api,
    pub model: String,
    pub usage: Usage,
}

/// Counts a test can wait on (see [`crate::ModelServer::wait_for`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Every request recorded so far.
    pub requests: usize,
    /// Requests answered (or being held) with a script turn.
    pub turn_requests: usize,
    /// Requests held right now: not yet released, client still there.
    pub held: usize,
}

/// What the next main-conversation request gets.
pub(crate) enum Next {
    Turn { index: usize, turn: Turn },
    Exhausted,
}

struct Inner {
    turns: VecDeque<(usize, Turn)>,
    /// Requests already failed by the error turn at the front.
    errors_served: u32,
    requests: Vec<RecordedRequest>,
    side_calls: Vec<SideCall>,
    /// One sender per held request; released by sending, gone when its
    /// request is (the receiver is dropped with the request).
    held: Vec<oneshot::Sender<()>>,
}

pub(crate) struct State {
    inner: Mutex<Inner>,
    side_reply: SideReply,
    /// The script's turns by index, for how each one is delivered.
    script: Vec<Turn>,
    progress: watch::Sender<Progress>,
}

impl State {
    pub(crate) fn new(script: Script) -> Self {
        Self {
            inner: Mutex::new(Inner {
                turns: script.turns.iter().cloned().enumerate().collect(),
                errors_served: 0,
                requests: Vec::new(),
                side_calls: Vec::new(),
                held: Vec::new(),
            }),
            side_reply: script.side_reply,
            script: script.turns,
            progress: watch::Sender::new(Progress::default()),
        }
    }

    pub(crate) fn turn(&self, index: usize) -> Option<&Turn> {
        self.script.get(index)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; the
        // recording is still worth reading in the failing test.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn side_reply(&self) -> &SideReply {
        &self.side_reply
    }

    /// Takes the next main-conversation turn; an error turn stays at the
    /// front until it has failed `times` requests.
    pub(crate) fn next_turn(&self) -> Next {
        let mut inner = self.lock();
        let Some((index, turn)) = inner.turns.front().cloned() else {
            return Next::Exhausted;
        };
        if let Action::Error { times, .. } = &turn.action {
            inner.errors_served += 1;
            if inner.errors_served < *times {
                return Next::Turn { index, turn };
            }
        }
        inner.errors_served = 0;
        inner.turns.pop_front();
        Next::Turn { index, turn }
    }

    pub(crate) fn record(&self, request: RecordedRequest) {
        let turn = matches!(request.served, Served::Turn { .. });
        self.lock().requests.push(request);
        self.progress.send_modify(|p| {
            p.requests += 1;
            p.turn_requests += usize::from(turn);
        });
    }

    pub(crate) fn progress(&self) -> watch::Receiver<Progress> {
        self.progress.subscribe()
    }

    /// Registers a held request; it stays held until [`State::release_held`]
    /// or until the returned [`Held`] is dropped with its request.
    pub(crate) fn hold(self: &Arc<Self>) -> Held {
        let (tx, rx) = oneshot::channel();
        self.lock().held.push(tx);
        self.refresh_held();
        Held {
            rx: Some(rx),
            state: self.clone(),
        }
    }

    /// Lets every request held now go on; returns how many there were.
    pub(crate) fn release_held(&self) -> usize {
        let senders = std::mem::take(&mut self.lock().held);
        let released = senders.into_iter().filter(|tx| !tx.is_closed()).count();
        // Dropping a sender wakes its request just as sending would.
        self.refresh_held();
        released
    }

    fn refresh_held(&self) {
        let held = {
            let mut inner = self.lock();
            inner.held.retain(|tx| !tx.is_closed());
            inner.held.len()
        };
        self.progress.send_if_modified(|p| {
            let changed = p.held != held;
            p.held = held;
            changed
        });
    }

    pub(crate) fn record_side(&self, api: Api, model: &str, usage: Usage) {
        self.lock().side_calls.push(SideCall {
            api,
            model: model.to_owned(),
            usage,
        });
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    pub(crate) fn side_calls(&self) -> Vec<SideCall> {
        self.lock().side_calls.clone()
    }

    pub(crate) fn remaining_turns(&self) -> usize {
        self.lock().turns.len()
    }
}

/// A held request's side of the hold: [`Held::wait`] returns once it is
/// released; dropping it (the client went away) frees the hold.
pub(crate) struct Held {
    rx: Option<oneshot::Receiver<()>>,
    state: Arc<State>,
}

impl Held {
    pub(crate) async fn wait(mut self) {
        if let Some(rx) = self.rx.as_mut() {
            // An error means the sender was dropped by a release: go on.
            let _ = rx.await;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // The receiver goes first so that the sender reads as closed.
        drop(self.rx.take());
        self.state.refresh_held();
    }
}

pub(crate) fn redacted_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (name, value) in headers {
        let name = name.as_str().to_ascii_lowercase();
        let value = if SECRET_HEADERS.contains(&name.as_str()) {
            "[redacted]".to_owned()
        } else {
            String::from_utf8_lossy(value.as_bytes()).into_owned()
        };
        out.entry(name)
            .and_modify(|v: &mut String| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    out
}
