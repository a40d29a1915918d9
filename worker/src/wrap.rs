//! `pam-worker wrap`: runs one attempt of one run inside its tmux pane.
//!
//! The wrapper spawns the provider command with stdout and stderr piped,
//! copies every byte to its own stdout/stderr (so the pane shows it) and to
//! `<data_dir>/runs/<run_id>/<attempt>.log`, feeds stdout lines to the
//! provider's parser, and writes signals — each stamped with the attempt —
//! to the outbox:
//!
//! * `started` once the child is spawned;
//! * `progress` seq 1, 2, 3 … per progress item of the structured stream;
//! * `failed` reason `provider_failed` when the provider's final result
//!   reports failure — in addition to `finished`, and before it, because the
//!   spec journals `finished` on *every* wrapper exit while `failed` is the
//!   "provider hook reported Failed" shape; a provider that fails usually
//!   also exits non-zero, and it is the controller's single state-machine
//!   gate that decides what each does to the run;
//! * `finished` with the exit code (128 + signal number for a signal death)
//!   and the provider's final usage, on every exit of a spawned child.
//!
//! A command that cannot start (ENOENT, EACCES, …) gets `failed` reason
//! `spawn_failed` ONLY — no `started`, no `finished` — and the wrapper exits
//! 127: the session never ran, which is the seed's `spawning → failed` edge;
//! a `finished` there would report an exit that never happened.
//!
//! SIGINT, SIGTERM and SIGHUP are forwarded to the child; a child still
//! alive `stop_grace` after the first forwarded signal gets SIGKILL. The
//! child shares the pane's terminal (stdin is inherited, so `send-keys`
//! reaches it), which means a Ctrl-C typed in the pane reaches it twice:
//! from the terminal and forwarded. Signals sent to the wrapper alone (the
//! agent's stop: `kill -TERM <pane pid>`) reach it once.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{kill, Signal as UnixSignal};
use nix::unistd::Pid;
use pam_manifests::protocol::{
    Signal, SignalKind, TokenUsage, REASON_PROVIDER_FAILED, REASON_SPAWN_FAILED,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{signal, SignalKind as TokioSignal};
use tokio::time::Instant;
use uuid::Uuid;

use crate::outbox::Outbox;
use crate::providers::{parse_line, FinalResult, LineEvent, ProviderKind};
use crate::workspace::result as workspace;

/// A stdout line longer than this is not parsed (it is still logged).
const MAX_LINE: usize = 16 << 20;
/// How long to keep reading output after the child exited, for grandchildren
/// that inherited the pipes.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// What to wrap.
#[derive(Debug, Clone)]
pub struct WrapArgs {
    /// The run.
    pub run_id: Uuid,
    /// The attempt stamped on every signal.
    pub attempt: i32,
    /// The worker's data dir (outbox, runs/).
    pub data_dir: PathBuf,
    /// Whose stream format stdout speaks.
    pub provider: ProviderKind,
    /// The tmux session, stamped on `started`.
    pub session_name: Option<String>,
    /// Time between the first forwarded signal and SIGKILL.
    pub stop_grace: Duration,
    /// Extra environment for the command (from the spawner's env file).
    pub env: std::collections::BTreeMap<String, String>,
    /// The command, program first.
    pub command: Vec<String>,
    /// The attempt's workspace, to commit and measure at exit (issue 32).
    pub workspace_file: Option<PathBuf>,
}

/// Where the log of an attempt lives.
pub fn log_path(data_dir: &Path, run_id: Uuid, attempt: i32) -> PathBuf {
    data_dir
        .join("runs")
        .join(run_id.to_string())
        .join(format!("{attempt}.log"))
}

/// Writes stamped signals to the outbox. An outbox write that fails is
/// reported on stderr and does not stop the run.
struct Emitter {
    outbox: Outbox,
    run_id: Uuid,
    attempt: i32,
    session_name: Option<String>,
}

impl Emitter {
    fn emit(&self, kind: SignalKind, fill: impl FnOnce(&mut Signal)) {
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut s = Signal::new(self.run_id, self.attempt, kind, at);
        fill(&mut s);
        if let Err(e) = self.outbox.append(&s) {
            eprintln!("pam-worker wrap: cannot write {kind} signal to the outbox: {e}");
        }
    }
}

/// Runs the wrapper; returns the exit code the wrapper should exit with.
pub async fn wrap(args: WrapArgs) -> anyhow::Result<i32> {
    anyhow::ensure!(!args.command.is_empty(), "wrap: no command given after --");
    anyhow::ensure!(args.attempt >= 1, "wrap: --attempt must be >= 1");
    let outbox = Outbox::open(&args.data_dir)
        .with_context(|| format!("open outbox in {}", args.data_dir.display()))?;
    let log_path = log_path(&args.data_dir, args.run_id, args.attempt);
    crate::private::dir(log_path.parent().expect("log path has a parent"))
        .with_context(|| format!("create {}", log_path.display()))?;
    let log = crate::private::file()
        .create(true)
        .append(true)
        .open(&log_path)
        .with_context(|| format!("open log {}", log_path.display()))?;
    let mut log = crate::logindex::Indexed::new(log, &log_path);
    let emitter = Emitter {
        outbox,
        run_id: args.run_id,
        attempt: args.attempt,
        session_name: args.session_name.clone(),
    };

    // Handlers first: a signal between spawn and handler installation would
    // otherwise kill the wrapper without a `finished`.
    let mut sigterm = signal(TokioSignal::terminate()).context("install SIGTERM handler")?;
    let mut sigint = signal(TokioSignal::interrupt()).context("install SIGINT handler")?;
    let mut sighup = signal(TokioSignal::hangup()).context("install SIGHUP handler")?;

    let mut cmd = tokio::process::Command::new(&args.command[0]);
    cmd.args(&args.command[1..])
        .env("PAM_RUN_ID", args.run_id.to_string())
        .env("PAM_ATTEMPT", args.attempt.to_string())
        .envs(&args.env)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let msg = format!("pam-worker wrap: cannot start {:?}: {e}\n", args.command[0]);
            let _ = log.write_all(msg.as_bytes());
            eprint!("{msg}");
            emitter.emit(SignalKind::Failed, |s| {
                s.reason = Some(REASON_SPAWN_FAILED.into())
            });
            return Ok(127);
        }
    };
    let pid = Pid::from_raw(child.id().expect("a just-spawned child has a pid") as i32);
    let session = emitter.session_name.clone();
    emitter.emit(SignalKind::Started, |s| s.session_name = session);

    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let mut own_out = tokio::io::stdout();
    let mut own_err = tokio::io::stderr();
    let mut obuf = vec![0u8; 64 * 1024];
    let mut ebuf = vec![0u8; 64 * 1024];
    let mut lines = LineParser::new(args.provider);
    let (mut out_open, mut err_open) = (true, true);
    let mut status: Option<ExitStatus> = None;
    let mut kill_at: Option<Instant> = None;
    let mut drain_until: Option<Instant> = None;
    let far = || Instant::now() + Duration::from_secs(86400 * 365);

    loop {
        if status.is_some() && !out_open && !err_open {
            break;
        }
        tokio::select! {
            r = stdout.read(&mut obuf), if out_open => match r {
                Ok(0) | Err(_) => out_open = false,
                Ok(n) => {
                    tee(&mut log, &mut own_out, &obuf[..n]).await;
                    lines.feed(&obuf[..n], &emitter);
                }
            },
            r = stderr.read(&mut ebuf), if err_open => match r {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => tee(&mut log, &mut own_err, &ebuf[..n]).await,
            },
            st = child.wait(), if status.is_none() => {
                status = Some(st.context("wait for the wrapped command")?);
                drain_until = Some(Instant::now() + DRAIN_AFTER_EXIT);
            },
            _ = sigterm.recv() => forward(pid, UnixSignal::SIGTERM, status.is_none(), &mut kill_at, args.stop_grace),
            _ = sigint.recv() => forward(pid, UnixSignal::SIGINT, status.is_none(), &mut kill_at, args.stop_grace),
            _ = sighup.recv() => forward(pid, UnixSignal::SIGHUP, status.is_none(), &mut kill_at, args.stop_grace),
            _ = tokio::time::sleep_until(kill_at.unwrap_or_else(far)), if kill_at.is_some() && status.is_none() => {
                eprintln!("pam-worker wrap: command still alive {}s after the stop signal; killing it", args.stop_grace.as_secs());
                let _ = kill(pid, UnixSignal::SIGKILL);
                kill_at = None;
            },
            _ = tokio::time::sleep_until(drain_until.unwrap_or_else(far)), if drain_until.is_some() => break,
        }
    }
    lines.finish(&emitter);
    let _ = log.sync_all();

    let status = status.expect("the loop ends only after the child exited");
    let code = exit_code(status);
    if let Some(f) = &lines.final_result {
        if !f.success {
            emitter.emit(SignalKind::Failed, |s| {
                s.reason = Some(REASON_PROVIDER_FAILED.into())
            });
        }
    }
    let usage: Option<TokenUsage> = lines.final_result.and_then(|f| f.usage);
    let mut report = |what: &str, e: anyhow::Error| {
        let msg = format!("pam-worker wrap: the workspace's {what}: {e:#}\n");
        let _ = log.write_all(msg.as_bytes());
        eprint!("{msg}");
    };
    let workspace = args.workspace_file.as_deref().map(workspace::load);
    let workspace = workspace.and_then(|w| w.map_err(|e| report("state", e)).ok());
    // Before `finished`: the result travels in it. A worktree that cannot
    // be measured still finishes the attempt, without one.
    let result = workspace
        .as_ref()
        .and_then(|p| workspace::finish(p).map_err(|e| report("result", e)).ok());
    emitter.emit(SignalKind::Finished, |s| {
        s.exit_code = Some(code);
        s.usage = usage;
        s.result = result.map(Box::new);
    });
    if let Some(p) = &workspace {
        if let Err(e) = workspace::cleanup(p, code) {
            report("cleanup", e);
        }
    }
    Ok(code)
}

