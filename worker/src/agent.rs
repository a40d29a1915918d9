//! The agent: the long-running half of `pam-worker` that talks to pamd.
//!
//! Four tasks share one [`State`]:
//!
//! * **heartbeat** — every heartbeat interval (the smaller of worker.toml's
//!   `heartbeat_seconds` and what pamd asked for at registration), on a task
//!   of its own with its own HTTP client, so nothing (a slow spawn, a big
//!   upload, a stuck long-poll) can delay it. It reports the `pam-*`
//!   sessions the reconcile loop last saw; a `not_registered` answer makes
//!   it register again. Operator signals and attach input that pamd hands
//!   out with the heartbeat's desired set are passed to the reconcile loop.
//! * **claim** — a long-poll (`POST /api/v1/workers/claim?wait=`) that
//!   returns as soon as a run is dispatched to this host (or pamd nudges it
//!   for a stop, signal or attach input); every return wakes the reconcile
//!   loop.
//! * **reconcile** — level-triggered: on every wake-up and every
//!   `tick_seconds` it claims without waiting (so dispatch never hangs on
//!   one missed long-poll wake-up), fetches the desired set and makes tmux match: spawn
//!   what is missing, stop what is marked stopped (SIGTERM to the wrapper,
//!   which forwards it and escalates to SIGKILL after the stop grace; the
//!   session is killed if it outlives the grace), deliver operator signals
//!   (each id once: pamd lists all of an attempt's in every desired set;
//!   the delivered ids are kept in `sessions/<session>.signals`) and typed
//!   input, report `pam-*` sessions no desired run maps to as orphans
//!   (`run.orphan_detected`), and report a session that vanished without a
//!   `finished` as `lost` (→ `session_lost`). Which session runs which
//!   (run, attempt) is kept in `<data_dir>/sessions/<name>.json`, so after
//!   a restart still-running sessions are adopted, not respawned, and an
//!   attempt that already ran is never started twice.
//! * **ship** — sends outbox entries in batches and deletes them only after
//!   pamd acknowledged them (applied, duplicate or stale); a 422 answer
//!   counts rejections per entry (see [`crate::outbox`]).
//!
//! Plus **snapshots**: the pane of every live session (`tmux capture-pane`)
//! with the log's line and byte counts, to `/api/v1/workers/snapshots`, at
//! most once per `snapshot_interval_ms` per run and only when it changed;
//! and when a session ends, one last snapshot from the tail of its log.
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

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use pam_manifests::protocol::{
    DesiredRun, DesiredSet, Heartbeat, OperatorSignal, OutputSnapshot, RegisterRequest,
    RegisterResponse, SessionReport, Signal, SignalAck, SignalBatch, SignalKind, SignalName,
    REASON_SPAWN_FAILED,
};
use pam_manifests::state::Platform;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::config::Config;
use crate::outbox::Outbox;
use crate::tmux::Tmux;

/// How long a vanished session's run must still be desired before the
/// agent reports it lost.
pub const LOST_GRACE: Duration = Duration::from_secs(3);
/// How long a `pam-*` session must stay unmapped before it is an orphan.
pub const ORPHAN_AFTER: Duration = Duration::from_secs(4);
/// The claim long-poll's wait (pamd caps it at 60 s).
const CLAIM_WAIT_SECONDS: u64 = 20;
/// Most signals per batch.
const BATCH: usize = 256;
/// How often the shipper looks at the outbox when it is empty.
const SHIP_POLL: Duration = Duration::from_millis(50);
/// Pane lines per snapshot.
const SNAPSHOT_LINES: usize = 200;

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
}

/// Which (run, attempt) a session runs; persisted per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Mapping {
    run_id: Uuid,
    attempt: i32,
}

/// A thin JSON client for the worker endpoints.
#[derive(Clone)]
struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// A non-2xx answer.
#[derive(Debug)]
struct HttpError {
    status: u16,
    code: String,
    body: serde_json::Value,
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HTTP {} {}: {}", self.status, self.code, self.body)
    }
}
impl std::error::Error for HttpError {}

