//! The worker ↔ controller wire protocol: serde types only, no I/O.
//!
//! pam-worker sends [`RegisterRequest`], [`Heartbeat`] and [`SignalBatch`];
//! pamd answers with [`RegisterResponse`], [`DesiredSet`] and [`SignalAck`].
//! Both sides use these types, so a field added here is added for both.
//! Every body is JSON; optional fields are omitted when empty and default
//! when absent, so an older peer that does not know a new optional field
//! still reads the message.
//!
//! # Signals (pam-data-model.txt, `processed_signals`)
//!
//! * `started`, `finished`, `failed`, `lost`, `orphan` are **one-shot**: the
//!   controller applies each at most once per `(run_id, attempt, kind)`.
//! * `progress` is **repeated**: it carries `seq` (1, 2, 3 … within an
//!   attempt) and applies only when `seq > runs.last_progress_seq`.
//! * Every signal carries `attempt`. Lower than the run's → `stale` (dropped,
//!   no write, no event); higher → `rejected` (a protocol error: attempts are
//!   issued centrally, a worker can never be ahead).
//!
//! # Outbox policy (what the worker does with a [`SignalAck`])
//!
//! * `applied`, `duplicate`, `stale` → the entry is done: delete it. A
//!   duplicate or stale signal can never become applicable later, so keeping
//!   it would only replay it forever.
//! * `rejected` → a protocol error (a malformed signal, an attempt from the
//!   future, an unknown run). Retrying rarely helps, but a controller that
//!   has not yet seen a just-created run might reject transiently, so the
//!   worker keeps the entry and retries it up to [`MAX_REJECTIONS`] times,
//!   then moves it aside (never silently deletes it) and logs an error.
//! * An entry with no result in the ack (a short ack) stays pending.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::state::Platform;

/// How many times a worker resends a signal the controller `rejected`
/// before it gives up on it (moves it aside with an error log).
pub const MAX_REJECTIONS: u32 = 5;

/// `failed.reason` when the provider command could not be started
/// (ENOENT, EACCES, …): the run's `failure_reason` becomes `spawn_failed`.
pub const REASON_SPAWN_FAILED: &str = "spawn_failed";

/// `failed.reason` when the provider's own final result reported failure
/// (claude `is_error`, codex `turn.failed`, gemini `status: error`). The
/// seed has no failure_reason for it: the run's reason stays NULL.
pub const REASON_PROVIDER_FAILED: &str = "provider_failed";

mod session;
pub use session::{parse_session_name, session_name, InvalidSessionName, SESSION_PREFIX};

pub use crate::capabilities::{Capabilities, ProviderCapability};

mod signal_name;
pub use signal_name::{SignalName, UnknownSignal};
mod workspace;
pub use workspace::{GitCredentials, WorkspaceOrder, WorkspaceResult, RESULT_PATCH_MAX_BYTES};

mod activity;
pub use activity::{
    one_line, Entry, EntryKind, ACTIVITY_KEPT, ACTIVITY_PER_SIGNAL_MAX, ACTIVITY_TEXT_MAX_CHARS,
    SESSION_ID_MAX_BYTES, TOOL_NAME_MAX_BYTES, TRANSCRIPT_TEXT_MAX_BYTES,
};

mod version;
pub use version::{protocol_mismatch, protocol_of, Peer, PROTOCOL_MIN, PROTOCOL_VERSION};

mod logs;
pub use logs::{
    LogChunk, LogChunkError, LogFile, LogRead, TimeIndex, LOG_CHUNK_MAX, WATCH_LOG_READ,
    WATCH_SERVES,
};

mod watch;
pub use watch::{
    watch_accepts, WatchError, WatchErrorDetail, WatchRequest, WATCH_ACCEPTS, WATCH_DESIRED_SET,
    WATCH_ERROR, WATCH_HEARTBEAT, WATCH_LOG_CHUNK, WATCH_UPGRADE,
};

