//! The reconcile loop: the desired set against the live tmux sessions.
//!
//! Which session runs what is read from the session's tag (the run and
//! attempt it was created for, see [`crate::tmux::SessionTag`]), never
//! guessed from its name: the name is `pam-` and 8 hex digits of the run
//! id, the same for every attempt of a run, and a tmux socket may be shared
//! by two workers. For a desired (run, attempt), the session
//! holding its name is, by tag ([`spawn::holder`]):
//!
//! * this attempt → ours: signals, input and stops go to it; recorded in
//!   `sessions/` if this worker had no record (a lost data dir);
//! * an older attempt of the run → a dead incarnation: killed, and the
//!   attempt is spawned on the next pass;
//! * anything else (untagged, another run, a newer attempt) → not ours:
//!   never adopted, never killed; spawning over it fails the attempt with
//!   `spawn_failed`, and the session is reported as an orphan.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pam_manifests::protocol::{
    parse_session_name, truncate_message, DesiredRun, DesiredSet, OperatorSignal, SessionReport,
    Signal, SignalKind, SignalName, WatchRequest, REASON_SPAWN_FAILED, SIGNAL_MESSAGE_MAX_BYTES,
};
use uuid::Uuid;

use super::client::{http_code, Api};
use super::{now_rfc3339, records, State, LOST_GRACE, ORPHAN_AFTER};
use crate::outbox::Outbox;
use crate::spawn::{self, Holder};
use crate::tmux::SessionTag;

/// The reconcile loop's memory (rebuilt from disk and tmux after a
/// restart).
#[derive(Default)]
pub(super) struct Local {
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

/// Signals and input for one (run, attempt), handed over by the heartbeat.
type PendingDeliveries = HashMap<(Uuid, i32), (Vec<OperatorSignal>, Vec<String>)>;

pub(super) async fn reconcile_loop(st: Arc<State>) {
    let api = Api::new(&st.opts, Duration::from_secs(30)).expect("http client");
    let tick = Duration::from_secs(st.opts.config.tick_seconds);
    let resync = Duration::from_secs(st.opts.config.resync_seconds);
    let mut local = Local::default();
    let mut claim_due = Instant::now();
    // The `pam-*` sessions the last pass saw: the local check compares.
    let mut seen: Option<HashSet<String>>;
    loop {
        let polling = st.polling.load(Ordering::SeqCst);
        // A non-waiting claim once a tick when polling (not on every
        // wake-up: the long-poll that woke this pass has just claimed, and
        // a finished run's freed capacity wakes pamd's long-poll), and
        // once a resync while watching: dispatch never depends only on a
        // wake-up arriving, and a busy worker does not spend two requests
        // per wake-up.
        if Instant::now() >= claim_due {
            claim_due = Instant::now() + if polling { tick } else { resync };
            if let Err(e) = api
                .post::<_, DesiredSet>("/api/v1/workers/claim?wait=0", &serde_json::json!({}))
                .await
            {
                tracing::debug!(error = %format!("{e:#}"), "tick claim failed");
            }
        }
        let fetched_at = Instant::now();
        // On the watch when it takes the read: one connection to pamd.
        let read = WatchRequest::DesiredSet {};
        let read = match super::watch::request(&st, read, Duration::from_secs(30)).await {
            Some(answer) => answer,
            None => api.get::<DesiredSet>("/api/v1/workers/desired").await,
        };
        match read {
            Ok(set) => {
                *st.known.lock().unwrap() = set
                    .runs
                    .iter()
                    .map(|r| (r.run_id, r.attempt, r.stop))
                    .collect();
                match reconcile(&st, &mut local, &set, fetched_at).await {
                    Ok(names) => seen = Some(names),
                    Err(e) => {
                        seen = None;
                        tracing::warn!(error = %format!("{e:#}"), "reconcile failed");
                    }
                }
            }
            Err(e) => {
                seen = None;
                if matches!(http_code(&e), Some((409, "not_registered"))) {
                    st.reregister.notify_one();
                }
                tracing::warn!(error = %format!("{e:#}"), "fetching the desired set failed");
            }
        }
        if polling || seen.is_none() {
            // A fixed tick, not a retry schedule: this loop is
            // level-triggered and its pace is the config's.
            tokio::select! {
                _ = tokio::time::sleep(tick) => {}
                _ = st.wake.notified() => {}
            }
            continue;
        }
        // Watching: the next pass comes with a wake-up (a watch
        // frame, the heartbeat's deliveries, a settled `finished`), the
        // safety-net resync, or a local change tmux shows.
        let next_resync = tokio::time::Instant::now() + resync;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(next_resync) => break,
                _ = st.wake.notified() => break,
                _ = tokio::time::sleep(tick) => {
                    if st.polling.load(Ordering::SeqCst) || local.timing() {
                        break;
                    }
                    match live_names(&st).await {
                        Ok(names) if Some(&names) == seen.as_ref() => {}
                        _ => break,
                    }
                }
            }
        }
    }
}

