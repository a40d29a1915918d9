//! Heartbeats by group commit (issue 33).
//!
//! At 10,000 hosts pamd gets 333 heartbeats a second; one transaction
//! each (read the host, write it, read its desired set) exhausted the
//! database pool. Heartbeats waiting together are written together
//! instead: the first one to arrive while no batch is being written
//! starts a writer task, which takes every heartbeat waiting (up to
//! [`MAX_BATCH`], one per host) into one transaction — the hosts read
//! with one statement, their liveness written by [`hosts::present_many`]
//! (the one home of OQ-14 and the offline → online edge, set-based), their
//! desired sets read with one statement — and takes the next batch once
//! that one has committed. Heartbeats arriving meanwhile wait for the next
//! batch, so under load a batch holds all that came during the previous
//! one, and one transaction at a time serves every heartbeat.
//!
//! - The batch's transaction runs on a connection kept for liveness
//!   ([`pam_store::Store::begin_priority`]), and a watching worker's token
//!   is checked from its watch's hold ([`super::revocation`]): under load
//!   a heartbeat waits for neither the pool nor a token read, and a busy
//!   pamd does not declare its hosts offline.
//! - No heartbeat is answered before its batch committed.
//! - A batch that loses a race (a host written meanwhile: a conflict) is
//!   written again one host per transaction, each retried as a single
//!   heartbeat's was, so one host's race does not fail the others.
//! - Any other failure (the database unavailable) is every heartbeat's
//!   answer; the workers retry.
//! - A watching worker's resync (a read of its desired set no frame asked
//!   for, [`resync`]) joins the next batch: it reads the host and its
//!   desired set there without writing it.

use std::collections::HashMap;
use std::sync::Arc;

use pam_manifests::protocol::{DesiredRun, DesiredSet};
use pam_store::Host;
use tokio::sync::oneshot;
use tracing::Instrument;
use uuid::Uuid;

use super::group::{Group, Writer};
use super::retry::retry_conflicts;
use super::worker::{attach_input, not_registered, signals_into, with_env};
use super::{ApiError, AppState};
use crate::rules::hosts;

/// Most heartbeats one transaction writes.
const MAX_BATCH: usize = 512;

/// How long a writer that starts waits for more heartbeats to join its
/// first batch.
const GATHER: std::time::Duration = std::time::Duration::from_millis(25);

/// The heartbeats waiting for the next batch (one per [`AppState`]).
#[derive(Default)]
pub struct Heartbeats {
    group: Arc<Group<Job>>,
    /// Ends a starting writer's [`GATHER`] at once ([`hurry`]).
    hurry: tokio::sync::Notify,
}

pub struct Job {
    host: String,
    /// The heartbeat's instance id; None: a read of the desired set only.
    beat: Option<Uuid>,
    reply: oneshot::Sender<Result<DesiredSet, ApiError>>,
}

/// Writes the heartbeat of `host`'s worker with the others waiting: its
/// desired set once the batch committed.
pub async fn beat(st: &AppState, host: &str, instance_id: Uuid) -> Result<DesiredSet, ApiError> {
    queue(st, host, Some(instance_id)).await
}

/// Reads `host`'s desired set in the next heartbeat batch (at most
/// [`GATHER`] later): a watching worker's safety-net resync, which no
/// frame asked for (issue 33: 33 reads a second at 10,000 hosts, a
/// transaction each, were a third of an idle pamd's round trips to
/// PostgreSQL; in a batch they cost none of their own). A read a frame
/// asked for does not wait: [`super::worker::desired_of`].
pub async fn resync(st: &AppState, host: &str) -> Result<DesiredSet, ApiError> {
    queue(st, host, None).await
}

/// Writes the waiting batch now, not at the end of its [`GATHER`]: a
/// worker waits for a request queued on its watch behind one in the batch
/// (answers go in order), such as the read after a frame behind a resync
/// read its own report asked for — without this a claimed run would start
/// up to 25 ms later.
pub fn hurry(st: &AppState) {
    st.heartbeats.hurry.notify_waiters();
}

async fn queue(st: &AppState, host: &str, beat: Option<Uuid>) -> Result<DesiredSet, ApiError> {
    let (reply, answer) = oneshot::channel();
    let job = Job {
        host: host.to_string(),
        beat,
        reply,
    };
    if st.heartbeats.group.push(job) {
        // Its own task: a heartbeat whose client went away does not take
        // the others' batch with it.
        tokio::spawn(write_batches(st.clone()).in_current_span());
    }
    answer.await.unwrap_or_else(|_| {
        Err(ApiError::unavailable(
            "the heartbeat was not written; send it again",
        ))
    })
}

async fn write_batches(st: AppState) {
    let mut writer = Writer::new(st.heartbeats.group.clone());
    // A writer starts when a heartbeat finds none running: on an idle
    // fleet's 333 a second, each ~3 ms apart, nearly every heartbeat
    // would be a transaction of its own. Those of the next few
    // milliseconds join it. Under load the writer never stops (each batch
    // gathers while the one before is written), so this adds nothing.
    tokio::select! {
        _ = tokio::time::sleep(GATHER) => {}
        _ = st.heartbeats.hurry.notified() => {}
    }
    while let Some(batch) = st.heartbeats.group.next(&mut writer, take_batch) {
        write(&st, batch).await;
    }
}

