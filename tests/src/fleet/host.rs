//! One simulated worker host, speaking the real worker protocol over HTTP
//! the way pam-worker does (worker/src/agent/mod.rs): register with an
//! instance id, heartbeat every heartbeat interval with the sessions it
//! runs, the watch stream (a read of the desired set on each
//! frame and every `resync_secs`; pamd claims for the host), and an outbox shipped in batches that keeps each
//! signal until pamd acknowledged it. A run "runs" for a drawn duration:
//! `started`, a `progress` step (with token usage) every few seconds, then
//! `finished` with exit 0, or 1 at the failure rate.
//!
//! A crash pauses the host (no heartbeat, claim or shipping; its runs go
//! on, like tmux sessions outliving the agent), then it registers again
//! and first ships its last acknowledged batch once more, as a worker does
//! whose acknowledgement was lost: every replayed signal must come back a
//! duplicate.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pam_manifests::protocol::{
    DesiredSet, Heartbeat, RegisterRequest, SessionReport, Signal, SignalAck, SignalBatch,
    SignalKind, SignalOutcome, TokenUsage,
};
use pam_manifests::state::Platform;
use serde::de::DeserializeOwned;
use serde::Serialize;
use uuid::Uuid;

use super::measure::{Acks, Latencies};
use super::{FleetConfig, Rng};

/// What every host shares.
pub struct Shared {
    pub http: reqwest::Client,
    pub base: String,
    pub cfg: FleetConfig,
    pub lat: Latencies,
    pub acks: Acks,
    pub stop: std::sync::atomic::AtomicBool,
    /// Hosts whose watch stream has opened once and whose first desired
    /// set was read: the idle measure waits for all of them.
    pub settled: std::sync::atomic::AtomicUsize,
}

pub struct Host {
    pub name: String,
    token: String,
    instance: Uuid,
    state: Mutex<State>,
    /// The open watch that takes heartbeats (as pam-worker's): each one
    /// sent, and when.
    on_watch: Mutex<Option<tokio::sync::mpsc::Sender<(Heartbeat, Instant)>>>,
}

#[derive(Default)]
struct State {
    /// Live runs: run → (attempt, session).
    running: HashMap<Uuid, (i32, String)>,
    /// Every (run, attempt) this host started.
    started: std::collections::HashSet<(Uuid, i32)>,
    outbox: VecDeque<Signal>,
    last_acked: Vec<Signal>,
    paused_until: Option<Instant>,
    replay: bool,
    register: bool,
}

/// Shipped per request at most (the real outbox's batch).
const BATCH: usize = 100;

/// After a failed desired-set read, the next one (pam-worker's
/// `tick_seconds`).
const RETRY_READ: Duration = Duration::from_secs(5);

impl Host {
    pub fn new(name: String, token: String) -> Arc<Host> {
        Arc::new(Host {
            name,
            token,
            instance: Uuid::new_v4(),
            state: Mutex::new(State::default()),
            on_watch: Mutex::new(None),
        })
    }

    async fn call<B: Serialize, T: DeserializeOwned>(
        &self,
        sh: &Shared,
        endpoint: &'static str,
        method: reqwest::Method,
        path: &str,
        body: Option<&B>,
    ) -> Option<T> {
        let mut req = sh
            .http
            .request(method, format!("{}{path}", sh.base))
            .bearer_auth(&self.token);
        if let Some(b) = body {
            req = req.json(b);
        }
        let t = Instant::now();
        let resp = match req.send().await {
            Ok(r) => r,
            Err(_) => {
                sh.lat.error(endpoint, 0);
                return None;
            }
        };
        let status = resp.status();
        let parsed = if status.is_success() {
            resp.json::<T>().await.ok()
        } else {
            let _ = resp.bytes().await;
            None
        };
        sh.lat.record(endpoint, t.elapsed());
        if !status.is_success() {
            sh.lat.error(endpoint, status.as_u16());
        }
        parsed
    }

    pub async fn register(&self, sh: &Shared) -> bool {
        let req = RegisterRequest {
            name: self.name.clone(),
            platform: Platform::Linux,
            instance_id: self.instance,
            capacity: sh.cfg.capacity,
            labels: Default::default(),
            version: "fleet-sim".into(),
            capabilities: None,
            protocol: Some(pam_manifests::protocol::PROTOCOL_VERSION),
        };
        self.call::<_, serde_json::Value>(
            sh,
            "register",
            reqwest::Method::POST,
            "/api/v1/workers/register",
            Some(&req),
        )
        .await
        .is_some()
    }