/// The live `pam-*` sessions' names (only names of the protocol's format
/// are pam's).
async fn live_names(st: &State) -> anyhow::Result<HashSet<String>> {
    Ok(st
        .tmux
        .sessions()
        .await?
        .into_iter()
        .filter(|s| parse_session_name(&s.name).is_ok())
        .map(|s| s.name)
        .collect())
}

impl Local {
    /// A stop's escalation, a vanished session's grace or an unmapped
    /// session's wait is running: a pass must come, changed or not.
    fn timing(&self) -> bool {
        !self.stopping.is_empty()
            || !self.gone_since.is_empty()
            || self
                .unmapped_since
                .keys()
                .any(|s| !self.orphans_sent.contains(s))
    }
}

fn tag_of(d: &DesiredRun) -> SessionTag {
    SessionTag {
        run_id: d.run_id,
        attempt: d.attempt,
    }
}

async fn reconcile(
    st: &State,
    local: &mut Local,
    set: &DesiredSet,
    fetched_at: Instant,
) -> anyhow::Result<HashSet<String>> {
    let data = &st.opts.data_dir;
    // Every live `pam-*` session, with the tag it was created with.
    let mut sessions: HashMap<String, Option<SessionTag>> = st
        .tmux
        .sessions()
        .await?
        .into_iter()
        // Only names of the protocol's format are pam's (and the only ones
        // the controller accepts in a report): a `pam-odd` session someone
        // made by hand is left alone and never reported.
        .filter(|s| parse_session_name(&s.name).is_ok())
        .map(|s| (s.name, s.tag))
        .collect();
    let mut deliveries: PendingDeliveries = HashMap::new();
    for (run, attempt, sigs, input) in std::mem::take(&mut *st.deliveries.lock().unwrap()) {
        let e = deliveries.entry((run, attempt)).or_default();
        e.0.extend(sigs);
        e.1.extend(input);
    }
    let desired_names: HashSet<&str> = set.runs.iter().map(|r| r.session_name.as_str()).collect();
    // Sessions that run a desired attempt (by tag): everything else alive
    // is an orphan candidate.
    let mut mapped: HashSet<String> = HashSet::new();

    for d in &set.runs {
        let key = (d.run_id, d.attempt);
        let this = tag_of(d);
        let record = records::read(data, &d.session_name);
        match sessions
            .get(&d.session_name)
            .map(|tag| spawn::holder(*tag, d))
        {
            Some(Holder::OlderAttempt(old)) => {
                // A dead incarnation of this run still runs here: make room
                // for the current one (spawned on the next pass).
                tracing::warn!(session = %d.session_name, holder = %old, "killing an older attempt's session");
                st.tmux.kill_session(&d.session_name).await?;
                sessions.remove(&d.session_name);
                records::remove(data, &d.session_name);
                // The next pass comes now, not at a tick (a
                // watching worker has none).
                st.wake.notify_one();
                continue;
            }
            Some(Holder::This) => {
                local.gone_since.remove(&key);
                mapped.insert(d.session_name.clone());
                if record != Some(this) {
                    // Adopt: the session is tagged with this very run and
                    // attempt, and no record says so (a lost data dir).
                    records::write(data, &d.session_name, this)?;
                }
                let (sigs, input) = deliveries.remove(&key).unwrap_or_default();
                deliver_to_live_session(st, local, d, sigs, input).await?;
                continue;
            }
            // No session of this attempt: none at all, or the name is held
            // by a session that is not ours (never adopted).
            Some(Holder::Other(_)) | None => {}
        }
        if record.is_some_and(|m| m.run_id == d.run_id && m.attempt >= d.attempt) {
            // It ran here and ended. Normally its `finished` is on its way;
            // if the run is still desired well after that, it was lost.
            let since = *local.gone_since.entry(key).or_insert_with(Instant::now);
            if fetched_at >= since + LOST_GRACE
                && !local.lost_sent.contains(&key)
                && !has_pending_signals(&st.outbox, d.run_id, d.attempt)
            {
                tracing::warn!(run_id = %d.run_id, attempt = d.attempt, "session vanished without finishing: reporting lost");
                let reason = "the tmux session ended without the wrapper reporting an exit";
                st.outbox.append(&lost(d, reason))?;
                local.lost_sent.insert(key);
            }
            continue;
        }
        if d.stop {
            // Never started here and to be stopped: nothing to run. Report it
            // lost so pamd can settle it (a stop request makes it stopped).
            if local.lost_sent.insert(key) {
                st.outbox
                    .append(&lost(d, "stopped before its session was started"))?;
            }
            continue;
        }
        if spawn_run(st, d).await? {
            sessions.insert(d.session_name.clone(), Some(this));
            mapped.insert(d.session_name.clone());
        }
    }

    report_orphans(st, local, &sessions, &mapped)?;
    local.stopping.retain(|s, _| sessions.contains_key(s));
    // Records of sessions that ended and are no longer desired.
    for s in records::names(data) {
        if !sessions.contains_key(&s) && !desired_names.contains(s.as_str()) {
            records::remove(data, &s);
        }
    }
    let desired_keys: HashSet<(Uuid, i32)> =
        set.runs.iter().map(|r| (r.run_id, r.attempt)).collect();
    local.gone_since.retain(|k, _| desired_keys.contains(k));
    publish_running(st, &sessions);
    Ok(sessions.into_keys().collect())
}