impl Api {
    fn new(base: &str, token: &str, timeout: Duration) -> anyhow::Result<Api> {
        Ok(Api {
            base: base.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
            http: reqwest::Client::builder()
                .timeout(timeout)
                .connect_timeout(Duration::from_secs(5))
                .build()?,
        })
    }

    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> anyhow::Result<Option<T>> {
        let resp = req.bearer_auth(&self.token).send().await?;
        let status = resp.status();
        if status.is_success() {
            if status == reqwest::StatusCode::NO_CONTENT || status == reqwest::StatusCode::ACCEPTED
            {
                return Ok(None);
            }
            return Ok(Some(resp.json().await?));
        }
        let body: serde_json::Value = resp.json().await.unwrap_or(serde_json::Value::Null);
        let code = body["error"]["code"].as_str().unwrap_or("").to_string();
        Err(HttpError {
            status: status.as_u16(),
            code,
            body,
        }
        .into())
    }

    async fn post<B: Serialize, T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> anyhow::Result<Option<T>> {
        self.send(self.http.post(format!("{}{path}", self.base)).json(body))
            .await
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.send(self.http.get(format!("{}{path}", self.base)))
            .await?
            .context("empty answer")
    }
}

fn http_code(e: &anyhow::Error) -> Option<(u16, &str)> {
    e.downcast_ref::<HttpError>()
        .map(|h| (h.status, h.code.as_str()))
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
    /// (run, attempt) whose session ended since the snapshot loop last
    /// looked: they get one final snapshot from the log.
    ended: Mutex<Vec<(Uuid, i32)>>,
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
    std::fs::create_dir_all(sessions_dir(&opts.data_dir))?;
    let st = Arc::new(State {
        tmux,
        outbox,
        wake: Notify::new(),
        running: Mutex::new(Vec::new()),
        deliveries: Mutex::new(Vec::new()),
        reregister: Notify::new(),
        ended: Mutex::new(Vec::new()),
        opts,
    });
    let api = Api::new(&st.opts.server, &st.opts.token, Duration::from_secs(30))?;
    let hb_every = register_until_ok(&st, &api).await;
    let mut tasks = tokio::task::JoinSet::new();
    tasks.spawn(heartbeat_loop(st.clone(), hb_every));
    tasks.spawn(claim_loop(st.clone()));
    tasks.spawn(ship_loop(st.clone()));
    tasks.spawn(snapshot_loop(st.clone()));
    tasks.spawn(reconcile_loop(st.clone()));
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
    };
    api.post("/api/v1/workers/register", &req)
        .await?
        .context("register: empty answer")
}