/// The exit code a shell would report: the code, or 128 + the signal.
pub fn exit_code(status: ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(255)
}

fn forward(pid: Pid, sig: UnixSignal, alive: bool, kill_at: &mut Option<Instant>, grace: Duration) {
    if !alive {
        return;
    }
    let _ = kill(pid, sig);
    kill_at.get_or_insert_with(|| Instant::now() + grace);
}

/// Copies a chunk to the log and to the pane. A pane that is gone (the
/// session was killed) does not stop the log.
async fn tee(log: &mut impl Write, own: &mut (impl AsyncWriteExt + Unpin), bytes: &[u8]) {
    if let Err(e) = log.write_all(bytes) {
        eprintln!("pam-worker wrap: cannot write the log: {e}");
    }
    if own.write_all(bytes).await.is_ok() {
        let _ = own.flush().await;
    }
}

/// Splits stdout into lines and turns them into progress signals.
struct LineParser {
    provider: ProviderKind,
    buf: Vec<u8>,
    /// Inside an over-long line: discard until the next newline.
    skipping: bool,
    seq: i64,
    final_result: Option<FinalResult>,
}

impl LineParser {
    fn new(provider: ProviderKind) -> LineParser {
        LineParser {
            provider,
            buf: Vec::new(),
            skipping: false,
            seq: 0,
            final_result: None,
        }
    }