fn lost(d: &DesiredRun, reason: &str) -> Signal {
    let mut s = Signal::new(d.run_id, d.attempt, SignalKind::Lost, now_rfc3339());
    s.reason = Some(reason.into());
    s.session_name = Some(d.session_name.clone());
    s
}

/// Delivers operator signals (each id once) and typed input to our live
/// session of `d`, and stops it when `d` says so.
async fn deliver_to_live_session(
    st: &State,
    local: &mut Local,
    d: &DesiredRun,
    mut sigs: Vec<OperatorSignal>,
    mut input: Vec<String>,
) -> anyhow::Result<()> {
    let data = &st.opts.data_dir;
    sigs.splice(0..0, d.signals.iter().cloned());
    input.splice(0..0, d.input.iter().cloned());
    // pamd lists every signal of the attempt in every desired set: each id
    // is delivered once, remembered with the session's record.
    let mut delivered = records::delivered(data, &d.session_name);
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
        if let Err(e) = records::record_delivered(data, &d.session_name, s.id) {
            tracing::warn!(session = %d.session_name, error = %e, "cannot record a delivered signal");
        }
    }
    for line in input {
        if let Err(e) = st.tmux.send_keys(&d.session_name, &line).await {
            tracing::warn!(session = %d.session_name, error = %e, "cannot type attach input");
        }
    }
    if !d.stop {
        return Ok(());
    }
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
    Ok(())
}

/// Reports live sessions that run no desired attempt, once each, after
/// [`ORPHAN_AFTER`]. The payload names the run and attempt of the
/// session's tag (nil and 1 when it has none).
fn report_orphans(
    st: &State,
    local: &mut Local,
    sessions: &HashMap<String, Option<SessionTag>>,
    mapped: &HashSet<String>,
) -> anyhow::Result<()> {
    let now = Instant::now();
    for (s, tag) in sessions {
        if mapped.contains(s) {
            local.unmapped_since.remove(s);
            continue;
        }
        let since = *local.unmapped_since.entry(s.clone()).or_insert(now);
        if now.duration_since(since) >= ORPHAN_AFTER && local.orphans_sent.insert(s.clone()) {
            tracing::warn!(session = %s, "orphan tmux session: no desired run maps to it");
            let mut sig = Signal::new(
                tag.map_or(Uuid::nil(), |t| t.run_id),
                tag.map_or(1, |t| t.attempt),
                SignalKind::Orphan,
                now_rfc3339(),
            );
            sig.reason = Some("a pam-* tmux session that no desired run maps to".into());
            sig.session_name = Some(s.clone());
            st.outbox.append(&sig)?;
        }
    }
    local.unmapped_since.retain(|s, _| sessions.contains_key(s));
    local.orphans_sent.retain(|s| sessions.contains_key(s));
    Ok(())
}

