//! Schedule rules: creating and updating a Schedule, and what
//! a tick does — take it (once), then create its run, or skip or miss it
//! — with its event; a manual trigger; the history limits.
//!
//! # Guarantees
//! - A tick is taken once: [`tick`] moves `last_schedule_time` with a
//!   guarded update ([`pam_store::ScheduleTx::take_tick`]) and records the
//!   run in `schedule_runs` (unique per tick) in the caller's
//!   transaction, together with the run it creates. Another pass (a
//!   restarted pamd, another replica) that read the same
//!   `last_schedule_time` gets a Conflict and its transaction writes
//!   nothing.
//! - Missed ticks (pamd down) are caught up at most once: only the latest
//!   tick in `(last_schedule_time, now]` is considered, and only within
//!   `startingDeadlineSeconds` (else `schedule.tick_missed`), like a
//!   Kubernetes CronJob.
//! - Forbid skips a tick while a run of the schedule is active
//!   (`schedule.tick_skipped`); Replace stops the active runs through the
//!   normal stop rule ([`runs::request_stop`]) and starts the new one.

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{self, ConcurrencyPolicy, ScheduleSpec};
use pam_manifests::names::{LabelKey, LabelValue, Labels};
use pam_manifests::state::RunStatus;
use pam_store::prelude::*;
use pam_store::{Run, Schedule, StoreError, StoreResult};
use serde_json::json;
use uuid::Uuid;

use super::meta::{self, Change, Desired};
use super::runs;
use crate::clock::ts;
use crate::events::{payload, topic};

use pam_manifests::kinds::SCHEDULE_LABEL;

/// A Schedule as declared.
pub struct ScheduleDesired {
    pub name: String,
    pub desired: Desired,
}

impl ScheduleDesired {
    pub fn of(s: &kinds::Schedule, desired: Desired) -> ScheduleDesired {
        ScheduleDesired {
            name: s.metadata.name.to_string(),
            desired,
        }
    }
}

/// Creates a Schedule; its first tick is the first after `now`.
pub async fn create(
    tx: &mut dyn Tx,
    project_id: Uuid,
    d: ScheduleDesired,
    now: DateTime<Utc>,
) -> StoreResult<Schedule> {
    let row = Schedule {
        id: Uuid::new_v4(),
        project_id,
        name: d.name,
        meta: meta::new_meta(d.desired, now),
        last_schedule_time: None,
        created_at: now,
        updated_at: now,
    };
    tx.insert(&row).await?;
    Ok(row)
}

/// Updates a Schedule's spec, labels and annotations (guarded by its
/// resourceVersion). The same desired state writes nothing.
pub async fn update(
    tx: &mut dyn Tx,
    row: Schedule,
    d: ScheduleDesired,
    now: DateTime<Utc>,
) -> StoreResult<(Schedule, Change)> {
    meta::write_desired(tx, row, d.desired, now, |_| {}).await
}

/// `pamctl suspend schedule NAME` / `resume`: `spec.suspend`
/// set through [`update`]; a suspended Schedule takes no tick.
pub async fn set_suspend(
    tx: &mut dyn Tx,
    row: Schedule,
    suspend: bool,
    now: DateTime<Utc>,
) -> StoreResult<(Schedule, Change)> {
    let d = ScheduleDesired {
        name: row.name.clone(),
        desired: Desired::stored(&row.meta).with_spec_field("suspend", json!(suspend)),
    };
    update(tx, row, d, now).await
}

/// Deletes a Schedule; its runs stay (as runs of their task).
pub async fn delete(tx: &mut dyn Tx, id: Uuid) -> StoreResult<bool> {
    tx.delete::<Schedule>(id).await
}

/// The stored spec (written through apply, so it types).
pub fn spec_of(s: &Schedule) -> Option<ScheduleSpec> {
    serde_json::from_value(s.meta.spec.clone()).ok()
}