/// `POST /api/v1/workers/register`: a worker introduces itself at start.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RegisterRequest {
    /// Operator-chosen host name (`--name`), unique across the fleet.
    pub name: String,
    /// The worker's operating system.
    pub platform: Platform,
    /// The worker's instance id, generated once and persisted in its data
    /// dir (OQ-14): the controller pins it and flags a second presenter.
    pub instance_id: Uuid,
    /// How many runs this host runs at once.
    pub capacity: u32,
    /// Host labels for run target selectors.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// The worker's version (`CARGO_PKG_VERSION`), for the operator's eyes.
    pub version: String,
    /// What this host can run. Absent (an older worker): pamd
    /// keeps what it knew, and a host that never reported any is taken to
    /// run every provider, as before capabilities existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Capabilities>,
    /// The worker protocol the worker speaks ([`PROTOCOL_VERSION`]);
    /// absent: 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
}

/// The controller's answer to a [`RegisterRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RegisterResponse {
    /// The host's database id.
    pub host_id: Uuid,
    /// How often the worker must heartbeat; the controller marks it offline
    /// after three missed beats.
    pub heartbeat_seconds: u64,
    /// Whether the controller considers this instance a suspected clone
    /// (OQ-14): dispatch skips the host until an operator clears it. The
    /// worker goes on heartbeating; absent means false.
    #[serde(default)]
    pub instance_suspect: bool,
    /// The worker protocol pamd speaks ([`PROTOCOL_VERSION`]); absent: 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u32>,
}

/// One tmux session the worker sees, as reported in a [`Heartbeat`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionReport {
    /// The tmux session name (`pam-xxxxxxxx`).
    pub session_name: String,
    /// The run the worker maps the session to; absent for a `pam-*` session
    /// the worker has no record of (an orphan it cannot attribute).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
    /// The attempt the session runs; absent when `run_id` is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<i32>,
}

/// `POST /api/v1/workers/heartbeat`: liveness plus what is running.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Heartbeat {
    /// Same value as at registration (OQ-14).
    pub instance_id: Uuid,
    /// Every `pam-*` session alive on the worker's tmux socket.
    #[serde(default)]
    pub running: Vec<SessionReport>,
}

/// One run the controller wants to exist (or to stop) on this host.
/// `Debug` leaves the environment's values out (they may be Secrets).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DesiredRun {
    /// The run's id.
    pub run_id: Uuid,
    /// The attempt to run; the wrapper stamps it on every signal.
    pub attempt: i32,
    /// The tmux session to create (see [`session_name`]).
    pub session_name: String,
    /// `claude`, `codex`, `gemini`, `grok` or `exec`.
    pub provider: String,
    /// The prompt; replaces `{prompt}` in the provider's command line as one
    /// argument.
    pub prompt: String,
    /// Working directory on the worker host.
    pub cwd: String,
    /// The command for the `exec` provider, run as is. Ignored by the other
    /// providers, whose command line comes from the worker's config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Extra environment for the provider process (e.g. decrypted provider
    /// credentials): sent only while the run is spawning. Never
    /// logged.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Why the run's environment could not be built (a Secret or key
    /// missing or unreadable): the worker fails the spawn with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env_error: Option<String>,
    /// The run is to be stopped: the worker signals the session, waits the
    /// stop grace, then kills it.
    #[serde(default)]
    pub stop: bool,
    /// Operator signals sent to this attempt (`INT`, `TERM`, `KILL`, `HUP`,
    /// `QUIT`, `USR1`, `USR2`), in order. Every desired set lists all of
    /// them while the run is live (they survive a pamd restart: pamd
    /// rebuilds the list from the journal); the worker delivers each id
    /// once and remembers the ids it delivered with the session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<OperatorSignal>,
    /// Lines an attached operator typed (`pamctl attach`), to be typed into
    /// the session's pane (`tmux send-keys -l`, then Enter), in order; each
    /// is handed out once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input: Vec<String>,
    /// The worktree to prepare before the spawn, the provider's cwd;
    /// `cwd` is unused then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<WorkspaceOrder>,
    /// What the agent may do without asking, as settled when the run was
    /// created; the provider adapter turns it into the CLI's flags.
    /// Absent (an older pamd): the CLI's own default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<crate::kinds::Permissions>,
}