/// Registers, retrying with backoff; returns the heartbeat interval.
async fn register_until_ok(st: &State, api: &Api) -> Duration {
    let mut backoff = Duration::from_millis(200);
    loop {
        match register(st, api).await {
            Ok(r) => {
                if r.instance_suspect {
                    tracing::warn!("pamd flags this instance as suspect (another worker presents the same token); it gets no new runs until `pamctl host clear-suspect`");
                }
                tracing::info!(host_id = %r.host_id, "registered");
                let server = Duration::from_secs(r.heartbeat_seconds.max(1));
                let ours = Duration::from_secs(st.opts.config.heartbeat_seconds);
                return server.min(ours);
            }
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "register failed; retrying");
                if matches!(http_code(&e), Some((401 | 403, _))) {
                    backoff = Duration::from_secs(10);
                }
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

async fn heartbeat_loop(st: Arc<State>, mut every: Duration) {
    // A client of its own: a slow upload elsewhere cannot hold its
    // connection.
    let api = Api::new(
        &st.opts.server,
        &st.opts.token,
        every.max(Duration::from_secs(5)),
    )
    .expect("http client");
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
        match api
            .post::<_, DesiredSet>("/api/v1/workers/heartbeat", &hb)
            .await
        {
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
    let mut any = false;
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

async fn claim_loop(st: Arc<State>) {
    let api = Api::new(
        &st.opts.server,
        &st.opts.token,
        Duration::from_secs(CLAIM_WAIT_SECONDS + 15),
    )
    .expect("http client");
    let path = format!("/api/v1/workers/claim?wait={CLAIM_WAIT_SECONDS}");
    loop {
        match api
            .post::<_, DesiredSet>(&path, &serde_json::json!({}))
            .await
        {
            Ok(_) => st.wake.notify_one(),
            Err(e) => {
                tracing::debug!(error = %format!("{e:#}"), "claim failed");
                if matches!(http_code(&e), Some((409, "not_registered"))) {
                    st.reregister.notify_one();
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

async fn ship_loop(st: Arc<State>) {
    let api =
        Api::new(&st.opts.server, &st.opts.token, Duration::from_secs(30)).expect("http client");
    loop {
        match ship_once(&st, &api).await {
            Ok(n) if n > 0 => continue,
            Ok(_) => tokio::time::sleep(SHIP_POLL).await,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "shipping signals failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}

/// Ships one batch; returns how many entries it settled.
async fn ship_once(st: &State, api: &Api) -> anyhow::Result<usize> {
    let pending = st.outbox.pending(BATCH)?;
    if pending.is_empty() {
        return Ok(0);
    }
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
                if h.status == 422 {
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

// ------------------------------------------------------------ reconcile

fn sessions_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("sessions")
}

fn read_mapping(data_dir: &Path, session: &str) -> Option<Mapping> {
    let bytes = std::fs::read(sessions_dir(data_dir).join(format!("{session}.json"))).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn write_mapping(data_dir: &Path, session: &str, m: Mapping) -> std::io::Result<()> {
    let dir = sessions_dir(data_dir);
    std::fs::create_dir_all(&dir)?;
    let tmp = dir.join(format!(".{session}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec(&m)?)?;
    std::fs::rename(tmp, dir.join(format!("{session}.json")))
}

fn remove_mapping(data_dir: &Path, session: &str) {
    let _ = std::fs::remove_file(sessions_dir(data_dir).join(format!("{session}.json")));
    let _ = std::fs::remove_file(sessions_dir(data_dir).join(format!("{session}.signals")));
}

/// The ids of the operator signals delivered to a session (one per line in
/// `<session>.signals`, next to its mapping).
fn read_delivered(data_dir: &Path, session: &str) -> HashSet<i64> {
    std::fs::read_to_string(sessions_dir(data_dir).join(format!("{session}.signals")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

fn record_delivered(data_dir: &Path, session: &str, id: i64) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = sessions_dir(data_dir);
    std::fs::create_dir_all(&dir)?;
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{session}.signals")))?;
    writeln!(f, "{id}")?;
    f.sync_data()
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The one place an operator signal becomes a Unix signal.
fn unix_signal(name: SignalName) -> nix::sys::signal::Signal {
    use nix::sys::signal::Signal as S;
    match name {
        SignalName::Int => S::SIGINT,
        SignalName::Term => S::SIGTERM,
        SignalName::Kill => S::SIGKILL,
        SignalName::Hup => S::SIGHUP,
        SignalName::Quit => S::SIGQUIT,
        SignalName::Usr1 => S::SIGUSR1,
        SignalName::Usr2 => S::SIGUSR2,
    }
}

/// The reconcile loop's memory (rebuilt from disk and tmux after a
/// restart).
#[derive(Default)]
struct Local {
    /// Session → when a stop was first sent to it.
    stopping: HashMap<String, Instant>,
    /// (run, attempt) → when its session was first seen gone.
    gone_since: HashMap<(Uuid, i32), Instant>,
    /// (run, attempt) reported lost.
    lost_sent: HashSet<(Uuid, i32)>,
    /// Session → when it was first seen unmapped.
    unmapped_since: HashMap<String, Instant>,
    /// Sessions reported as orphans.
    orphans_sent: HashSet<String>,
}

async fn reconcile_loop(st: Arc<State>) {
    let api =
        Api::new(&st.opts.server, &st.opts.token, Duration::from_secs(30)).expect("http client");
    let tick = Duration::from_secs(st.opts.config.tick_seconds);
    let mut local = Local::default();
    loop {
        // A non-waiting claim each tick as well: dispatch never depends only
        // on the long-poll's wake-up arriving.
        if let Err(e) = api
            .post::<_, DesiredSet>("/api/v1/workers/claim?wait=0", &serde_json::json!({}))
            .await
        {
            tracing::debug!(error = %format!("{e:#}"), "tick claim failed");
        }
        let fetched_at = Instant::now();
        match api.get::<DesiredSet>("/api/v1/workers/desired").await {
            Ok(set) => {
                if let Err(e) = reconcile(&st, &mut local, &set, fetched_at).await {
                    tracing::warn!(error = %format!("{e:#}"), "reconcile failed");
                }
            }
            Err(e) => {
                if matches!(http_code(&e), Some((409, "not_registered"))) {
                    st.reregister.notify_one();
                }
                tracing::warn!(error = %format!("{e:#}"), "fetching the desired set failed");
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(tick) => {}
            _ = st.wake.notified() => {}
        }
    }
}

fn has_pending_signals(outbox: &Outbox, run: Uuid, attempt: i32) -> bool {
    outbox
        .pending(usize::MAX)
        .map(|p| {
            p.iter()
                .any(|(_, s)| s.run_id == run && s.attempt == attempt)
        })
        .unwrap_or(true)
}

async fn reconcile(
    st: &State,
    local: &mut Local,
    set: &DesiredSet,
    fetched_at: Instant,
) -> anyhow::Result<()> {
    let data = &st.opts.data_dir;
    let mut sessions: HashSet<String> = st.tmux.list_sessions().await?.into_iter().collect();
    let deliveries = std::mem::take(&mut *st.deliveries.lock().unwrap());
    let mut extra: HashMap<(Uuid, i32), (Vec<OperatorSignal>, Vec<String>)> = HashMap::new();
    for (run, attempt, sigs, input) in deliveries {
        let e = extra.entry((run, attempt)).or_default();
        e.0.extend(sigs);
        e.1.extend(input);
    }
    let desired_names: HashSet<&str> = set.runs.iter().map(|r| r.session_name.as_str()).collect();

    for d in &set.runs {
        let key = (d.run_id, d.attempt);
        let mapping = read_mapping(data, &d.session_name);
        let alive = sessions.contains(&d.session_name);
        let ours = mapping
            == Some(Mapping {
                run_id: d.run_id,
                attempt: d.attempt,
            });
        if alive && mapping.is_some_and(|m| m.run_id == d.run_id && m.attempt < d.attempt) {
            // An older attempt of this run still runs here: it is a dead
            // incarnation; make room for the current one.
            tracing::warn!(session = %d.session_name, "killing an older attempt's session");
            st.tmux.kill_session(&d.session_name).await?;
            sessions.remove(&d.session_name);
            remove_mapping(data, &d.session_name);
            continue; // spawned on the next pass
        }
        if alive {
            local.gone_since.remove(&key);
            if mapping.is_none() {
                // Adopt: a session with the run's name and no record (a lost
                // data dir) is taken to run the desired attempt.
                write_mapping(
                    data,
                    &d.session_name,
                    Mapping {
                        run_id: d.run_id,
                        attempt: d.attempt,
                    },
                )?;
            }
            let (mut sigs, mut input) = extra.remove(&key).unwrap_or_default();
            sigs.splice(0..0, d.signals.iter().cloned());
            input.splice(0..0, d.input.iter().cloned());
            // pamd lists every signal of the attempt in every desired set:
            // each id is delivered once, remembered with the session.
            let mut delivered = read_delivered(data, &d.session_name);
            for s in sigs {
                if !delivered.insert(s.id) {
                    continue;
                }
                match s.name() {
                    Ok(name) => {
                        if let Err(e) = st
                            .tmux
                            .send_signal(&d.session_name, unix_signal(name))
                            .await
                        {
                            tracing::warn!(session = %d.session_name, signal = %s.signal, error = %e, "cannot deliver signal");
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "unknown signal from pamd ignored"),
                }
                if let Err(e) = record_delivered(data, &d.session_name, s.id) {
                    tracing::warn!(session = %d.session_name, error = %e, "cannot record a delivered signal");
                }
            }
            for line in input {
                if let Err(e) = st.tmux.send_keys(&d.session_name, &line).await {
                    tracing::warn!(session = %d.session_name, error = %e, "cannot type attach input");
                }
            }
            if d.stop {
                let grace = Duration::from_secs(st.opts.config.stop_grace_seconds);
                match local.stopping.get(&d.session_name) {
                    None => {
                        tracing::info!(run_id = %d.run_id, session = %d.session_name, "stopping");
                        local
                            .stopping
                            .insert(d.session_name.clone(), Instant::now());
                        if let Err(e) = st
                            .tmux
                            .send_signal(&d.session_name, nix::sys::signal::Signal::SIGTERM)
                            .await
                        {
                            tracing::warn!(error = %e, "SIGTERM failed; killing the session");
                            st.tmux.kill_session(&d.session_name).await?;
                        }
                    }
                    Some(t) if t.elapsed() > grace + Duration::from_secs(2) => {
                        tracing::warn!(session = %d.session_name, "still alive after the stop grace; killing the session");
                        st.tmux.kill_session(&d.session_name).await?;
                    }
                    Some(_) => {}
                }
            }
            continue;
        }
        // No session.
        if ours || mapping.is_some_and(|m| m.run_id == d.run_id && m.attempt > d.attempt) {
            // It ran here and ended. Normally its `finished` is on its way;
            // if the run is still desired well after that, it was lost.
            let since = *local.gone_since.entry(key).or_insert_with(Instant::now);
            if fetched_at >= since + LOST_GRACE
                && !local.lost_sent.contains(&key)
                && !has_pending_signals(&st.outbox, d.run_id, d.attempt)
            {
                tracing::warn!(run_id = %d.run_id, attempt = d.attempt, "session vanished without finishing: reporting lost");
                let mut s = Signal::new(d.run_id, d.attempt, SignalKind::Lost, now_rfc3339());
                s.reason =
                    Some("the tmux session ended without the wrapper reporting an exit".into());
                s.session_name = Some(d.session_name.clone());
                st.outbox.append(&s)?;
                local.lost_sent.insert(key);
            }
            continue;
        }
        if d.stop {
            // Never started here and to be stopped: nothing to run. Report it
            // lost so pamd can settle it (a stop request makes it stopped).
            if local.lost_sent.insert(key) {
                let mut s = Signal::new(d.run_id, d.attempt, SignalKind::Lost, now_rfc3339());
                s.reason = Some("stopped before its session was started".into());
                s.session_name = Some(d.session_name.clone());
                st.outbox.append(&s)?;
            }
            continue;
        }
        spawn_run(st, d).await?;
        sessions.insert(d.session_name.clone());
    }

    // Sessions no desired run maps to.
    let now = Instant::now();
    for s in &sessions {
        if desired_names.contains(s.as_str()) {
            local.unmapped_since.remove(s);
            continue;
        }
        let since = *local.unmapped_since.entry(s.clone()).or_insert(now);
        if now.duration_since(since) >= ORPHAN_AFTER && local.orphans_sent.insert(s.clone()) {
            let m = read_mapping(data, s);
            tracing::warn!(session = %s, "orphan tmux session: no run maps to it");
            let mut sig = Signal::new(
                m.map_or(Uuid::nil(), |m| m.run_id),
                m.map_or(1, |m| m.attempt),
                SignalKind::Orphan,
                now_rfc3339(),
            );
            sig.reason = Some("a pam-* tmux session that no desired run maps to".into());
            sig.session_name = Some(s.clone());
            st.outbox.append(&sig)?;
        }
    }
    local.unmapped_since.retain(|s, _| sessions.contains(s));
    local.orphans_sent.retain(|s| sessions.contains(s));
    local.stopping.retain(|s, _| sessions.contains(s));
    // Records of sessions that ended and are no longer desired.
    if let Ok(rd) = std::fs::read_dir(sessions_dir(data)) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let session = name
                .strip_suffix(".json")
                .or_else(|| name.strip_suffix(".signals"));
            if let Some(s) = session {
                if !sessions.contains(s) && !desired_names.contains(s) {
                    remove_mapping(data, s);
                }
            }
        }
    }
    let desired_keys: HashSet<(Uuid, i32)> =
        set.runs.iter().map(|r| (r.run_id, r.attempt)).collect();
    local.gone_since.retain(|k, _| desired_keys.contains(k));

    let mut running: Vec<SessionReport> = sessions
        .iter()
        .map(|s| {
            let m = read_mapping(data, s);
            SessionReport {
                session_name: s.clone(),
                run_id: m.map(|m| m.run_id),
                attempt: m.map(|m| m.attempt),
            }
        })
        .collect();
    running.sort_by(|a, b| a.session_name.cmp(&b.session_name));
    let previous = std::mem::replace(&mut *st.running.lock().unwrap(), running);
    let ended: Vec<(Uuid, i32)> = previous
        .iter()
        .filter(|r| !sessions.contains(&r.session_name))
        .filter_map(|r| Some((r.run_id?, r.attempt?)))
        .collect();
    if !ended.is_empty() {
        st.ended.lock().unwrap().extend(ended);
    }
    Ok(())
}

async fn spawn_run(st: &State, d: &DesiredRun) -> anyhow::Result<()> {
    let data = &st.opts.data_dir;
    // Recorded before the session exists: a crash right after the spawn
    // must not start the attempt a second time.
    write_mapping(
        data,
        &d.session_name,
        Mapping {
            run_id: d.run_id,
            attempt: d.attempt,
        },
    )?;
    tracing::info!(run_id = %d.run_id, attempt = d.attempt, session = %d.session_name, "spawning");
    // tmux exits when its last session ends; a new-session racing that exit
    // fails with "server exited unexpectedly". Retry a few times before
    // calling it a spawn failure.
    let mut result = Ok(());
    for attempt in 0..4 {
        if attempt > 0 {
            if st.tmux.has_session(&d.session_name).await.unwrap_or(false) {
                result = Ok(());
                break;
            }
            tokio::time::sleep(Duration::from_millis(50 * attempt)).await;
        }
        result = crate::spawn::spawn(&st.tmux, &st.opts.worker_exe, data, &st.opts.config, d).await;
        if result.is_ok() {
            break;
        }
    }
    if let Err(e) = result {
        tracing::warn!(run_id = %d.run_id, error = %format!("{e:#}"), "spawn failed");
        let mut s = Signal::new(d.run_id, d.attempt, SignalKind::Failed, now_rfc3339());
        s.reason = Some(REASON_SPAWN_FAILED.into());
        s.session_name = Some(d.session_name.clone());
        st.outbox.append(&s)?;
    }
    Ok(())
}

// ------------------------------------------------------------ snapshots

async fn snapshot_loop(st: Arc<State>) {
    let api =
        Api::new(&st.opts.server, &st.opts.token, Duration::from_secs(30)).expect("http client");
    let every = Duration::from_millis(st.opts.config.snapshot_interval_ms);
    let mut last: BTreeMap<(Uuid, i32), (u64, String)> = BTreeMap::new();
    loop {
        tokio::time::sleep(every).await;
        let running = st.running.lock().unwrap().clone();
        let mut seen = HashSet::new();
        for r in running {
            let (Some(run_id), Some(attempt)) = (r.run_id, r.attempt) else {
                continue;
            };
            seen.insert((run_id, attempt));
            let mut snap = match crate::snapshot::read(&st.opts.data_dir, run_id, attempt, 0) {
                Ok(s) => s,
                Err(_) => OutputSnapshot {
                    run_id,
                    attempt,
                    text: String::new(),
                    lines: 0,
                    bytes: 0,
                },
            };
            snap.text = match st.tmux.capture_pane(&r.session_name, SNAPSHOT_LINES).await {
                Ok(t) => t,
                Err(_) => {
                    match crate::snapshot::read(&st.opts.data_dir, run_id, attempt, SNAPSHOT_LINES)
                    {
                        Ok(s) => s.text,
                        Err(_) => continue,
                    }
                }
            };
            let key = (run_id, attempt);
            if last
                .get(&key)
                .is_some_and(|(b, t)| *b == snap.bytes && *t == snap.text)
            {
                continue;
            }
            match api
                .post::<_, serde_json::Value>("/api/v1/workers/snapshots", &snap)
                .await
            {
                Ok(_) => {
                    last.insert(key, (snap.bytes, snap.text));
                }
                Err(e) => tracing::debug!(error = %format!("{e:#}"), "snapshot upload failed"),
            }
        }
        last.retain(|k, _| seen.contains(k));
        // One last snapshot of each ended session, from its log: the pane is
        // gone, and `pamctl logs` of a finished run shows how it ended.
        let ended = std::mem::take(&mut *st.ended.lock().unwrap());
        for (run_id, attempt) in ended {
            if let Ok(snap) =
                crate::snapshot::read(&st.opts.data_dir, run_id, attempt, SNAPSHOT_LINES)
            {
                if snap.bytes > 0 {
                    if let Err(e) = api
                        .post::<_, serde_json::Value>("/api/v1/workers/snapshots", &snap)
                        .await
                    {
                        tracing::debug!(error = %format!("{e:#}"), "final snapshot upload failed");
                    }
                }
            }
        }
    }
}
