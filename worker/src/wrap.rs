//! `pam-worker wrap`: runs one attempt of one run inside its tmux pane.
//!
//! The wrapper spawns the provider command with stdout and stderr piped,
//! copies every byte to its own stdout/stderr (so the pane shows it) and to
//! `<data_dir>/runs/<run_id>/<attempt>.log`, feeds stdout lines to the
//! provider's parser, and writes signals — each stamped with the attempt —
//! to the outbox:
//!
//! * `started` once the child is spawned;
//! * `progress` seq 1, 2, 3 … as the structured stream says what the agent
//!   did (short activity excerpts), its session id, or a new figure of the
//!   attempt's usage ([`crate::output_reader`]); the whole exchange goes to
//!   the attempt's transcript beside its log ([`crate::transcript`]);
//! * `failed` reason `provider_failed`, with the provider's own words, when
//!   its final result reports failure — in addition to `finished`, and
//!   before it, because the
//!   spec journals `finished` on *every* wrapper exit while `failed` is the
//!   "provider hook reported Failed" shape; a provider that fails usually
//!   also exits non-zero, and it is the controller's single state-machine
//!   gate that decides what each does to the run;
//! * `finished` with the exit code (128 + signal number for a signal death),
//!   the attempt's usage, its session id and, for a failure, the
//!   provider's last words, on every exit of a spawned child.
//!
//! A command that cannot start (ENOENT, EACCES, …) gets `failed` reason
//! `spawn_failed` ONLY — no `started`, no `finished` — and the wrapper exits
//! 127: the session never ran, which is the seed's `spawning → failed` edge;
//! a `finished` there would report an exit that never happened.
//!
//! The child runs in its own process group, which the wrapper makes the
//! pane terminal's foreground group: what is typed in the pane
//! (`send-keys`, attach) reaches it, and a Ctrl-C typed there reaches it
//! once, from the terminal. SIGINT, SIGTERM and SIGHUP sent to the wrapper
//! (the agent's stop: `kill -TERM <pane pid>`) are forwarded to the whole
//! group — the CLI and every process it started (gemini relaunches itself
//! as a second process; an agent's shell commands) — and a group still
//! alive `stop_grace` after the first forwarded signal gets SIGKILL.

use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use anyhow::Context;
use nix::sys::signal::{killpg, Signal as UnixSignal};
use nix::unistd::Pid;
use pam_manifests::protocol::{Signal, SignalKind, REASON_PROVIDER_FAILED, REASON_SPAWN_FAILED};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::signal::unix::{signal, SignalKind as TokioSignal};
use tokio::time::Instant;
use uuid::Uuid;

use crate::outbox::Outbox;
use crate::output_reader::{OutputReader, Progress};
use crate::providers::session_file::SessionFile;
use crate::providers::ProviderKind;
use crate::run_files::log_path;
use crate::workspace::result as workspace;