    fn feed(&mut self, mut chunk: &[u8], emitter: &Emitter) {
        while let Some(i) = chunk.iter().position(|&b| b == b'\n') {
            if !self.skipping {
                self.buf.extend_from_slice(&chunk[..i]);
                let line = std::mem::take(&mut self.buf);
                self.line(&line, emitter);
            }
            self.skipping = false;
            self.buf.clear();
            chunk = &chunk[i + 1..];
        }
        if !self.skipping {
            self.buf.extend_from_slice(chunk);
            if self.buf.len() > MAX_LINE {
                self.buf = Vec::new();
                self.skipping = true;
            }
        }
    }

    fn finish(&mut self, emitter: &Emitter) {
        if !self.skipping && !self.buf.is_empty() {
            let line = std::mem::take(&mut self.buf);
            self.line(&line, emitter);
        }
    }

    fn line(&mut self, line: &[u8], emitter: &Emitter) {
        match parse_line(self.provider, &String::from_utf8_lossy(line)) {
            LineEvent::Progress(item) => {
                self.seq += 1;
                let seq = self.seq;
                tracing::debug!(seq, summary = %item.summary, "progress");
                emitter.emit(SignalKind::Progress, |s| {
                    s.seq = Some(seq);
                    s.usage = item.usage;
                });
            }
            LineEvent::Final(f) => self.final_result = Some(f),
            LineEvent::Quiet | LineEvent::Unstructured => {}
        }
    }
}
