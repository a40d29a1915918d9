//! The agent: the long-running half of `pam-worker` that talks to pamd.
//!
//! Four tasks share one [`State`]:
//!
//! * **heartbeat** — every heartbeat interval (the smaller of worker.toml's
//!   `heartbeat_seconds` and what pamd asked for at registration), on a task
//!   of its own, so nothing (a slow spawn, a big upload, a stuck long-poll)
//!   can delay it. It goes on the open watch when pamd takes it there
//!   (one connection to pamd), else with its own HTTP client.
//!   It reports the `pam-*`
//!   sessions the reconcile loop last saw; a `not_registered` answer makes
//!   it register again. Operator signals and attach input that pamd hands
//!   out with the heartbeat's desired set are passed to the reconcile loop,
//!   which the set also wakes when it lists a run or a stop the loop's
//!   last read did not (a safety net — a watch frame may be
//!   lost with its connection, or pamd may be older).
//! * **watch** — one long `GET /api/v1/workers/watch` (see
//!   [`watch`]): pamd claims runs for the host while it is open and sends
//!   a frame whenever the host's desired set changed (a run claimed, a
//!   stop, a signal, attach input, a run that left the set); every frame
//!   wakes the reconcile loop. Against a pamd without the route (404) the
//!   worker falls back to the claim long-poll
//!   (`POST /api/v1/workers/claim?wait=`) and the polling tick.
//! * **reconcile** — level-triggered: on every wake-up it fetches the
//!   desired set and makes tmux match: spawn
//!   what is missing, stop what is marked stopped (SIGTERM to the wrapper,
//!   which forwards it and escalates to SIGKILL after the stop grace; the
//!   session is killed if it outlives the grace), deliver operator signals
//!   (each id once: pamd lists all of an attempt's in every desired set;
//!   the delivered ids are kept in `sessions/<session>.signals`) and typed
//!   input, report `pam-*` sessions no desired run maps to as orphans
//!   (`run.orphan_detected`), and report a session that vanished without a
//!   `finished` as `lost` (→ `session_lost`). Every `tick_seconds` it
//!   looks at tmux alone and calls pamd only when a session appeared or
//!   vanished, or a stop, a loss or an orphan is being timed; every
//!   `resync_seconds` it claims without waiting and reads the set anyway
//!   (a safety net: nothing relies on it). Polling an older pamd, it
//!   claims and reads the set every tick instead. Every session is tagged with
//!   its (run, attempt) at creation, and only a session tagged with a
//!   desired attempt is taken to run it (see [`reconcile`]); which attempts
//!   this worker started is kept in `<data_dir>/sessions/<name>.json` (see
//!   [`records`]), so after a restart still-running sessions are adopted,
//!   not respawned, and an attempt that already ran is never started twice.
//! * **ship** — sends outbox entries in batches and deletes them only after
//!   pamd acknowledged them (applied, duplicate or stale); a 422 answer
//!   counts rejections per entry (see [`crate::outbox`]).
//!
//! Plus **snapshots** of each live session's pane (see [`snapshots`]).
//!
//! Registration, the watch, claim and ship retry after a failure on the schedule of
//! [`crate::backoff`]: 200 ms doubling to 5 s, but 10 s doubling to 60 s
//! after pamd refused the token (401/403). Heartbeat and reconcile keep
//! their fixed pace.
//!
//! # Caveats
//!
//! * "Vanished without `finished`" is judged from the worker's side: the
//!   session is gone, no outbox entry of that attempt is waiting, and a
//!   desired set fetched at least [`LOST_GRACE`] after the session was seen
//!   gone still lists the run. pamd applies `lost` at most once per
//!   attempt, and a `finished` that did arrive first makes it a no-op.
//! * Orphans are reported once per session per agent process, after the
//!   session has been unmapped for [`ORPHAN_AFTER`] (a wrapper draining
//!   output after its run finished is not an orphan). The agent never kills
//!   an orphan: an operator decides.

mod client;
mod logs;
mod reconcile;
mod records;
mod snapshots;
mod watch;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use pam_manifests::protocol::{
    protocol_mismatch, protocol_of, Capabilities, DesiredSet, Heartbeat, OperatorSignal, Peer,
    RegisterRequest, RegisterResponse, SessionReport, SignalAck, SignalBatch, WatchRequest,
    PROTOCOL_VERSION,
};
use pam_manifests::state::Platform;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::backoff::Backoff;
use crate::config::Config;
use crate::outbox::Outbox;
use crate::tmux::Tmux;
use client::{failure, http_code, Api, HttpError};