/// Whether a run of a schedule still counts as active.
pub fn is_active(r: &Run) -> bool {
    r.status == RunStatus::Pending
        || r.status.is_live()
        || (r.status == RunStatus::Failed && r.requeue_at.is_some())
}

/// What a tick did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tick {
    /// A run was created (its name).
    Created(String),
    /// Skipped: Forbid with an active run, or the template's task is gone.
    Skipped(String),
    /// Past `startingDeadlineSeconds`.
    Missed,
}

/// Takes the Schedule's due tick, if any (module doc): the latest tick
/// in `(last_schedule_time or creation, now]`. `Ok(None)`: nothing due
/// (or suspended, or a spec that does not parse). A Conflict means
/// another pass took it first: drop the transaction.
pub async fn tick(
    tx: &mut dyn Tx,
    s: &Schedule,
    project_slug: &str,
    now: DateTime<Utc>,
) -> StoreResult<Option<Tick>> {
    let Some(spec) = spec_of(s) else {
        return Ok(None);
    };
    if spec.suspend {
        return Ok(None);
    }
    let Ok(table) = spec.timetable() else {
        return Ok(None);
    };
    let after = s.last_schedule_time.unwrap_or(s.created_at);
    let Some((at, missed)) = table.latest_between(after, now) else {
        return Ok(None);
    };
    let s = tx.take_tick(s.id, s.last_schedule_time, at, now).await?;
    if let Some(deadline) = spec.starting_deadline_seconds {
        if now - at > chrono::Duration::seconds(i64::from(deadline)) {
            let p = payload::schedule(
                &s,
                project_slug,
                json!({ "scheduled_at": ts(at), "missed_ticks": missed,
                        "starting_deadline_seconds": deadline }),
            );
            tx.append_event(topic::SCHEDULE_TICK_MISSED, p, now).await?;
            return Ok(Some(Tick::Missed));
        }
    }
    let active: Vec<Run> = tx
        .schedule_runs(s.id)
        .await?
        .into_iter()
        .map(|(_, r)| r)
        .filter(is_active)
        .collect();
    match spec.concurrency_policy {
        ConcurrencyPolicy::Forbid if !active.is_empty() => {
            let why = format!(
                "Forbid: run {} of this schedule is still active",
                active[0].name
            );
            skipped(tx, &s, project_slug, at, &why, now).await?;
            return Ok(Some(Tick::Skipped(why)));
        }
        ConcurrencyPolicy::Replace => {
            for r in active {
                runs::request_stop(tx, r, now).await?;
            }
        }
        _ => {}
    }
    let name = format!("{}-{}", s.name, at.timestamp().div_euclid(60));
    let out = start_run(tx, &s, project_slug, &spec, &name, at, now).await?;
    prune_history(tx, &s, &spec).await?;
    Ok(Some(out))
}

async fn skipped(
    tx: &mut dyn Tx,
    s: &Schedule,
    project_slug: &str,
    at: DateTime<Utc>,
    why: &str,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let p = payload::schedule(
        s,
        project_slug,
        json!({ "scheduled_at": ts(at), "reason": why }),
    );
    tx.append_event(topic::SCHEDULE_TICK_SKIPPED, p, now)
        .await?;
    Ok(())
}

/// `pamctl schedule trigger NAME`: one run now, whatever the timetable,
/// suspend and the concurrency policy say (the operator asked); the
/// Schedule's last tick does not move.
pub async fn trigger(
    tx: &mut dyn Tx,
    s: &Schedule,
    project_slug: &str,
    now: DateTime<Utc>,
) -> StoreResult<Tick> {
    let spec = spec_of(s)
        .ok_or_else(|| StoreError::Invalid(format!("schedule {} has no valid spec", s.name)))?;
    let name = format!("{}-{}", s.name, now.timestamp());
    start_run(tx, s, project_slug, &spec, &name, now, now).await
}

