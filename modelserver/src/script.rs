//! What the fake model answers, written once per test in API-neutral terms.
//!
//! The same script drives Claude Code, Codex and Gemini CLI: each API module
//! translates a turn into its own wire shapes and into whichever tool the
//! calling CLI declared for the job.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Token counts reported for one model response.
///
/// `input_tokens` is the uncached part of the prompt (Anthropic's meaning).
/// APIs whose prompt count includes the cached part (OpenAI `input_tokens`,
/// Gemini `promptTokenCount`) report `input_tokens + cached_input_tokens`
/// there, so a test can assert one set of numbers against every CLI.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub const fn new(input_tokens: u64, cached_input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            cached_input_tokens,
            output_tokens,
        }
    }

    /// Prompt size as APIs that count cached tokens inside the prompt see it.
    pub fn prompt_total(&self) -> u64 {
        self.input_tokens + self.cached_input_tokens
    }
}

/// What the model does in one response of the main conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Create or overwrite a file; a relative path is resolved against the
    /// working directory the CLI announces in its prompt.
    WriteFile { path: String, content: String },
    /// Run one shell command line.
    RunCommand { command: String },
    /// Answer with text and no tool call, which ends the agent loop.
    Text { text: String },
    /// Fail the HTTP request; repeated `times` requests in a row so a CLI's
    /// retries meet the same failure.
    Error {
        status: u16,
        /// Raw response body; `None` gives the API's own error envelope.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        body: Option<serde_json::Value>,
        #[serde(default = "one")]
        times: u32,
    },
}

fn one() -> u32 {
    1
}

/// Where a held request waits for [`crate::ModelServer::release_held`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hold {
    /// Nothing is sent back, not even the status line: to the CLI the
    /// model has not answered yet.
    BeforeHeaders,
    /// The `200` and the SSE headers go out at once, the events only after
    /// the release: a stream that has started but is silent. Answers that
    /// are not streams (errors, non-streaming calls) are held before their
    /// headers instead.
    AfterHeaders,
}

/// One scripted response of the main conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    #[serde(flatten)]
    pub action: Action,
    #[serde(default)]
    pub usage: Usage,
    /// Text the model says before its tool call, in the same response (a
    /// separate content block / output item / part).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preamble: Option<String>,
    /// Keep each request of this turn open until the test releases it (or
    /// the client goes away); it counts as a turn request from its arrival.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
    /// Milliseconds between the SSE events of this turn's stream (a paced
    /// Gemini stream sends one chunk per part); `None` writes the whole
    /// stream at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pace_ms: Option<u64>,
}

impl Turn {
    fn of(action: Action) -> Self {
        Self {
            action,
            usage: Usage::default(),
            preamble: None,
            hold: None,
            pace_ms: None,
        }
    }

    pub fn write_file(path: impl Into<String>, content: impl Into<String>) -> Self {
        Self::of(Action::WriteFile {
            path: path.into(),
            content: content.into(),
        })
    }

    pub fn run_command(command: impl Into<String>) -> Self {
        Self::of(Action::RunCommand {
            command: command.into(),
        })
    }

    pub fn text(text: impl Into<String>) -> Self {
        Self::of(Action::Text { text: text.into() })
    }

    /// An HTTP error with the API's own error envelope, served once.
    pub fn error(status: u16) -> Self {
        Self::of(Action::Error {
            status,
            body: None,
            times: 1,
        })
    }

    /// Replaces the error envelope; no effect on other actions.
    pub fn with_body(mut self, new_body: serde_json::Value) -> Self {
        if let Action::Error { body, .. } = &mut self.action {
            *body = Some(new_body);
        }
        self
    }

    /// Serves the error to this many consecutive requests; no effect on
    /// other actions.
    pub fn times(mut self, n: u32) -> Self {
        if let Action::Error { times, .. } = &mut self.action {
            *times = n.max(1);
        }
        self
    }

    pub fn with_usage(mut self, input: u64, cached_input: u64, output: u64) -> Self {
        self.usage = Usage::new(input, cached_input, output);
        self
    }

    pub fn with_preamble(mut self, text: impl Into<String>) -> Self {
        self.preamble = Some(text.into());
        self
    }

    /// Holds every request of this turn, sending nothing back, until
    /// [`crate::ModelServer::release_held`]; then answers as scripted.
    pub fn held(mut self) -> Self {
        self.hold = Some(Hold::BeforeHeaders);
        self
    }

    /// Like [`Turn::held`] but sends the status line and SSE headers first.
    pub fn held_after_headers(mut self) -> Self {
        self.hold = Some(Hold::AfterHeaders);
        self
    }

    /// Streams this turn's SSE events `delay` apart (millisecond precision).
    pub fn paced(mut self, delay: Duration) -> Self {
        self.pace_ms = Some(delay.as_millis().try_into().unwrap_or(u64::MAX));
        self
    }

    /// The delay between SSE events, when paced.
    pub fn pace(&self) -> Option<Duration> {
        self.pace_ms.map(Duration::from_millis)
    }
}

/// The fixed answer to requests outside the main conversation (titles,
/// routing classifiers, summaries): they never consume a turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SideReply {
    pub text: String,
    pub usage: Usage,
}

impl Default for SideReply {
    fn default() -> Self {
        Self {
            text: "Scripted side reply".to_owned(),
            usage: Usage::new(7, 0, 3),
        }
    }
}

/// The turns of one test, consumed in order by the main conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Script {
    #[serde(default)]
    pub turns: Vec<Turn>,
    #[serde(default)]
    pub side_reply: SideReply,
}

impl Script {
    pub fn new(turns: impl IntoIterator<Item = Turn>) -> Self {
        Self {
            turns: turns.into_iter().collect(),
            side_reply: SideReply::default(),
        }
    }

    pub fn with_side_reply(mut self, text: impl Into<String>, usage: Usage) -> Self {
        self.side_reply = SideReply {
            text: text.into(),
            usage,
        };
        self
    }
}