/// How often a CLI's session file is read for its live usage.
const SESSION_FILE_POLL: Duration = Duration::from_secs(1);
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
    /// The attempt's workspace, to commit and measure at exit.
    pub workspace_file: Option<PathBuf>,
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
    /// One `progress` signal per report, numbered on from `seq`.
    fn progress(&self, reports: Vec<Progress>, seq: &mut i64) {
        for p in reports {
            *seq += 1;
            let n = *seq;
            self.emit(SignalKind::Progress, |s| {
                s.seq = Some(n);
                s.activity = p.activity;
                s.session_id = p.session_id;
                s.attempt_usage = p.attempt_usage;
            });
        }
    }

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
    // Its own process group, the terminal's foreground one: a stop reaches
    // every process the CLI started (gemini runs as a second node process;
    // an agent's shell commands), and what is typed in the pane (attach)
    // reaches the CLI.
    cmd.process_group(0);
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
    let _background = foreground(pid);
    let session = emitter.session_name.clone();
    emitter.emit(SignalKind::Started, |s| s.session_name = session);

    let mut stdout = child.stdout.take().expect("stdout is piped");
    let mut stderr = child.stderr.take().expect("stderr is piped");
    let mut own_out = tokio::io::stdout();
    let mut own_err = tokio::io::stderr();
    let mut obuf = vec![0u8; 64 * 1024];
    let mut ebuf = vec![0u8; 64 * 1024];
    // Codex's and Gemini's live usage is in their session files
    // (found once the stream names the session), read every second.
    let begun = chrono::Utc::now() - chrono::Duration::seconds(1);
    let mut session_file: Option<SessionFile> = None;
    let mut session_tick = tokio::time::interval(SESSION_FILE_POLL);
    let transcript = crate::transcript::path(&args.data_dir, args.run_id, args.attempt);
    let mut reader = OutputReader::new(args.provider, &transcript, args.env.values());
    let mut seq = 0;
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
                    reader.stdout(&obuf[..n]);
                    emitter.progress(reader.take(), &mut seq);
                }
            },
            r = stderr.read(&mut ebuf), if err_open => match r {
                Ok(0) | Err(_) => err_open = false,
                Ok(n) => {
                    tee(&mut log, &mut own_err, &ebuf[..n]).await;
                    reader.stderr(&ebuf[..n]);
                    emitter.progress(reader.take(), &mut seq);
                }
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
                let _ = killpg(pid, UnixSignal::SIGKILL);
                kill_at = None;
            },
            _ = tokio::time::sleep_until(drain_until.unwrap_or_else(far)), if drain_until.is_some() => break,
            _ = session_tick.tick(), if session_file.is_some() => {
                let file = session_file.as_mut().expect("checked above");
                reader.usage_reports(file.poll());
                emitter.progress(reader.take(), &mut seq);
            },
        }
        if session_file.is_none() {
            session_file = reader
                .session_id()
                .and_then(|id| SessionFile::new(args.provider, &args.env, id, begun));
        }
    }
    if let Some(file) = session_file.as_mut() {
        reader.usage_reports(file.poll());
    }
    reader.finish();
    emitter.progress(reader.take(), &mut seq);
    let _ = log.sync_all();

    let status = status.expect("the loop ends only after the child exited");
    let code = exit_code(status);
    let provider_failed = reader.final_result().is_some_and(|f| !f.success);
    // The provider's own words for a failure (never a Secret value).
    let words = (provider_failed || code != 0)
        .then(|| reader.failure_words())
        .flatten();
    if provider_failed {
        emitter.emit(SignalKind::Failed, |s| {
            s.reason = Some(REASON_PROVIDER_FAILED.into());
            s.message = words.clone();
        });
    }
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
        s.usage = reader.usage();
        s.session_id = reader.session_id().map(str::to_string);
        s.message = words;
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

/// Forwards `sig` to the child's process group (the CLI and what it
/// started), and arms the SIGKILL after the grace.
fn forward(
    pgid: Pid,
    sig: UnixSignal,
    alive: bool,
    kill_at: &mut Option<Instant>,
    grace: Duration,
) {
    if !alive {
        return;
    }
    let _ = killpg(pgid, sig);
    kill_at.get_or_insert_with(|| Instant::now() + grace);
}

/// Makes process group `pgid` the foreground group of the wrapper's
/// terminal (the tmux pane), when stdin is one. The wrapper stays in the
/// background: it only writes to the terminal. The returned handler keeps
/// a SIGTTOU (a background write on a terminal with `tostop`) from
/// stopping it while it lives.
fn foreground(pgid: Pid) -> Option<tokio::signal::unix::Signal> {
    let stdin = std::io::stdin();
    if !nix::unistd::isatty(&stdin).unwrap_or(false) {
        return None;
    }
    let ttou = signal(TokioSignal::from_raw(UnixSignal::SIGTTOU as i32)).ok();
    if let Err(e) = nix::unistd::tcsetpgrp(&stdin, pgid) {
        eprintln!("pam-worker wrap: cannot give the terminal to the command: {e}");
    }
    ttou
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