/// Up to [`MAX_BATCH`] queued heartbeats and reads, oldest first, at
/// most one per host: a second one of a host (a retry, a clone of its
/// token, a read) waits for the next batch, so it is judged after the
/// first as it would be one by one.
fn take_batch(queue: &mut Vec<Job>) -> Vec<Job> {
    let mut seen = std::collections::HashSet::new();
    let mut batch = Vec::new();
    let mut rest = Vec::new();
    for job in queue.drain(..) {
        if batch.len() < MAX_BATCH && seen.insert(job.host.clone()) {
            batch.push(job);
        } else {
            rest.push(job);
        }
    }
    *queue = rest;
    batch
}

async fn write(st: &AppState, batch: Vec<Job>) {
    let beats: Vec<(&str, Option<Uuid>)> =
        batch.iter().map(|j| (j.host.as_str(), j.beat)).collect();
    match write_once(st, &beats).await {
        Ok(answers) => {
            for (job, answer) in batch.into_iter().zip(answers) {
                let _ = job.reply.send(answer);
            }
        }
        Err(e) if super::retry::is_conflict(&e) => {
            // One host's race: each on its own, retried as before.
            let mut each = tokio::task::JoinSet::new();
            for job in batch {
                let st = st.clone();
                each.spawn(async move {
                    let beat = [(job.host.as_str(), job.beat)];
                    let answer = retry_conflicts(|| async {
                        let mut a = write_once(&st, &beat).await?;
                        a.pop().expect("one heartbeat, one answer")
                    })
                    .await;
                    let _ = job.reply.send(answer);
                });
            }
            while each.join_next().await.is_some() {}
        }
        Err(e) => {
            for job in batch {
                let _ = job.reply.send(Err(e.clone()));
            }
        }
    }
}

/// One transaction for the heartbeats and reads `beats` (distinct hosts;
/// `None`: a read): each one's answer, in order — its desired set, or 409
/// when its host has not registered. `Err` when the transaction failed as
/// a whole.
async fn write_once(
    st: &AppState,
    beats: &[(&str, Option<Uuid>)],
) -> Result<Vec<Result<DesiredSet, ApiError>>, ApiError> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin_priority().await?;
    let names: Vec<String> = beats.iter().map(|(h, _)| h.to_string()).collect();
    let mut found: HashMap<String, Host> = tx
        .get_hosts_by_names(&names)
        .await?
        .into_iter()
        .map(|h| (h.name.clone(), h))
        .collect();
    let mut presented = Vec::with_capacity(beats.len());
    let mut read = Vec::new();
    for (name, beat) in beats {
        match (found.remove(*name), beat) {
            (Some(h), Some(instance_id)) => presented.push((h, Some(*instance_id))),
            (Some(h), None) => read.push(h),
            (None, _) => {}
        }
    }
    let was_eligible: Vec<bool> = presented.iter().map(|(h, _)| hosts::eligible(h)).collect();
    let presented =
        hosts::present_many(tx.as_mut(), presented, st.ctx.thresholds.offline_after, now).await?;
    let ids: Vec<Uuid> = presented
        .iter()
        .map(|(h, _)| h.id)
        .chain(read.iter().map(|h| h.id))
        .collect();
    let mut sets: HashMap<Uuid, Vec<DesiredRun>> = HashMap::new();
    for r in tx.live_runs_on_hosts(&ids).await? {
        let d = with_env(tx.as_mut(), &st.ctx.secrets, &r).await?;
        sets.entry(r.host_id.expect("a live run has a host"))
            .or_default()
            .push(d);
    }
    // The attach input of every run in the batch, taken in the batch's
    // transaction (no second one, and none when no host has a run).
    let live: Vec<(Uuid, i32)> = sets
        .values()
        .flatten()
        .map(|r| (r.run_id, r.attempt))
        .collect();
    let mut input = if live.is_empty() {
        HashMap::new()
    } else {
        tx.take_attach_input(&live).await?
    };
    st.ctx.commit(tx).await?;
    let mut became_eligible = false;
    let mut by_name: HashMap<&str, DesiredSet> = HashMap::new();
    for ((host, _), was) in presented.iter().zip(was_eligible) {
        became_eligible |= !was && hosts::eligible(host);
    }
    for host in presented.iter().map(|(h, _)| h).chain(&read) {
        let mut set = DesiredSet {
            runs: sets.remove(&host.id).unwrap_or_default(),
        };
        signals_into(st, host, &mut set);
        attach_input(&mut set, &mut input);
        by_name.insert(host.name.as_str(), set);
    }
    if became_eligible {
        st.ctx.host_may_take_runs();
    }
    Ok(beats
        .iter()
        .map(|(name, _)| by_name.remove(name).ok_or_else(|| not_registered(name)))
        .collect())
}