/// How long a vanished session's run must still be desired before the
/// agent reports it lost.
pub const LOST_GRACE: Duration = Duration::from_secs(3);
/// How long a `pam-*` session must stay unmapped before it is an orphan.
pub const ORPHAN_AFTER: Duration = Duration::from_secs(4);
/// The claim long-poll's wait (pamd caps it at 60 s).
const CLAIM_WAIT_SECONDS: u64 = 20;
/// Most signals per batch.
const BATCH: usize = 256;
/// How often the shipper looks at the outbox when it is empty and no
/// file-system notification woke it (the watch failed, or one was lost).
const SHIP_POLL: Duration = Duration::from_millis(50);

/// What the agent needs to run.
#[derive(Debug, Clone)]
pub struct AgentOptions {
    /// pamd's base URL, e.g. `http://127.0.0.1:7700`.
    pub server: String,
    /// The worker token (never logged).
    pub token: String,
    /// This host's name.
    pub name: String,
    /// The data dir (instance id, outbox, runs/, sessions/).
    pub data_dir: PathBuf,
    /// worker.toml.
    pub config: Config,
    /// The pam-worker executable the sessions run as the wrapper.
    pub worker_exe: PathBuf,
    /// The persistent instance id (OQ-14).
    pub instance_id: Uuid,
    /// The CA certificates an https:// server must chain to (`--ca-file`);
    /// `None`: the bundled public roots.
    pub ca_certs: Option<Vec<reqwest::Certificate>>,
}

/// Signals and input handed out with a heartbeat's desired set.
type Deliveries = Vec<(Uuid, i32, Vec<OperatorSignal>, Vec<String>)>;

/// What the tasks share.
struct State {
    opts: AgentOptions,
    tmux: Tmux,
    outbox: Outbox,
    /// Wakes the reconcile loop.
    wake: Notify,
    /// The sessions the reconcile loop last saw, for the heartbeat.
    running: Mutex<Vec<SessionReport>>,
    /// Deliveries the heartbeat received, for the reconcile loop.
    deliveries: Mutex<Deliveries>,
    /// Set when pamd says this host is not registered (re-register).
    reregister: Notify,
    /// (run, attempt, stop) of each run of the desired set the reconcile
    /// loop last read.
    known: Mutex<std::collections::HashSet<(Uuid, i32, bool)>>,
    /// pamd has no watch route (an older pamd): the reconcile loop polls.
    polling: std::sync::atomic::AtomicBool,
    /// (run, attempt) whose session ended since the snapshot loop last
    /// looked: they get one final snapshot from the log.
    ended: Mutex<Vec<(Uuid, i32)>>,
    /// What this host can run, as last reported: every
    /// registration sends it, and a change registers again.
    capabilities: Mutex<Capabilities>,
    /// The open watch that takes requests, if any.
    watch_calls: watch::Calls,
}

/// Runs the agent until the future is dropped (the caller selects it
/// against a shutdown signal).
pub async fn run(opts: AgentOptions) -> anyhow::Result<()> {
    let tmux = Tmux::new(opts.config.socket());
    match Tmux::check_version().await {
        Ok(v) => tracing::info!(version = %v, "tmux found"),
        Err(e) => anyhow::bail!("{e}"),
    }
    let outbox = Outbox::open(&opts.data_dir)
        .with_context(|| format!("open the outbox in {}", opts.data_dir.display()))?;
    records::create_dir(&opts.data_dir)?;
    // Runs' logs and env files (private, also where an older
    // worker left the directory open).
    crate::private::dir(&opts.data_dir.join("runs"))?;
    // SIGHUP asks for a new capability check (installed before
    // the first one, so a SIGHUP never ends the worker).
    let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("install SIGHUP handler")?;
    let capabilities = crate::capabilities::probe(&opts.config, &opts.data_dir).await;
    tracing::info!(providers = ?capabilities.providers.iter().map(|p| &p.name).collect::<Vec<_>>(), "capabilities");
    let st = Arc::new(State {
        tmux,
        outbox,
        wake: Notify::new(),
        running: Mutex::new(Vec::new()),
        deliveries: Mutex::new(Vec::new()),
        reregister: Notify::new(),
        ended: Mutex::new(Vec::new()),
        polling: Default::default(),
        known: Default::default(),
        capabilities: Mutex::new(capabilities),
        watch_calls: Default::default(),
        opts,
    });
    let api = Api::new(&st.opts, Duration::from_secs(30))?;
    let hb_every = register_until_ok(&st, &api).await?;
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(heartbeat_loop(st.clone(), hb_every));
    tasks.spawn(watch::watch_loop(st.clone()));
    tasks.spawn(ship_loop(st.clone()));
    tasks.spawn(snapshots::snapshot_loop(st.clone()));
    tasks.spawn(reconcile::reconcile_loop(st.clone()));
    tasks.spawn(capabilities_loop(st.clone(), hup));
    tasks.spawn(sweep_loop(st.clone()));
    // The tasks loop forever; one ending is a bug worth exiting over.
    match tasks.join_next().await {
        Some(Err(e)) => anyhow::bail!("an agent task died: {e}"),
        _ => anyhow::bail!("an agent task ended unexpectedly"),
    }
}