/// Creates the run of a tick from the template, in the Schedule's
/// project, labelled with the Schedule's name, and records it as the
/// tick's run.
async fn start_run(
    tx: &mut dyn Tx,
    s: &Schedule,
    project_slug: &str,
    spec: &ScheduleSpec,
    name: &str,
    at: DateTime<Utc>,
    now: DateTime<Utc>,
) -> StoreResult<Tick> {
    let template = &spec.run_template;
    let task = match tx
        .get_work_item_by_name(s.project_id, template.task.as_str())
        .await?
    {
        Some(t) => t,
        None => {
            let why = format!(
                "task {:?} of runTemplate does not exist",
                template.task.as_str()
            );
            skipped(tx, s, project_slug, at, &why, now).await?;
            return Ok(Tick::Skipped(why));
        }
    };
    let bad = |what: &str| StoreError::Invalid(format!("schedule {}: {what}", s.name));
    let mut labels = Labels::new();
    labels.insert(
        LabelKey::parse(SCHEDULE_LABEL).map_err(|_| bad("label key"))?,
        LabelValue::parse(&s.name).map_err(|_| bad("label value"))?,
    );
    let t = runs::template::Template {
        name: name.to_string(),
        labels,
        annotations: Default::default(),
        spec: template.clone(),
    };
    let row = runs::template::create(tx, s.project_id, project_slug, &task, t, now).await?;
    tx.insert_schedule_run(s.id, at, row.id).await?;
    let p = payload::schedule(
        s,
        project_slug,
        json!({ "scheduled_at": ts(at), "run": row.name, "run_id": row.id }),
    );
    tx.append_event(topic::SCHEDULE_RUN_CREATED, p, now).await?;
    Ok(Tick::Created(row.name))
}

/// Whether a finished run succeeded (exit 0).
fn succeeded(r: &Run) -> bool {
    r.status == RunStatus::Exited && r.exit_code == Some(0)
}

/// Deletes the oldest finished runs beyond the history limits.
async fn prune_history(tx: &mut dyn Tx, s: &Schedule, spec: &ScheduleSpec) -> StoreResult<()> {
    let finished: Vec<Run> = tx
        .schedule_runs(s.id)
        .await?
        .into_iter()
        .map(|(_, r)| r)
        .filter(|r| !is_active(r))
        .collect();
    let (ok, failed): (Vec<Run>, Vec<Run>) = finished.into_iter().partition(succeeded);
    for (list, keep) in [
        (ok, spec.successful_runs_history_limit),
        (failed, spec.failed_runs_history_limit),
    ] {
        let keep = usize::try_from(keep).unwrap_or(usize::MAX);
        let extra = list.len().saturating_sub(keep);
        // Oldest tick first: the first `extra` go.
        for r in list.iter().take(extra) {
            runs::delete(tx, r).await?;
        }
    }
    Ok(())
}

/// The status a Schedule prints: next tick, active runs, last result.
pub fn status(
    s: &Schedule,
    runs: &[(DateTime<Utc>, Run)],
    now: DateTime<Utc>,
) -> kinds::ObservedSchedule {
    let spec = spec_of(s);
    let next = spec
        .as_ref()
        .filter(|sp| !sp.suspend)
        .and_then(|sp| sp.timetable().ok())
        .and_then(|t| t.next_after(now.max(s.last_schedule_time.unwrap_or(s.created_at))));
    let last_result = runs
        .iter()
        .rev()
        .find(|(_, r)| !is_active(r))
        .map(|(_, r)| match r.exit_code {
            Some(code) => format!("{}: {} (exit {code})", r.name, r.status.as_str()),
            None => format!("{}: {}", r.name, r.status.as_str()),
        });
    kinds::ObservedSchedule {
        last_schedule_time: s.last_schedule_time.map(ts),
        next_schedule_time: next.map(ts),
        active: runs
            .iter()
            .filter(|(_, r)| is_active(r))
            .map(|(_, r)| r.name.clone())
            .collect(),
        last_result,
        observed_generation: Some(s.meta.observed_generation),
        conditions: serde_json::from_value(s.meta.conditions.clone()).unwrap_or_default(),
    }
}