impl std::fmt::Debug for DesiredRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DesiredRun")
            .field("run_id", &self.run_id)
            .field("attempt", &self.attempt)
            .field("session_name", &self.session_name)
            .field("provider", &self.provider)
            .field("cwd", &self.cwd)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("env_error", &self.env_error)
            .field("stop", &self.stop)
            .field("permissions", &self.permissions)
            .finish_non_exhaustive()
    }
}

/// An operator signal for a run's session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OperatorSignal {
    /// Its id: the seq of the `run.signal_received` event that journaled it.
    pub id: i64,
    /// A [`SignalName`] as text (`INT`, `TERM`, `KILL`, `HUP`, `QUIT`,
    /// `USR1` or `USR2`). Text, not the enum, on purpose: a worker that
    /// meets a name it does not know (a newer pamd) skips that one signal
    /// instead of failing to read its whole desired set. Read it with
    /// [`OperatorSignal::name`].
    pub signal: String,
}

impl OperatorSignal {
    /// The signal, when it is one this side knows.
    pub fn name(&self) -> Result<SignalName, UnknownSignal> {
        self.signal.parse()
    }
}

/// The answer to a heartbeat: every run that should exist on this host.
/// Level-triggered: a run missing from the set should not exist.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DesiredSet {
    /// The runs, in no particular order.
    #[serde(default)]
    pub runs: Vec<DesiredRun>,
}

/// What a [`Signal`] says happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SignalKind {
    /// The wrapper spawned the provider process (spawning → running).
    Started,
    /// The provider's structured stream produced a progress item; carries
    /// `seq` and maybe `usage`.
    Progress,
    /// The wrapper's child exited, any way at all; carries `exit_code`
    /// (128 + signal number for a signal death) and the provider's final
    /// `usage` when it reported one.
    Finished,
    /// The provider could not be started (`reason: spawn_failed`, no
    /// `started` or `finished` follows) or its final result reported failure
    /// (`reason: provider_failed`, a `finished` follows).
    Failed,
    /// The worker found the run's session gone without a `finished`
    /// (→ failed, `session_lost`).
    Lost,
    /// A `pam-*` session the controller no longer wants on this host is still
    /// alive; the controller journals `run.orphan_detected`.
    Orphan,
}

impl SignalKind {
    /// One-shot kinds are applied at most once per (run, attempt, kind);
    /// only `progress` repeats.
    pub fn is_one_shot(self) -> bool {
        !matches!(self, SignalKind::Progress)
    }

    /// The value on the wire and in `processed_signals.kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            SignalKind::Started => "started",
            SignalKind::Progress => "progress",
            SignalKind::Finished => "finished",
            SignalKind::Failed => "failed",
            SignalKind::Lost => "lost",
            SignalKind::Orphan => "orphan",
        }
    }
}

impl fmt::Display for SignalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Token usage and cost as a provider reports them.
///
/// On a `progress` signal it is that step's usage, which pamd adds to the
/// attempt's (at most once: only a progress signal that advances
/// `last_progress_seq` counts); on `finished` it is the provider's final
/// totals for the attempt, which replace what the steps added up to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenUsage {
    /// Input (prompt) tokens, cached ones included.
    pub input_tokens: u64,
    /// The part of `input_tokens` served from the provider's prompt cache
    /// (priced lower); absent means 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Output (completion) tokens.
    pub output_tokens: u64,
    /// The model the provider reports (claude's `message.model`), for
    /// pamd's price table; absent: the provider's default price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Cost in US dollars when the provider reports one (claude's
    /// `total_cost_usd`, a client-side estimate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// The same figures per model, when the provider reports them apart
    /// (claude's `modelUsage`: the main model and the small one it uses
    /// for side requests); their sums are the figures above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub by_model: Vec<ModelUsage>,
}

