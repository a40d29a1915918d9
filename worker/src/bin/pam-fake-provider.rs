//! A stand-in provider CLI for tests: prints the structured stream of
//! claude (`stream-json`), codex (`exec --json`), gemini (`stream-json`)
//! or grok (`streaming-json`, in the shape pam-worker's grok parser
//! assumes: see worker/src/providers/grok.rs) with N progress lines, then
//! the final result, then exits. Each format reports token usage where
//! that provider does: claude per step and in the result (with its own
//! `total_cost_usd`), codex and gemini in the final event, grok per step
//! and in the result (OpenAI-style `prompt_tokens`/`completion_tokens`).
//!
//! `pam-fake-provider [--format claude|codex|gemini|grok] [--lines N]
//! [--sleep-ms MS] [--exit CODE] [--fail-result] [--hang] [--ignore-term]
//! [--pid-file PATH] [--print-env NAME]… [--until-file PATH]
//! [--filler-bytes N] [--tool-use] [--denied] [--api-retry]
//! [--result-text TEXT] [-p PROMPT] [PROMPT]`
//!
//! It also prints one plain-text line to stderr (unstructured output), and
//! echoes the prompt and `$FAKE_ECHO_ENV` (if set) in its first line so
//! tests can check argument and environment passing; `--print-env NAME`
//! prints `NAME=<value>` as a plain stdout line (a Secret
//! reaching the provider's environment). `--until-file PATH` keeps
//! printing a numbered `tick` line every `--sleep-ms` (at least 50 ms)
//! after the progress lines until PATH exists, and `--filler-bytes N`
//! then prints N bytes of plain lines at once: a producer of output over
//! time, and of a big log (the log tests and `bench-logs`).
//!
//! In the claude format only (a conversation for the transcript's
//! readers, the dashboard's Conversation view): `--api-retry` prints an
//! `api_retry` line before the first step; after the first step,
//! `--tool-use` prints a `Write hello.txt` tool call and its successful
//! result, and `--denied` a `Bash rm -rf build` call refused by the
//! permissions (an error result in Claude's wording, listed again in the
//! result's `permission_denials`); `--result-text` is the result's text
//! (default `done`).

use std::io::Write;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use serde_json::json;

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Claude,
    Codex,
    Gemini,
    Grok,
}

#[derive(Debug, Parser)]
#[command(name = "pam-fake-provider")]
struct Args {
    /// Stream format.
    #[arg(long, value_enum, default_value = "claude")]
    format: Format,
    /// Progress lines before the result.
    #[arg(long, default_value_t = 3)]
    lines: u32,
    /// Pause between lines.
    #[arg(long, default_value_t = 0)]
    sleep_ms: u64,
    /// Exit code.
    #[arg(long = "exit", default_value_t = 0)]
    exit_code: i32,
    /// Make the final result report failure.
    #[arg(long)]
    fail_result: bool,
    /// After the lines (before the result), sleep until killed.
    #[arg(long)]
    hang: bool,
    /// Ignore SIGTERM (to test the SIGKILL escalation).
    #[arg(long)]
    ignore_term: bool,
    /// Write our pid here once running.
    #[arg(long)]
    pid_file: Option<std::path::PathBuf>,
    /// Print `NAME=<value of $NAME>` on stdout (plain text) at start.
    #[arg(long = "print-env", value_name = "NAME")]
    print_env: Vec<String>,
    /// After the progress lines, print a `tick` line every --sleep-ms
    /// until this file exists.
    #[arg(long)]
    until_file: Option<std::path::PathBuf>,
    /// Then print this many bytes of plain lines.
    #[arg(long, default_value_t = 0)]
    filler_bytes: u64,
    /// claude: print an `api_retry` line before the first step.
    #[arg(long)]
    api_retry: bool,
    /// claude: after the first step, a `Write hello.txt` tool call and
    /// its result.
    #[arg(long)]
    tool_use: bool,
    /// claude: after the first step, a `Bash rm -rf build` tool call the
    /// permissions refuse.
    #[arg(long)]
    denied: bool,
    /// The final result's text.
    #[arg(long, default_value = "done")]
    result_text: String,
    /// The prompt (as `-p PROMPT`).
    #[arg(short = 'p', long = "prompt")]
    prompt_flag: Option<String>,
    /// The prompt (positional).
    prompt: Option<String>,
}

/// claude: the tool calls `--tool-use` and `--denied` ask for, each with
/// its result (an `assistant` line with the `tool_use` block, a `user`
/// line with the `tool_result`).
fn tools(a: &Args) {
    let call = |id: &str, name: &str, input: serde_json::Value| {
        out(
            json!({"type":"assistant","message":{"id":format!("msg_{id}"),"type":"message","role":"assistant","model":"fake-model","content":[{"type":"tool_use","id":id,"name":name,"input":input}],"usage":{"input_tokens":10,"output_tokens":1}},"session_id":"fake-session"}),
        )
    };
    let result = |id: &str, text: &str, error: bool| {
        out(
            json!({"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":id,"content":text,"is_error":error}]},"session_id":"fake-session"}),
        )
    };
    if a.tool_use {
        call(
            "toolu_fake_1",
            "Write",
            json!({"file_path":"hello.txt","content":"hello from the fake provider\n"}),
        );
        result(
            "toolu_fake_1",
            "File created successfully at: hello.txt",
            false,
        );
    }
    if a.denied {
        call("toolu_fake_2", "Bash", json!({"command":"rm -rf build"}));
        result(
            "toolu_fake_2",
            "Claude requested permissions to use Bash, but you haven't granted it yet.",
            true,
        );
    }
}

/// The model the grok format reports (priced from pamd's table).
const GROK_MODEL: &str = "grok-code-fast-1";

