//! Heartbeats by group commit.
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
//!   is checked from its watch's hold (`api::revocation`): under load
//!   a heartbeat waits for neither the pool nor a token read, and a busy
//!   pamd does not declare its hosts offline.
//! - No heartbeat is answered before its batch committed.
//! - A batch that loses a race (a host written meanwhile: a conflict) is
//!   written again one host per transaction, each retried as a single
//!   heartbeat's was, so one host's race does not fail the others.
//! - Any other failure (the database unavailable) is every heartbeat's
//!   answer; the workers retry.
//! - A watching worker's resync (a read of its desired set no frame asked
//!   for, [`super::Fleet::resync`]) joins the next batch: it reads the
//!   host and its desired set there without writing it.

use std::collections::HashMap;
use std::sync::Arc;

use pam_manifests::protocol::DesiredSet;
use pam_store::Host;
use tokio::sync::oneshot;
use tracing::Instrument;
use uuid::Uuid;

use super::{Fleet, FleetError};
use crate::batch::{Group, Writer};
use crate::ctx::Ctx;
use crate::retry::{retry_conflicts, Conflict};
use crate::rules::hosts;

/// Most heartbeats one transaction writes.
const MAX_BATCH: usize = 512;

/// How long a writer that starts waits for more heartbeats to join its
/// first batch.
const GATHER: std::time::Duration = std::time::Duration::from_millis(25);

/// The heartbeats waiting for the next batch (one per [`Fleet`]).
#[derive(Default)]
pub(super) struct Heartbeats {
    group: Arc<Group<Job>>,
    /// Ends a starting writer's [`GATHER`] at once ([`Heartbeats::hurry`]).
    hurry: tokio::sync::Notify,
}

impl Heartbeats {
    /// Writes the waiting batch now, not at the end of its [`GATHER`]: a
    /// worker waits for a request queued on its watch behind one in the
    /// batch (answers go in order), such as the read after a frame behind
    /// a resync read its own report asked for — without this a claimed
    /// run would start up to 25 ms later.
    pub(super) fn hurry(&self) {
        self.hurry.notify_waiters();
    }
}

pub(super) struct Job {
    host: String,
    /// The heartbeat's instance id; None: a read of the desired set only.
    beat: Option<Uuid>,
    reply: oneshot::Sender<Result<DesiredSet, FleetError>>,
}

/// Queues a heartbeat (`beat`: its instance id) or a resync read (`None`)
/// of `host`'s worker: its desired set once its batch committed.
pub(super) async fn queue(
    fleet: &Fleet,
    ctx: &Ctx,
    host: &str,
    beat: Option<Uuid>,
) -> Result<DesiredSet, FleetError> {
    let (reply, answer) = oneshot::channel();
    let job = Job {
        host: host.to_string(),
        beat,
        reply,
    };
    if fleet.inner.heartbeats.group.push(job) {
        // Its own task: a heartbeat whose client went away does not take
        // the others' batch with it.
        tokio::spawn(write_batches(fleet.clone(), ctx.clone()).in_current_span());
    }
    answer.await.unwrap_or(Err(FleetError::Dropped))
}

async fn write_batches(fleet: Fleet, ctx: Ctx) {
    let heartbeats = &fleet.inner.heartbeats;
    let mut writer = Writer::new(heartbeats.group.clone());
    // A writer starts when a heartbeat finds none running: on an idle
    // fleet's 333 a second, each ~3 ms apart, nearly every heartbeat
    // would be a transaction of its own. Those of the next few
    // milliseconds join it. Under load the writer never stops (each batch
    // gathers while the one before is written), so this adds nothing.
    tokio::select! {
        _ = tokio::time::sleep(GATHER) => {}
        _ = heartbeats.hurry.notified() => {}
    }
    while let Some(batch) = heartbeats.group.next(&mut writer, take_batch) {
        write(&fleet, &ctx, batch).await;
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

async fn write(fleet: &Fleet, ctx: &Ctx, batch: Vec<Job>) {
    let beats: Vec<(&str, Option<Uuid>)> =
        batch.iter().map(|j| (j.host.as_str(), j.beat)).collect();
    match write_once(fleet, ctx, &beats).await {
        Ok(answers) => {
            for (job, answer) in batch.into_iter().zip(answers) {
                let _ = job.reply.send(answer);
            }
        }
        Err(e) if e.is_conflict() => {
            // One host's race: each on its own, retried as before.
            let mut each = tokio::task::JoinSet::new();
            for job in batch {
                let (fleet, ctx) = (fleet.clone(), ctx.clone());
                each.spawn(async move {
                    let beat = [(job.host.as_str(), job.beat)];
                    let answer = retry_conflicts(|| async {
                        let mut a = write_once(&fleet, &ctx, &beat).await?;
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
/// `None`: a read): each one's answer, in order — its desired set, or
/// `NotRegistered` when its host has no row. `Err` when the transaction
/// failed as a whole.
async fn write_once(
    fleet: &Fleet,
    ctx: &Ctx,
    beats: &[(&str, Option<Uuid>)],
) -> Result<Vec<Result<DesiredSet, FleetError>>, FleetError> {
    let now = ctx.now();
    let mut tx = ctx.store.begin_priority().await?;
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
        hosts::present_many(tx.as_mut(), presented, ctx.thresholds.offline_after, now).await?;
    let hosts_read: Vec<&Host> = presented.iter().map(|(h, _)| h).chain(&read).collect();
    let mut sets = super::desired::sets_of(fleet, &ctx.secrets, tx.as_mut(), &hosts_read).await?;
    ctx.commit(tx).await?;
    let became_eligible = presented
        .iter()
        .zip(was_eligible)
        .any(|((host, _), was)| !was && hosts::eligible(host));
    if became_eligible {
        ctx.host_may_take_runs();
    }
    let mut by_name: HashMap<&str, DesiredSet> = HashMap::new();
    for host in hosts_read {
        by_name.insert(
            host.name.as_str(),
            sets.remove(&host.id).unwrap_or_default(),
        );
    }
    Ok(beats
        .iter()
        .map(|(name, _)| {
            by_name
                .remove(name)
                .ok_or_else(|| FleetError::NotRegistered(name.to_string()))
        })
        .collect())
}