/// Most models one [`TokenUsage`] lists.
pub const USAGE_MODELS_MAX: usize = 16;

/// One model's share of a [`TokenUsage`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ModelUsage {
    /// The model's name as the provider reports it.
    pub model: String,
    /// Input tokens, cached ones included.
    pub input_tokens: u64,
    /// The part of `input_tokens` read from the prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Its cost in US dollars, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The longest [`Signal::message`] a worker sends (longer text is cut at a
/// character boundary) and pamd accepts.
pub const SIGNAL_MESSAGE_MAX_BYTES: usize = 1024;

/// `text` cut to at most `max` bytes at a character boundary, with `…` when
/// cut.
pub fn truncate_message(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// One fact about one attempt of one run, written by the wrapper (or the
/// agent, for `lost`/`orphan`) to the outbox and shipped at least once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Signal {
    /// The run the signal is about.
    pub run_id: Uuid,
    /// The attempt that is speaking (REQUIRED, ≥ 1).
    pub attempt: i32,
    /// What happened.
    pub kind: SignalKind,
    /// `progress` only: 1, 2, 3 … within the attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<i64>,
    /// `finished` only: the exit code, 128 + signal for a signal death.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// `failed`: [`REASON_SPAWN_FAILED`] or [`REASON_PROVIDER_FAILED`];
    /// `lost`/`orphan`: a short human explanation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Why, in words, at most [`SIGNAL_MESSAGE_MAX_BYTES`], never a Secret
    /// value: `failed` with [`REASON_SPAWN_FAILED`] as the worker saw it
    /// (`run cwd /srv/x is not a directory on this host`); `failed` with
    /// [`REASON_PROVIDER_FAILED`] the provider's own error text (`API
    /// Error: 500 …`); `finished` with a non-zero exit code the last
    /// error the provider printed. pamd keeps it as the run's
    /// `status.message` and in `run.failed` / `run.finished`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `progress`: usage of that step; `finished`: the provider's final
    /// totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    /// `progress`: the attempt's usage so far, each model call counted
    /// once (a provider that repeats a call's usage on several lines is
    /// counted by the worker, not summed). It replaces what pamd counted
    /// for the attempt, as `finished`'s `usage` does; preferred over
    /// `usage` when both are present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt_usage: Option<TokenUsage>,
    /// `progress`: what the agent did since the last progress signal, cut
    /// to short excerpts ([`Entry::excerpt`]), at most
    /// [`ACTIVITY_PER_SIGNAL_MAX`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub activity: Vec<Entry>,
    /// `progress`, `finished`: the provider's session id (claude's
    /// `session_id`, codex's `thread_id`), with which a later run can
    /// resume the conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// The tmux session the attempt runs in, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_name: Option<String>,
    /// `finished` of a run with a workspace: what its worktree came to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<WorkspaceResult>>,
    /// When it happened on the worker, RFC 3339 UTC.
    pub at: String,
}

/// Why a [`Signal`] is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} signal: {problem}")]
pub struct InvalidSignal {
    pub kind: SignalKind,
    pub problem: &'static str,
}

impl Signal {
    /// A signal of `kind` with only the required fields set.
    pub fn new(run_id: Uuid, attempt: i32, kind: SignalKind, at: String) -> Signal {
        Signal {
            run_id,
            attempt,
            kind,
            seq: None,
            exit_code: None,
            reason: None,
            message: None,
            usage: None,
            attempt_usage: None,
            activity: Vec::new(),
            session_id: None,
            session_name: None,
            result: None,
            at,
        }
    }