fn out(v: serde_json::Value) {
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{v}");
    let _ = o.flush();
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let a = Args::parse();
    let _term = if a.ignore_term {
        Some(
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("SIGTERM handler"),
        )
    } else {
        None
    };
    if let Some(p) = &a.pid_file {
        std::fs::write(p, std::process::id().to_string()).expect("write pid file");
    }
    let prompt = a
        .prompt_flag
        .clone()
        .or(a.prompt.clone())
        .unwrap_or_default();
    let echo = std::env::var("FAKE_ECHO_ENV").unwrap_or_default();
    eprintln!("fake provider starting (plain text on stderr)");
    for name in &a.print_env {
        let value = std::env::var(name).unwrap_or_else(|_| "<unset>".into());
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{name}={value}");
        let _ = o.flush();
    }
    let n = a.lines as u64;
    match a.format {
        Format::Claude => out(
            json!({"type":"system","subtype":"init","session_id":"fake-session","model":"fake-model","cwd":std::env::current_dir().map(|d| d.display().to_string()).unwrap_or_default(),"tools":[],"prompt":prompt,"echo":echo}),
        ),
        Format::Codex => {
            out(
                json!({"type":"thread.started","thread_id":"fake-thread","prompt":prompt,"echo":echo}),
            );
            out(json!({"type":"turn.started"}));
        }
        Format::Gemini => {
            out(
                json!({"type":"init","timestamp":"2025-01-01T00:00:00.000Z","session_id":"fake-session","model":"fake-model","echo":echo}),
            );
            out(
                json!({"type":"message","timestamp":"2025-01-01T00:00:00.000Z","role":"user","content":prompt}),
            );
        }
        Format::Grok => out(
            json!({"type":"session_started","sessionId":"fake-session","model":GROK_MODEL,"prompt":prompt,"echo":echo}),
        ),
    }
    println!("plain text between events: no progress here");
    let claude = matches!(a.format, Format::Claude);
    if claude && a.api_retry {
        out(
            json!({"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":529,"error":"overloaded_error","session_id":"fake-session"}),
        );
    }
    for i in 1..=n {
        if a.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(a.sleep_ms)).await;
        }
        let text = format!("step {i}");
        match a.format {
            Format::Claude => out(
                json!({"type":"assistant","message":{"id":format!("msg_{i}"),"type":"message","role":"assistant","model":"fake-model","content":[{"type":"text","text":text}],"usage":{"input_tokens":10,"output_tokens":i}},"session_id":"fake-session"}),
            ),
            Format::Codex => out(
                json!({"type":"item.completed","item":{"id":format!("item_{i}"),"type":"agent_message","text":text}}),
            ),
            Format::Gemini => out(
                json!({"type":"message","timestamp":"2025-01-01T00:00:00.000Z","role":"assistant","content":text}),
            ),
            Format::Grok => {
                out(json!({"type":"content_delta","text":"st"}));
                out(
                    json!({"type":"assistant_message","text":text,"model":GROK_MODEL,"usage":{"prompt_tokens":10,"completion_tokens":i,"prompt_tokens_details":{"cached_tokens":4}}}),
                )
            }
        }
        if claude && i == 1 {
            tools(&a);
        }
    }
    if claude && n == 0 {
        tools(&a);
    }
    if let Some(stop) = &a.until_file {
        let every = Duration::from_millis(a.sleep_ms.max(50));
        let mut tick = 0u64;
        while !stop.exists() {
            tick += 1;
            println!("tick {tick}");
            tokio::time::sleep(every).await;
        }
    }
    if a.filler_bytes > 0 {
        let mut o = std::io::BufWriter::with_capacity(1 << 16, std::io::stdout().lock());
        let mut left = a.filler_bytes;
        let mut i = 0u64;
        while left > 0 {
            i += 1;
            let line = format!("filler {i:012} {}\n", "x".repeat(80));
            let take = (line.len() as u64).min(left) as usize;
            let _ = o.write_all(&line.as_bytes()[..take]);
            left -= take as u64;
        }
        let _ = o.flush();
    }
    if a.hang {
        loop {
            tokio::time::sleep(Duration::from_secs(3600)).await;
        }
    }
    let ok = !a.fail_result;
    match a.format {
        Format::Claude => {
            let mut result = json!({"type":"result","subtype": if ok {"success"} else {"error_during_execution"},"is_error":!ok,"duration_ms":1,"num_turns":n,"result":a.result_text,"session_id":"fake-session","total_cost_usd":0.25,"usage":{"input_tokens":10*n,"output_tokens":n*(n+1)/2}});
            if a.denied {
                result["permission_denials"] = json!([{"tool_name":"Bash","tool_use_id":"toolu_fake_2","tool_input":{"command":"rm -rf build"}}]);
            }
            out(result)
        }
        Format::Codex => {
            if ok {
                out(
                    json!({"type":"turn.completed","usage":{"input_tokens":10*n,"cached_input_tokens":5*n,"output_tokens":n}}),
                )
            } else {
                out(json!({"type":"turn.failed","error":{"message":"fake failure"}}))
            }
        }
        Format::Gemini => out(
            json!({"type":"result","timestamp":"2025-01-01T00:00:00.000Z","status": if ok {"success"} else {"error"},"stats":{"total_tokens":11*n,"input_tokens":10*n,"output_tokens":n,"cached":0,"input":10*n,"duration_ms":1,"tool_calls":0}}),
        ),
        Format::Grok => out(
            json!({"type":"result","stopReason": if ok {"end_turn"} else {"error"},"text":"done","sessionId":"fake-session","model":GROK_MODEL,"usage":{"prompt_tokens":10*n,"completion_tokens":n*(n+1)/2,"prompt_tokens_details":{"cached_tokens":4*n}}}),
        ),
    }
    std::process::exit(a.exit_code);
}
