//! A signal batch held in memory while it is decided ([`Staged`]), and
//! its set-based write.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::protocol::{Entry, EntryKind, Signal, TokenUsage};
use pam_manifests::state::RunStatus;
use serde_json::Value;
use uuid::Uuid;

use pam_store::prelude::*;
use pam_store::{ActivityAppend, Run, RunUpdate, SignalMarker, StoreError, StoreResult};

use crate::events::{payload, topic};
use crate::rules::runs::usage::{self, PriceTable};
use crate::rules::runs::RunWrites;

/// A batch's runs, markers and events as the batch's signals leave them,
/// held in memory until [`Staged::write`]. It does in memory exactly what
/// the [`Tx`] calls it stands in for do in a store (same guards, same gate,
/// same resource_version bumps), so deciding a batch here or signal by
/// signal in the store gives the same result.
pub(super) struct Staged {
    /// Current state of every locked run.
    pub(super) runs: HashMap<Uuid, Run>,
    /// resource_version of each run as locked (the write's guard).
    read_rv: HashMap<Uuid, i64>,
    /// Markers recorded before the batch and by it.
    markers: HashSet<SignalMarker>,
    new_markers: Vec<SignalMarker>,
    events: Vec<(&'static str, Value)>,
    /// Orphan sessions of the batch's host that the journal names already
    /// or this batch journals.
    pub(super) orphans: HashSet<String>,
    /// What tokens cost when the provider reports no cost.
    prices: Arc<PriceTable>,
    /// Usage the batch added, per run: (run, provider, project, delta),
    /// for the budget check and the metrics after commit.
    pub(super) usage_deltas: Vec<(Uuid, String, Uuid, pam_store::Usage)>,
    /// Workspace results of the batch's `finished` signals.
    pub(super) results: Vec<pam_store::RunResultRow>,
    /// Activity items of the batch's progress signals, per attempt.
    activity: Vec<ActivityAppend>,
}

impl Staged {
    pub(super) fn new(
        runs: Vec<Run>,
        markers: Vec<SignalMarker>,
        prices: Arc<PriceTable>,
    ) -> Staged {
        Staged {
            read_rv: runs
                .iter()
                .map(|r| (r.id, r.meta.resource_version))
                .collect(),
            runs: runs.into_iter().map(|r| (r.id, r)).collect(),
            markers: markers.into_iter().collect(),
            new_markers: Vec::new(),
            events: Vec::new(),
            orphans: HashSet::new(),
            prices,
            usage_deltas: Vec::new(),
            results: Vec::new(),
            activity: Vec::new(),
        }
    }

    pub(super) fn run(&self, id: Uuid) -> Option<Run> {
        self.runs.get(&id).cloned()
    }

    fn marker(run: &Run, kind: &str) -> SignalMarker {
        SignalMarker {
            run_id: run.id,
            attempt: run.attempt,
            kind: kind.to_string(),
        }
    }

    /// [`Tx::mark_signal_processed`]: true the first time.
    pub(super) fn mark_processed(&mut self, run: &Run, kind: &str) -> bool {
        let m = Self::marker(run, kind);
        if self.markers.contains(&m) {
            return false;
        }
        self.markers.insert(m.clone());
        self.new_markers.push(m);
        true
    }

    /// [`Tx::signal_processed`].
    pub(super) fn processed(&self, run: &Run, kind: &str) -> bool {
        self.markers.contains(&Self::marker(run, kind))
    }

    /// [`Tx::advance_progress`].
    pub(super) fn advance_progress(&mut self, id: Uuid, attempt: i32, seq: i64) -> bool {
        self.runs
            .get_mut(&id)
            .is_some_and(|r| r.advance_progress(attempt, seq))
    }

    /// Records a provider's usage report on a staged run ([`usage`]): a
    /// progress step is added, a final report settles the attempt. The caller
    /// has already decided the signal applies (a progress seq that advanced, a
    /// first `finished`).
    pub(super) fn record_usage(&mut self, id: Uuid, report: Option<&TokenUsage>, fin: bool) {
        let Some(report) = report else {
            return;
        };
        let Some(r) = self.runs.get_mut(&id) else {
            return;
        };
        let measured = usage::measure(&self.prices, &r.provider, report);
        let before = r.usage;
        if fin {
            r.usage.settle(measured);
        } else {
            r.usage.add_step(measured);
        }
        if r.usage != before {
            r.meta.resource_version += 1;
            let delta = r.usage.total - before.total;
            self.usage_deltas
                .push((id, r.provider.clone(), r.project_id, delta));
        }
    }