/// Publishes the live sessions for the heartbeat and the snapshot loop,
/// and hands the attempts whose session ended to the snapshot loop. A
/// session names its run only when it is this worker's: its tag and this
/// worker's record agree.
fn publish_running(st: &State, sessions: &HashMap<String, Option<SessionTag>>) {
    let data = &st.opts.data_dir;
    let mut running: Vec<SessionReport> = sessions
        .iter()
        .map(|(s, tag)| {
            let ours = records::read(data, s).filter(|m| Some(*m) == *tag);
            SessionReport {
                session_name: s.clone(),
                run_id: ours.map(|m| m.run_id),
                attempt: ours.map(|m| m.attempt),
            }
        })
        .collect();
    running.sort_by(|a, b| a.session_name.cmp(&b.session_name));
    let previous = std::mem::replace(&mut *st.running.lock().unwrap(), running);
    let ended: Vec<(Uuid, i32)> = previous
        .iter()
        .filter(|r| !sessions.contains_key(&r.session_name))
        .filter_map(|r| Some((r.run_id?, r.attempt?)))
        .collect();
    if !ended.is_empty() {
        st.ended.lock().unwrap().extend(ended);
    }
}

/// Starts `d`'s session; false when it could not (then reported to pamd as
/// a failed spawn).
async fn spawn_run(st: &State, d: &DesiredRun) -> anyhow::Result<bool> {
    let data = &st.opts.data_dir;
    // Recorded before the session exists: a crash right after the spawn
    // must not start the attempt a second time.
    records::write(data, &d.session_name, tag_of(d))?;
    tracing::info!(run_id = %d.run_id, attempt = d.attempt, session = %d.session_name, "spawning");
    let started = match with_workspace(st, d).await {
        Ok(d) => spawn::start(&st.tmux, &st.opts.worker_exe, data, &st.opts.config, &d).await,
        Err(e) => Err(e),
    };
    let Err(e) = started else {
        return Ok(true);
    };
    tracing::warn!(run_id = %d.run_id, attempt = d.attempt, error = %format!("{e:#}"), "spawn failed");
    let mut s = Signal::new(d.run_id, d.attempt, SignalKind::Failed, now_rfc3339());
    s.reason = Some(REASON_SPAWN_FAILED.into());
    // The cause travels with the signal, so the run's status,
    // run.failed, describe and the dashboard say why.
    s.message = Some(truncate_message(
        &format!("{e:#}"),
        SIGNAL_MESSAGE_MAX_BYTES,
    ));
    s.session_name = Some(d.session_name.clone());
    st.outbox.append(&s)?;
    Ok(false)
}

/// `d` with its workspace's worktree as cwd, prepared first;
/// `d` itself without a workspace. A failure (fetch, checkout) is the
/// spawn's, with git's words.
async fn with_workspace(st: &State, d: &DesiredRun) -> anyhow::Result<DesiredRun> {
    let Some(order) = d.workspace.clone() else {
        return Ok(d.clone());
    };
    if let Some(why) = &d.env_error {
        anyhow::bail!("the run's environment: {why}");
    }
    let data = st.opts.data_dir.clone();
    let settings = st.opts.config.workspaces.settings();
    let run = d.clone();
    let prepared = tokio::task::spawn_blocking(move || {
        crate::workspace::prepare(&data, &settings, &run, &order)
    })
    .await??;
    // The next run of the repository takes a spare worktree made now, off
    // this spawn's path (workspace::spare).
    let (mirror, base) = (prepared.mirror.clone(), prepared.base.clone());
    tokio::task::spawn_blocking(move || {
        if let Err(e) = crate::workspace::spare::fill(&mirror, &base) {
            tracing::warn!(error = %format!("{e:#}"), "could not make a spare worktree");
        }
    });
    let mut d = d.clone();
    d.cwd = prepared.dir.to_string_lossy().into_owned();
    Ok(d)
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