    /// Checks the shape rules both sides rely on: attempt ≥ 1; `progress`
    /// has `seq` ≥ 1 and only it has a seq; `finished` has an exit code;
    /// `failed` has a reason.
    pub fn validate(&self) -> Result<(), InvalidSignal> {
        let bad = |problem| {
            Err(InvalidSignal {
                kind: self.kind,
                problem,
            })
        };
        if self.attempt < 1 {
            return bad("attempt must be >= 1");
        }
        match self.kind {
            SignalKind::Progress if !matches!(self.seq, Some(s) if s >= 1) => {
                bad("progress needs seq >= 1")
            }
            k if k != SignalKind::Progress && self.seq.is_some() => {
                bad("only progress carries a seq")
            }
            SignalKind::Finished if self.exit_code.is_none() => bad("finished needs exit_code"),
            SignalKind::Failed if self.reason.is_none() => bad("failed needs a reason"),
            k if k != SignalKind::Finished && self.result.is_some() => {
                bad("only finished carries a result")
            }
            _ if self
                .message
                .as_ref()
                .is_some_and(|m| m.len() > SIGNAL_MESSAGE_MAX_BYTES) =>
            {
                bad("message is longer than 1024 bytes")
            }
            k if k != SignalKind::Progress
                && (!self.activity.is_empty() || self.attempt_usage.is_some()) =>
            {
                bad("only progress carries activity or attempt_usage")
            }
            _ if self.activity.len() > ACTIVITY_PER_SIGNAL_MAX => {
                bad("more than 16 activity items")
            }
            _ if self.activity.iter().any(|e| e.activity_problem().is_some()) => {
                bad("an activity item is not an excerpt (kind, 200-character text and target)")
            }
            _ if self
                .session_id
                .as_ref()
                .is_some_and(|s| s.is_empty() || s.len() > SESSION_ID_MAX_BYTES) =>
            {
                bad("session_id is empty or longer than 256 bytes")
            }
            _ if [&self.usage, &self.attempt_usage]
                .into_iter()
                .flatten()
                .any(|u| u.by_model.len() > USAGE_MODELS_MAX) =>
            {
                bad("usage lists more than 16 models")
            }
            _ => Ok(()),
        }
    }
}

/// `POST /api/v1/workers/signals`: signals in outbox (creation) order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SignalBatch {
    /// Applied by the controller in one transaction, in this order.
    pub signals: Vec<Signal>,
}

/// What the controller did with one signal of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SignalOutcome {
    /// Written: a one-shot signal's transition was applied and its event
    /// journaled; a `progress` signal only moved `last_progress_seq` and
    /// journals no event.
    Applied,
    /// Already applied before (a one-shot seen again, or a progress seq not
    /// above `last_progress_seq`): nothing written.
    Duplicate,
    /// From an attempt older than the run's: dropped, nothing written.
    Stale,
    /// A protocol error (malformed, attempt from the future, unknown run):
    /// nothing written; `message` says why.
    Rejected,
}

impl SignalOutcome {
    /// Whether the worker may delete the outbox entry (see the module doc).
    pub fn settles(self) -> bool {
        !matches!(self, SignalOutcome::Rejected)
    }
}

/// The outcome of one signal, by its index in the batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SignalResult {
    /// Index into [`SignalBatch::signals`].
    pub index: usize,
    /// What happened to it.
    pub outcome: SignalOutcome,
    /// A human explanation, for `rejected` at least.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The controller's answer to a [`SignalBatch`], sent after its commit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SignalAck {
    /// One result per signal; a signal without one stays in the outbox.
    pub results: Vec<SignalResult>,
}

/// The tail of a run's output, shipped at a bounded rate for the dashboard
/// and `pamctl logs`. Never stored in PostgreSQL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OutputSnapshot {
    /// The run.
    pub run_id: Uuid,
    /// The attempt whose log this is.
    pub attempt: i32,
    /// The last lines of the log (lossily decoded UTF-8).
    pub text: String,
    /// Total lines in the log so far (newline count).
    pub lines: u64,
    /// Total bytes in the log so far.
    pub bytes: u64,
}

#[cfg(test)]
mod tests;
