//! The server's memory: the turns still to serve and every request seen.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

use axum::http::HeaderMap;
use serde::{Deserialize, Serialize};

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
}

pub(crate) struct State {
    inner: Mutex<Inner>,
    side_reply: SideReply,
}

impl State {
    pub(crate) fn new(script: Script) -> Self {
        Self {
            inner: Mutex::new(Inner {
                turns: script.turns.into_iter().enumerate().collect(),
                errors_served: 0,
                requests: Vec::new(),
                side_calls: Vec::new(),
            }),
            side_reply: script.side_reply,
        }
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
        self.lock().requests.push(request);
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