    /// Records what a signal says the agent did on a staged run
    /// ([`Run::record_activity`]): its newest item and session id on the
    /// run, its items for the attempt's activity, and `run.permission_denied`
    /// journaled for refused tool calls. The caller has decided the signal
    /// applies.
    pub(super) async fn record_activity(
        &mut self,
        id: Uuid,
        sig: &Signal,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        // The worker's clock says when; a time that is not one is pamd's.
        let at = chrono::DateTime::parse_from_rfc3339(&sig.at)
            .map_or_else(|_| crate::clock::ts(now), |t| crate::clock::ts(t.to_utc()));
        let Some(r) = self.runs.get_mut(&id) else {
            return Ok(());
        };
        if !r.record_activity(&sig.activity, sig.session_id.as_deref(), &at, now) {
            return Ok(());
        }
        if !sig.activity.is_empty() {
            let items = sig
                .activity
                .iter()
                .map(|e| Entry {
                    at: Some(at.clone()),
                    ..e.clone()
                })
                .collect();
            self.activity.push(ActivityAppend {
                run_id: id,
                attempt: sig.attempt,
                items,
            });
        }
        let denied: Vec<Value> = sig
            .activity
            .iter()
            .filter(|e| e.kind == EntryKind::Denied)
            .map(|e| serde_json::json!({ "tool": e.tool, "target": e.target }))
            .collect();
        if !denied.is_empty() {
            let run = r.clone();
            let extra = serde_json::json!({ "count": denied.len(), "denied": denied });
            self.events
                .push((topic::RUN_PERMISSION_DENIED, payload::run(&run, extra)));
        }
        Ok(())
    }

    /// Keeps `message` (the provider's own error words) as the staged
    /// run's failure message.
    pub(super) fn note_failure_message(&mut self, id: Uuid, message: Option<&str>) {
        if let (Some(r), Some(m)) = (self.runs.get_mut(&id), message) {
            r.failure_message = Some(m.to_string());
            r.meta.resource_version += 1;
        }
    }

    /// Writes the batch: new markers, changed runs, events — three
    /// statements whatever the batch size (a fourth when the agents
    /// reported activity).
    pub(super) async fn write(self, tx: &mut dyn Tx, now: DateTime<Utc>) -> StoreResult<()> {
        let inserted = tx.insert_signal_markers(&self.new_markers, now).await?;
        if inserted != self.new_markers.len() as u64 {
            // Someone recorded one of them after our read, outside the
            // locks: decide the batch again.
            return Err(StoreError::Conflict(format!(
                "{} of {} one-shot markers were recorded concurrently",
                self.new_markers.len() as u64 - inserted,
                self.new_markers.len()
            )));
        }
        let mut changed: Vec<(Run, i64)> = self
            .runs
            .into_values()
            .filter_map(|r| {
                let rv = self.read_rv[&r.id];
                (r.meta.resource_version != rv).then_some((r, rv))
            })
            .collect();
        changed.sort_by_key(|(r, _)| r.id);
        tx.write_run_states(&changed).await?;
        tx.insert_run_results(&self.results).await?;
        if !self.activity.is_empty() {
            tx.append_run_activity(&self.activity, now).await?;
        }
        tx.append_events(self.events, now).await?;
        Ok(())
    }
}

#[async_trait]
impl RunWrites for Staged {
    /// [`Tx::transition_run`] in memory ([`Run::apply_transition`]).
    async fn write_transition(
        &mut self,
        id: Uuid,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        let r = self
            .runs
            .get_mut(&id)
            .ok_or_else(|| StoreError::NotFound(format!("runs {id}")))?;
        r.apply_transition(attempt, from, to, update, now)?;
        Ok(r.clone())
    }

    async fn journal(
        &mut self,
        topic: &'static str,
        payload: Value,
        _now: DateTime<Utc>,
    ) -> StoreResult<()> {
        self.events.push((topic, payload));
        Ok(())
    }
}