fn platform() -> Platform {
    if cfg!(target_os = "macos") {
        Platform::Macos
    } else {
        Platform::Linux
    }
}

async fn register(st: &State, api: &Api) -> anyhow::Result<RegisterResponse> {
    let req = RegisterRequest {
        name: st.opts.name.clone(),
        platform: platform(),
        instance_id: st.opts.instance_id,
        capacity: st.opts.config.capacity,
        labels: st.opts.config.labels.clone(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        capabilities: Some(st.capabilities.lock().unwrap().clone()),
        protocol: Some(PROTOCOL_VERSION),
    };
    let r: RegisterResponse = api
        .post("/api/v1/workers/register", &req)
        .await?
        .context("register: empty answer")?;
    // A pamd of a protocol this worker does not speak.
    if let Some(why) = protocol_mismatch(Peer::Pamd, protocol_of(r.protocol)) {
        return Err(ProtocolMismatch(why).into());
    }
    Ok(r)
}

/// pamd and this worker do not speak one worker protocol: retrying cannot
/// help, so the worker stops with the reason (which side to upgrade).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ProtocolMismatch(String);

/// The mismatch, from this worker's check or pamd's refusal.
fn mismatch(e: &anyhow::Error) -> Option<String> {
    if let Some(m) = e.downcast_ref::<ProtocolMismatch>() {
        return Some(m.0.clone());
    }
    match http_code(e) {
        Some((400, "protocol_mismatch")) => Some(format!("{e:#}")),
        _ => None,
    }
}

/// Checks what this host can run every `capabilities_seconds` and on
/// SIGHUP; a change is reported by registering again
/// (idempotent), retried on the next check when pamd cannot be reached.
async fn capabilities_loop(st: Arc<State>, mut hup: tokio::signal::unix::Signal) {
    let api = Api::new(&st.opts, Duration::from_secs(30)).expect("http client");
    let every = Duration::from_secs(st.opts.config.capabilities_seconds);
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The disk, every heartbeat interval (a host running out of
    // room must stop taking workspace runs well before 5 minutes).
    let disk_every = Duration::from_secs(st.opts.config.heartbeat_seconds);
    let mut disk = tokio::time::interval_at(tokio::time::Instant::now() + disk_every, disk_every);
    disk.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut unsent = false;
    loop {
        let full = tokio::select! {
            _ = tick.tick() => true,
            _ = disk.tick() => false,
            _ = hup.recv() => {
                tracing::info!("SIGHUP: checking capabilities");
                true
            }
        };
        let now = if full {
            crate::capabilities::probe(&st.opts.config, &st.opts.data_dir).await
        } else {
            let mut now = st.capabilities.lock().unwrap().clone();
            crate::capabilities::disk(&st.opts.config, &st.opts.data_dir, &mut now);
            now
        };
        let changed = {
            let mut last = st.capabilities.lock().unwrap();
            let changed = crate::capabilities::changed(&last, &now);
            if changed {
                *last = now;
            }
            changed
        };
        if !(changed || unsent) {
            continue;
        }
        match register(&st, &api).await {
            Ok(_) => {
                unsent = false;
                tracing::info!("capabilities changed; reported");
            }
            Err(e) => {
                unsent = true;
                tracing::warn!(error = %format!("{e:#}"), "cannot report changed capabilities; retrying at the next check");
            }
        }
    }
}

/// Removes worktrees whose attempt ended more than `[workspaces]
/// retain_hours` ago, hourly; never one of a session this
/// worker runs.
async fn sweep_loop(st: Arc<State>) {
    let mut tick = tokio::time::interval(Duration::from_secs(3600));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let retain = Duration::from_secs(st.opts.config.workspaces.retain_hours.saturating_mul(3600));
    loop {
        tick.tick().await;
        let live: Vec<(uuid::Uuid, i32)> = st
            .running
            .lock()
            .unwrap()
            .iter()
            .filter_map(|s| Some((s.run_id?, s.attempt?)))
            .collect();
        let data = st.opts.data_dir.clone();
        let swept = tokio::task::spawn_blocking(move || {
            crate::workspace::sweep(&data, retain, std::time::SystemTime::now(), &live)
        })
        .await;
        match swept {
            Ok(Ok(n)) if n > 0 => tracing::info!(removed = n, "workspace sweep"),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %format!("{e:#}"), "workspace sweep failed"),
            Err(e) => tracing::warn!(error = %e, "workspace sweep panicked"),
        }
        sweep_logs(&st).await;
    }
}

/// Removes the logs of runs neither desired nor running whose files are
/// all older than `[logs] retain_days` ([`logs::sweep`]).
async fn sweep_logs(st: &State) {
    let mut keep: std::collections::HashSet<Uuid> =
        st.known.lock().unwrap().iter().map(|k| k.0).collect();
    keep.extend(st.running.lock().unwrap().iter().filter_map(|s| s.run_id));
    let retain = Duration::from_secs(st.opts.config.logs.retain_days.saturating_mul(86400));
    let data = st.opts.data_dir.clone();
    let swept = tokio::task::spawn_blocking(move || {
        logs::sweep(&data, retain, std::time::SystemTime::now(), &keep)
    })
    .await;
    match swept {
        Ok(Ok(n)) if n > 0 => tracing::info!(removed = n, "log sweep"),
        Ok(Ok(_)) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "log sweep failed"),
        Err(e) => tracing::warn!(error = %e, "log sweep panicked"),
    }
}

