//! The worker watch's protocol: its upgrade, and the requests a
//! worker writes on the upgraded connection (docs/api.md, "Worker watch").

use serde::{Deserialize, Serialize};

use super::{Heartbeat, LogChunk};

/// The `Upgrade` token of the worker watch: a worker that sends
/// `Connection: upgrade` and `Upgrade: pam-watch` with its
/// `GET /api/v1/workers/watch` gets `101 Switching Protocols`, and the
/// connection then carries the same Server-Sent Events text with no HTTP
/// framing, so pamd holds no HTTP buffers for an idle watch. Without the
/// header (curl, an older worker, a proxy that drops `Upgrade`) the watch
/// is a plain `200 text/event-stream` response (docs/api.md,
/// "Worker watch").
pub const WATCH_UPGRADE: &str = "pam-watch";

/// The header of the watch's `101` naming the requests this pamd takes on
/// the upgraded connection, comma-separated: [`WATCH_HEARTBEAT`],
/// [`WATCH_DESIRED_SET`]. A worker
/// writes a request there ([`WatchRequest`]) only when the pamd that
/// upgraded it (this replica, in a rolling upgrade) said so; otherwise it
/// sends the HTTP request.
pub const WATCH_ACCEPTS: &str = "pam-watch-accepts";

/// The request names a [`WATCH_ACCEPTS`] header value lists.
pub fn watch_accepts(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|t| !t.is_empty())
}

/// The [`WatchRequest::Heartbeat`] request, and the `event:` of its
/// answer: the [`DesiredSet`](super::DesiredSet) `POST /api/v1/workers/heartbeat` answers.
pub const WATCH_HEARTBEAT: &str = "heartbeat";

/// The [`WatchRequest::DesiredSet`] request, and the `event:` of its
/// answer: the [`DesiredSet`](super::DesiredSet) `GET /api/v1/workers/desired` answers.
pub const WATCH_DESIRED_SET: &str = "desired_set";

/// The [`WatchRequest::LogChunk`] line: a worker's answer to a
/// [`LogRead`](super::LogRead) frame, followed by its bytes (see
/// `protocol/logs.rs`). Not answered.
pub const WATCH_LOG_CHUNK: &str = "log_chunk";

/// The `event:` of a watch request's failure: a [`WatchError`].
pub const WATCH_ERROR: &str = "error";

/// A request a worker writes on its upgraded watch: one JSON
/// object per line (`{"heartbeat": {…}}`, `{"desired_set": {}}`), each
/// answered in order by one frame on the same connection, so a watching
/// worker holds one connection to pamd, not more for its heartbeats and
/// reads (docs/api.md, "Worker watch").
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WatchRequest {
    Heartbeat(Heartbeat),
    DesiredSet {},
    /// The answer to a `log_read` frame; `len` raw bytes follow the line.
    /// pamd answers nothing to it.
    LogChunk(LogChunk),
}

impl WatchRequest {
    /// Its name: its key, its answer's `event:`, and what
    /// [`WATCH_ACCEPTS`] lists.
    pub fn name(&self) -> &'static str {
        match self {
            WatchRequest::Heartbeat(_) => WATCH_HEARTBEAT,
            WatchRequest::DesiredSet {} => WATCH_DESIRED_SET,
            WatchRequest::LogChunk(_) => WATCH_LOG_CHUNK,
        }
    }
}

/// A watch request's failure: the HTTP status and error its HTTP request
/// would have had (`{"error": {"code", "message"}}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchError {
    pub status: u16,
    pub error: WatchErrorDetail,
}

/// [`WatchError`]'s code and message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatchErrorDetail {
    pub code: String,
    pub message: String,
}