    fn paused(&self) -> bool {
        let mut st = self.state.lock().unwrap();
        match st.paused_until {
            Some(t) if Instant::now() < t => true,
            Some(_) => {
                st.paused_until = None;
                st.replay = true;
                st.register = true;
                false
            }
            None => false,
        }
    }

    /// A crash: the agent is gone for `for_` (its runs go on).
    pub fn crash(&self, for_: Duration) {
        self.state.lock().unwrap().paused_until = Some(Instant::now() + for_);
    }

    pub async fn heartbeat_loop(self: Arc<Self>, sh: Arc<Shared>, offset: Duration) {
        tokio::time::sleep(offset).await;
        let every = Duration::from_secs(sh.cfg.heartbeat_secs);
        while !sh.stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            if !self.paused() {
                let again = std::mem::take(&mut self.state.lock().unwrap().register);
                if again {
                    self.register(&sh).await;
                }
                let hb = Heartbeat {
                    instance_id: self.instance,
                    running: self
                        .state
                        .lock()
                        .unwrap()
                        .running
                        .iter()
                        .map(|(id, (attempt, session))| SessionReport {
                            session_name: session.clone(),
                            run_id: Some(*id),
                            attempt: Some(*attempt),
                        })
                        .collect(),
                };
                // On the watch when it takes them, as pam-worker; else
                // (a stream not open) posted.
                let watch = self.on_watch.lock().unwrap().clone();
                let sent = match watch {
                    Some(w) => w.send((hb.clone(), Instant::now())).await.is_ok(),
                    None => false,
                };
                if !sent {
                    let _: Option<DesiredSet> = self
                        .call(
                            &sh,
                            "heartbeat",
                            reqwest::Method::POST,
                            "/api/v1/workers/heartbeat",
                            Some(&hb),
                        )
                        .await;
                }
            }
            tokio::time::sleep(every.saturating_sub(t.elapsed())).await;
        }
    }

    /// The watch (as pam-worker follows it): one long
    /// `GET /api/v1/workers/watch`; every `event: desired` frame (pamd
    /// claimed a run for this host, or its set changed) is one read of the
    /// desired set, whose new runs start. A safety-net read every
    /// `resync_secs`. A crash drops the stream; the host reopens it at the
    /// last frame's id afterwards.
    pub async fn watch_loop(self: Arc<Self>, sh: Arc<Shared>, offset: Duration, seed: u64) {
        let mut rng = Rng(seed);
        let mut last: Option<String> = None;
        let mut settled = false;
        let resync = Duration::from_secs(sh.cfg.resync_secs);
        let first = if sh.cfg.steady {
            offset
        } else {
            offset + resync
        };
        let mut next_resync = Instant::now() + first;
        while !sh.stop.load(Ordering::Relaxed) {
            if self.paused() {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            let mut req = sh
                .http
                .get(format!("{}/api/v1/workers/watch", sh.base))
                .bearer_auth(&self.token)
                .header(reqwest::header::CONNECTION, "upgrade")
                .header(
                    reqwest::header::UPGRADE,
                    pam_manifests::protocol::WATCH_UPGRADE,
                )
                .timeout(Duration::from_secs(65 * 60));
            if let Some(id) = &last {
                req = req.header("last-event-id", id);
            }
            let t = Instant::now();
            let resp = match req.send().await {
                Ok(r) if r.status() == reqwest::StatusCode::SWITCHING_PROTOCOLS => r,
                Ok(r) => {
                    sh.lat.error("watch", r.status().as_u16());
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
                Err(_) => {
                    sh.lat.error("watch", 0);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            let takes: Vec<String> = resp
                .headers()
                .get(pam_manifests::protocol::WATCH_ACCEPTS)
                .and_then(|v| v.to_str().ok())
                .map(|v| {
                    pam_manifests::protocol::watch_accepts(v)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default();
            // As pam-worker: the upgraded connection carries the frames,
            // and the heartbeats and desired-set reads when pamd takes
            // them there.
            let (mut rd, mut wr) = match resp.upgrade().await {
                Ok(io) => tokio::io::split(io),
                Err(_) => {
                    sh.lat.error("watch", 101);
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            sh.lat.record("watch (open)", t.elapsed());
            let (beats, mut beat) = tokio::sync::mpsc::channel(4);
            if takes.iter().any(|t| t == "heartbeat") {
                *self.on_watch.lock().unwrap() = Some(beats);
            }
            let reads_on_watch = takes.iter().any(|t| t == "desired_set");
            // The requests written and not yet answered, in order: which,
            // and when each was sent.
            let mut sent: VecDeque<(&'static str, Instant)> = VecDeque::new();
            // A read is due (a frame came, or the resync) while one is
            // unanswered: read again when it is.
            let mut again = false;
            let mut buf: Vec<u8> = Vec::new();
            let mut read = [0u8; 4096];
            loop {
                if sh.stop.load(Ordering::Relaxed) || self.paused() {
                    break;
                }
                let wait = next_resync.saturating_duration_since(Instant::now());
                let chunk = tokio::select! {
                    c = tokio::time::timeout(
                        wait.min(Duration::from_secs(1)),
                        tokio::io::AsyncReadExt::read(&mut rd, &mut read),
                    ) => c,
                    Some((hb, at)) = beat.recv() => {
                        let line = serde_json::json!({ "heartbeat": hb }).to_string() + "\n";
                        if tokio::io::AsyncWriteExt::write_all(&mut wr, line.as_bytes()).await.is_err() {
                            sh.lat.error("heartbeat", 0);
                            break;
                        }
                        sent.push_back(("heartbeat", at));
                        continue;
                    }
                };
                let mut frames = 0;
                let mut answered: Option<Option<DesiredSet>> = None;
                match chunk {
                    Err(_) => {}
                    Ok(Ok(n)) if n > 0 => {
                        buf.extend_from_slice(&read[..n]);
                        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
                            let block: Vec<u8> = buf.drain(..end + 2).collect();
                            let text = String::from_utf8_lossy(&block);
                            let event = text.lines().find_map(|l| l.strip_prefix("event: "));
                            let data = text.lines().find_map(|l| l.strip_prefix("data: "));
                            if matches!(event, Some("heartbeat" | "desired_set" | "error")) {
                                // An answer, in the order the requests were sent.
                                let Some((what, at)) = sent.pop_front() else {
                                    continue;
                                };
                                sh.lat.record(what, at.elapsed());
                                if event == Some("error") {
                                    let status = data
                                        .and_then(|d| {
                                            serde_json::from_str::<
                                                pam_manifests::protocol::WatchError,
                                            >(d)
                                            .ok()
                                        })
                                        .map_or(0, |e| e.status);
                                    sh.lat.error(what, status);
                                }
                                if what == "desired" {
                                    let set = data.filter(|_| event == Some("desired_set"));
                                    answered = Some(set.and_then(|d| serde_json::from_str(d).ok()));
                                }
                            } else if let Some(id) =
                                text.lines().find_map(|l| l.strip_prefix("id: "))
                            {
                                last = Some(id.to_string());
                                frames += 1;
                            }
                        }
                    }
                    // Ended or broken: open it again.
                    Ok(_) => break,
                }
                let due = Instant::now() >= next_resync;
                if let Some(set) = answered {
                    self.read_desired(&sh, set, &mut settled, &mut next_resync, &mut rng);
                }
                let reading = sent.iter().any(|(what, _)| *what == "desired");
                let read_again = again && !reading;
                if frames == 0 && !due && !read_again {
                    continue;
                }
                if due {
                    next_resync = Instant::now() + resync;
                }
                if !reads_on_watch {
                    let set: Option<DesiredSet> = self
                        .call::<(), _>(
                            &sh,
                            "desired",
                            reqwest::Method::GET,
                            "/api/v1/workers/desired",
                            None,
                        )
                        .await;
                    self.read_desired(&sh, set, &mut settled, &mut next_resync, &mut rng);
                } else if reading {
                    again = true;
                } else {
                    again = false;
                    let line = b"{\"desired_set\":{}}\n";
                    if tokio::io::AsyncWriteExt::write_all(&mut wr, line)
                        .await
                        .is_err()
                    {
                        sh.lat.error("desired", 0);
                        break;
                    }
                    sent.push_back(("desired", Instant::now()));
                }
            }
            // Heartbeats are posted until the next stream takes them.
            *self.on_watch.lock().unwrap() = None;
        }
    }

    /// A read of the desired set answered (`None`: it failed).
    fn read_desired(
        self: &Arc<Self>,
        sh: &Arc<Shared>,
        set: Option<DesiredSet>,
        settled: &mut bool,
        next_resync: &mut Instant,
        rng: &mut Rng,
    ) {
        match set {
            Some(set) => {
                if !std::mem::replace(settled, true) {
                    sh.settled.fetch_add(1, Ordering::Relaxed);
                }
                self.start_runs(sh, set, rng);
            }
            // As pam-worker: a failed read is tried again after its tick
            // (5 s), not at the next resync.
            None => *next_resync = Instant::now() + RETRY_READ,
        }
    }

    fn start_runs(self: &Arc<Self>, sh: &Arc<Shared>, set: DesiredSet, rng: &mut Rng) {
        for d in set.runs {
            let fresh = {
                // An attempt starts once: a desired set read before its
                // `finished` was acknowledged still lists it.
                let mut st = self.state.lock().unwrap();
                st.started.insert((d.run_id, d.attempt))
                    && st
                        .running
                        .insert(d.run_id, (d.attempt, d.session_name.clone()))
                        .is_none()
            };
            if !fresh {
                continue;
            }
            let mean = sh.cfg.run_secs.max(0.001);
            let secs = mean * (0.5 + rng.unit());
            let fail = rng.unit() < sh.cfg.fail_rate;
            tokio::spawn(self.clone().run(
                sh.clone(),
                d.run_id,
                d.attempt,
                d.session_name,
                Duration::from_secs_f64(secs),
                fail,
            ));
        }
    }

    fn signal(
        run: Uuid,
        attempt: i32,
        session: &str,
        kind: SignalKind,
        seq: Option<i64>,
    ) -> Signal {
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut s = Signal::new(run, attempt, kind, at);
        s.seq = seq;
        s.session_name = Some(session.to_string());
        s
    }

    async fn run(
        self: Arc<Self>,
        sh: Arc<Shared>,
        id: Uuid,
        attempt: i32,
        session: String,
        took: Duration,
        fail: bool,
    ) {
        // tmux new-session and the wrapper's start.
        tokio::time::sleep(Duration::from_millis(10)).await;
        let push = |s: Signal| self.state.lock().unwrap().outbox.push_back(s);
        push(Self::signal(
            id,
            attempt,
            &session,
            SignalKind::Started,
            None,
        ));
        let started = Instant::now();
        let step = Duration::from_secs_f64(sh.cfg.progress_secs.max(0.05));
        let mut seq = 0;
        while started.elapsed() + step < took {
            tokio::time::sleep(step).await;
            seq += 1;
            let mut s = Self::signal(id, attempt, &session, SignalKind::Progress, Some(seq));
            s.usage = Some(TokenUsage {
                input_tokens: 1000,
                output_tokens: 100,
                ..TokenUsage::default()
            });
            push(s);
        }
        tokio::time::sleep(took.saturating_sub(started.elapsed())).await;
        let mut s = Self::signal(id, attempt, &session, SignalKind::Finished, None);
        s.exit_code = Some(if fail { 1 } else { 0 });
        {
            let mut st = self.state.lock().unwrap();
            st.outbox.push_back(s);
            st.running.remove(&id);
        }
    }

    /// Ships the outbox in batches; on a lost answer the batch stays.
    pub async fn ship_loop(self: Arc<Self>, sh: Arc<Shared>) {
        let poll = Duration::from_millis(50);
        loop {
            let stopping = sh.stop.load(Ordering::Relaxed);
            if self.paused() {
                tokio::time::sleep(poll).await;
                continue;
            }
            let (batch, replay) = {
                let mut st = self.state.lock().unwrap();
                if std::mem::take(&mut st.replay) && !st.last_acked.is_empty() {
                    (st.last_acked.clone(), true)
                } else {
                    let n = st.outbox.len().min(BATCH);
                    (st.outbox.iter().take(n).cloned().collect::<Vec<_>>(), false)
                }
            };
            if batch.is_empty() {
                if stopping {
                    return;
                }
                tokio::time::sleep(poll).await;
                continue;
            }
            let body = SignalBatch {
                signals: batch.clone(),
            };
            let ack: Option<SignalAck> = self
                .call(
                    &sh,
                    "signals",
                    reqwest::Method::POST,
                    "/api/v1/workers/signals",
                    Some(&body),
                )
                .await;
            let Some(ack) = ack else {
                tokio::time::sleep(poll).await;
                continue;
            };
            sh.acks
                .signals_sent
                .fetch_add(batch.len() as u64, Ordering::Relaxed);
            let mut applied = sh.acks.applied.lock().unwrap();
            for r in &ack.results {
                let s = &batch[r.index];
                if replay {
                    sh.acks.replayed.fetch_add(1, Ordering::Relaxed);
                    if r.outcome == SignalOutcome::Applied {
                        sh.acks.replays_applied.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if r.outcome == SignalOutcome::Applied {
                    let kind = match s.kind {
                        SignalKind::Started => "started",
                        SignalKind::Finished => "finished",
                        _ => continue,
                    };
                    applied.insert((s.run_id, s.attempt, kind));
                }
            }
            drop(applied);
            if !replay {
                let mut st = self.state.lock().unwrap();
                st.outbox.drain(..batch.len());
                st.last_acked = batch;
            }
        }
    }
}