/// Registers, retrying with backoff; returns the heartbeat interval. A
/// protocol mismatch ends the worker: no retry can mend it.
async fn register_until_ok(st: &State, api: &Api) -> anyhow::Result<Duration> {
    let mut backoff = Backoff::new();
    loop {
        match register(st, api).await {
            Err(e) if mismatch(&e).is_some() => {
                let why = mismatch(&e).unwrap_or_default();
                tracing::error!(error = %why, "pamd and this worker speak different worker protocols");
                anyhow::bail!("cannot register: {why}");
            }
            Ok(r) => {
                if r.instance_suspect {
                    tracing::warn!("pamd flags this instance as suspect (another worker presents the same token); it gets no new runs until `pamctl host clear-suspect`");
                }
                tracing::info!(host_id = %r.host_id, "registered");
                let server = Duration::from_secs(r.heartbeat_seconds.max(1));
                let ours = Duration::from_secs(st.opts.config.heartbeat_seconds);
                return Ok(server.min(ours));
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "register failed; retrying");
                tokio::time::sleep(backoff.after(failure(&e))).await;
            }
        }
    }
}

async fn heartbeat_loop(st: Arc<State>, mut every: Duration) {
    // A client of its own: a slow upload elsewhere cannot hold its
    // connection.
    let api = Api::new(&st.opts, every.max(Duration::from_secs(5))).expect("http client");
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = st.reregister.notified() => {}
        }
        let hb = Heartbeat {
            instance_id: st.opts.instance_id,
            running: st.running.lock().unwrap().clone(),
        };
        // On the watch when it takes heartbeats: one connection to pamd.
        let on_watch = WatchRequest::Heartbeat(hb.clone());
        let sent = match watch::request(&st, on_watch, every.max(Duration::from_secs(5))).await {
            Some(answer) => answer.map(Some),
            None => api.post("/api/v1/workers/heartbeat", &hb).await,
        };
        match sent {
            Ok(Some(set)) => deliver(&st, &set),
            Ok(None) => {}
            Err(e) if matches!(http_code(&e), Some((409, "not_registered"))) => {
                tracing::warn!(
                    "pamd does not know this host (a database reset?); registering again"
                );
                if let Ok(r) = register(&st, &api).await {
                    let server = Duration::from_secs(r.heartbeat_seconds.max(1));
                    let new = server.min(Duration::from_secs(st.opts.config.heartbeat_seconds));
                    if new != every {
                        every = new;
                        tick = tokio::time::interval(every);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "heartbeat failed"),
        }
    }
}

/// Hands signals/input from a desired set to the reconcile loop.
fn deliver(st: &State, set: &DesiredSet) {
    // A run or a stop the last read of the set did not show
    // (its watch frame lost, or a pamd older than `run.stop_requested`,
    // whose stop through another replica sent none): read the set now.
    let mut any = {
        let known = st.known.lock().unwrap();
        set.runs
            .iter()
            .any(|r| !known.contains(&(r.run_id, r.attempt, r.stop)))
    };
    {
        let mut d = st.deliveries.lock().unwrap();
        for r in &set.runs {
            if !r.signals.is_empty() || !r.input.is_empty() {
                d.push((r.run_id, r.attempt, r.signals.clone(), r.input.clone()));
                any = true;
            }
        }
    }
    if any {
        st.wake.notify_one();
    }
}

/// The claim long-poll, against a pamd without the watch.
async fn claim_loop(st: Arc<State>) {
    let api =
        Api::new(&st.opts, Duration::from_secs(CLAIM_WAIT_SECONDS + 15)).expect("http client");
    let path = format!("/api/v1/workers/claim?wait={CLAIM_WAIT_SECONDS}");
    let mut backoff = Backoff::new();
    loop {
        match api
            .post::<_, DesiredSet>(&path, &serde_json::json!({}))
            .await
        {
            Ok(_) => {
                backoff.reset();
                st.wake.notify_one();
            }
            Err(e) => {
                tracing::debug!(error = %format!("{e:#}"), "claim failed");
                if matches!(http_code(&e), Some((409, "not_registered"))) {
                    st.reregister.notify_one();
                }
                tokio::time::sleep(backoff.after(failure(&e))).await;
            }
        }
    }
}

async fn ship_loop(st: Arc<State>) {
    let api = Api::new(&st.opts, Duration::from_secs(30)).expect("http client");
    let mut backoff = Backoff::new();
    let appended = Arc::new(tokio::sync::Notify::new());
    let _watch = watch_outbox(st.outbox.dir(), appended.clone());
    loop {
        match ship_once(&st, &api).await {
            Ok(n) => {
                backoff.reset();
                if n == 0 {
                    tokio::select! {
                        _ = appended.notified() => {}
                        _ = tokio::time::sleep(SHIP_POLL) => {}
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "shipping signals failed; retrying");
                tokio::time::sleep(backoff.after(failure(&e))).await;
            }
        }
    }
}

/// Wakes `appended` when an entry is renamed into the outbox (a wrapper's
/// `started`, `progress` or `finished`), so it ships at once rather than
/// at the next poll (the poll was a visible part of apply →
/// running). Hidden names are entries being written. `None` when the
/// watch cannot be set up: the poll still ships everything.
fn watch_outbox(
    dir: &std::path::Path,
    appended: Arc<tokio::sync::Notify>,
) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let Ok(ev) = res else { return };
        let entry = ev.paths.iter().any(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.') && n.ends_with(".json"))
        });
        if entry
            && matches!(
                ev.kind,
                notify::EventKind::Create(_) | notify::EventKind::Modify(_)
            )
        {
            appended.notify_one();
        }
    });
    match watcher.and_then(|mut w| w.watch(dir, notify::RecursiveMode::NonRecursive).map(|_| w)) {
        Ok(w) => Some(w),
        Err(e) => {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot watch the outbox; polling it");
            None
        }
    }
}

/// Ships one batch; returns how many entries it settled.
async fn ship_once(st: &State, api: &Api) -> anyhow::Result<usize> {
    let pending = st.outbox.pending(BATCH)?;
    if pending.is_empty() {
        return Ok(0);
    }
    // Workspace patches make a signal big: a batch stops before
    // the one that would take it past one signal's largest patch (pamd's
    // body limit is twice that), and holds at least one.
    let mut bytes = 0;
    let pending: Vec<_> = pending
        .into_iter()
        .enumerate()
        .take_while(|(i, (_, s))| {
            bytes += s.result.as_ref().map_or(0, |r| r.patch.len());
            *i == 0 || bytes <= pam_manifests::protocol::RESULT_PATCH_MAX_BYTES
        })
        .map(|(_, e)| e)
        .collect();
    let (ids, signals): (Vec<_>, Vec<_>) = pending.into_iter().unzip();
    let batch = SignalBatch { signals };
    match api
        .post::<_, SignalAck>("/api/v1/workers/signals", &batch)
        .await
    {
        Ok(Some(ack)) => {
            let n = st.outbox.settle(&ids, &ack)?;
            if n > 0 {
                // A finished run leaves the desired set: look again soon.
                st.wake.notify_one();
            }
            Ok(n.max(1))
        }
        Ok(None) => anyhow::bail!("signals: empty answer"),
        Err(e) => {
            if let Some(h) = e.downcast_ref::<HttpError>() {
                // 422: protocol errors; 403: a signal about a run now on
                // another host. Both carry per-signal results.
                if h.status == 422 || h.status == 403 {
                    let ack: SignalAck = serde_json::from_value(serde_json::json!({
                        "results": h.body["results"].clone()
                    }))
                    .unwrap_or_default();
                    st.outbox.settle(&ids, &ack)?;
                    return Ok(1);
                }
            }
            Err(e)
        }
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}
