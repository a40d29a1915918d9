use super::*;
use crate::Usage;

#[async_trait]
impl RunTx for MemTx {
    async fn live_runs_on_hosts(&mut self, hosts: &[Uuid]) -> StoreResult<Vec<Run>> {
        let f = RunFilter {
            statuses: Some(RunStatus::LIVE.to_vec()),
            ..RunFilter::default()
        };
        let mut runs = self.list_runs(&f).await?;
        runs.retain(|r| r.host_id.is_some_and(|h| hosts.contains(&h)));
        Ok(runs)
    }

    async fn insert_run(&mut self, r: &Run) -> StoreResult<()> {
        let s = &mut self.work;
        match s.work_items.get(&r.task_id) {
            None => return Err(StoreError::NotFound(format!("task {}", r.task_id))),
            Some(t) if t.project_id != r.project_id => {
                return Err(StoreError::Invalid(format!(
                    "task {} is not in project {}",
                    r.task_id, r.project_id
                )))
            }
            Some(_) => {}
        }
        check_run(r)?;
        if s.runs.contains_key(&r.id) {
            return Err(StoreError::AlreadyExists("runs_pkey".into()));
        }
        if s.runs
            .values()
            .any(|o| o.project_id == r.project_id && o.name == r.name)
        {
            return Err(StoreError::AlreadyExists("runs_project_name".into()));
        }
        s.check_session_unique(r)?;
        let mut r = r.clone();
        r.dispatchable_since = (!s.blocked(r.task_id)).then_some(r.pending_since);
        s.runs.insert(r.id, r);
        Ok(())
    }

    async fn get_run(&mut self, id: Uuid) -> StoreResult<Option<Run>> {
        Ok(self.work.runs.get(&id).cloned())
    }

    async fn get_run_by_session(
        &mut self,
        host_id: Uuid,
        session_name: &str,
    ) -> StoreResult<Option<Run>> {
        Ok(self
            .work
            .runs
            .values()
            .find(|r| r.host_id == Some(host_id) && r.session_name == session_name)
            .cloned())
    }

    async fn get_run_by_name(&mut self, project_id: Uuid, name: &str) -> StoreResult<Option<Run>> {
        Ok(self.work.named(project_id, name))
    }

    async fn list_runs(&mut self, f: &RunFilter) -> StoreResult<Vec<Run>> {
        let runs = self
            .work
            .runs
            .values()
            .filter(|r| f.project_id.is_none_or(|p| r.project_id == p))
            .filter(|r| f.task_id.is_none_or(|t| r.task_id == t))
            .filter(|r| f.host_id.is_none_or(|h| r.host_id == Some(h)))
            .filter(|r| f.statuses.as_ref().is_none_or(|s| s.contains(&r.status)))
            .filter(|r| f.ids.as_ref().is_none_or(|ids| ids.contains(&r.id)))
            .cloned()
            .collect();
        Ok(sorted_runs(runs, |r| (r.created_at, r.id)))
    }

    async fn runs_named(&mut self, project_id: Uuid, names: &[String]) -> StoreResult<Vec<Run>> {
        let runs = self
            .work
            .runs
            .values()
            .filter(|r| r.project_id == project_id && names.contains(&r.name))
            .cloned()
            .collect();
        Ok(sorted_runs(runs, |r| (r.created_at, r.id)))
    }

    async fn update_run_spec(&mut self, r: &Run, expected_rv: i64) -> StoreResult<Run> {
        self.work.update_named(r, expected_rv, |cur: &mut Run, r| {
            check_run(r)?;
            cur.target = r.target.clone();
            cur.max_attempts = r.max_attempts;
            cur.backoff_seconds = r.backoff_seconds;
            cur.backoff_max_seconds = r.backoff_max_seconds;
            cur.dispatch_timeout_seconds = r.dispatch_timeout_seconds;
            cur.stop_requested = r.stop_requested;
            cur.stopped_by = r.stopped_by.clone();
            Ok(())
        })
    }

    async fn transition_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        let s = &mut self.work;
        let mut next = s
            .runs
            .get(&id)
            .ok_or_else(|| not_found("runs", id))?
            .clone();
        next.apply_transition(attempt, from, to, update, now)?;
        s.check_session_unique(&next)?;
        s.runs.insert(id, next.clone());
        Ok(next)
    }

    async fn requeue_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        transition(RunStatus::Failed, RunStatus::Pending)?;
        let blocked = match self.work.runs.get(&id) {
            Some(r) => self.work.blocked(r.task_id),
            None => false,
        };
        let cur = self.work.named_mut::<Run>(id)?;
        if cur.status != RunStatus::Failed || cur.attempt != attempt {
            return Err(conflict(format!(
                "run {id} is not failed at attempt {attempt}"
            )));
        }
        cur.status = RunStatus::Pending;
        cur.attempt += 1;
        cur.host_id = None;
        cur.started_at = None;
        cur.finished_at = None;
        cur.exit_code = None;
        cur.last_progress_seq = None;
        cur.usage.new_attempt();
        cur.failure_reason = None;
        cur.failure_message = None;
        cur.session_id = None;
        cur.last_activity = None;
        cur.denials = None;
        cur.requeue_at = None;
        cur.eligible_host_seen = false;
        cur.pending_since = now;
        cur.dispatchable_since = (!blocked).then_some(now);
        cur.updated_at = now;
        cur.meta.resource_version += 1;
        Ok(cur.clone())
    }

    async fn claim_runs(
        &mut self,
        host: &Host,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Run>> {
        transition(RunStatus::Pending, RunStatus::Spawning)?;
        let s = &mut self.work;
        let candidates: Vec<Run> = s
            .runs
            .values()
            .filter(|r| {
                let waits = crate::dispatch::Waits {
                    blocked: s.blocked(r.task_id),
                    secret_missing: s.secret_waits.contains_key(&r.id),
                    over_budget: s
                        .projects
                        .get(&r.project_id)
                        .is_some_and(|p| crate::projects::over_budget(&p.meta)),
                    uses_workspace: crate::dispatch::uses_workspace(
                        r,
                        s.work_items.get(&r.task_id).map(|t| &t.meta.spec),
                    ),
                };
                crate::dispatch::run_claimable(r, host, waits)
            })
            .cloned()
            .collect();
        let mut claimed = Vec::new();
        let key = |r: &Run| (r.dispatchable_since.expect("filtered"), r.id);
        let picked: Vec<Run> = sorted_runs(candidates, key)
            .into_iter()
            .take(take(limit))
            .collect();
        // As PostgreSQL's claim, after the limit: a run whose session name
        // the host holds, or that a picked run with a smaller id shares,
        // is left for another claim.
        let left: Vec<bool> = picked
            .iter()
            .map(|r| {
                s.session_taken(r, host.id)
                    || picked
                        .iter()
                        .any(|o| o.session_name == r.session_name && o.id < r.id)
            })
            .collect();
        for (mut r, left) in picked.into_iter().zip(left) {
            if left {
                continue;
            }
            r.status = RunStatus::Spawning;
            r.host_id = Some(host.id);
            r.updated_at = now;
            r.meta.resource_version += 1;
            s.check_session_unique(&r)?;
            s.runs.insert(r.id, r.clone());
            claimed.push(r);
        }
        Ok(claimed)
    }

    async fn list_pending_runs(&mut self, limit: i64) -> StoreResult<Vec<PendingRun>> {
        let tasks = &self.work.work_items;
        Ok(self
            .pending_runs(limit)
            .iter()
            .map(|r| PendingRun::of(r, tasks.get(&r.task_id).map(|t| &t.meta.spec)))
            .collect())
    }

    async fn list_pending_runs_reading_secrets(&mut self, limit: i64) -> StoreResult<Vec<Run>> {
        let mut v = self.pending_runs(i64::MAX);
        v.retain(|r| crate::secrets::reads_secrets(&r.meta.spec));
        v.truncate(take(limit));
        Ok(v)
    }

    async fn list_requeue_due(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        let runs = self
            .work
            .runs
            .values()
            .filter(|r| {
                r.status == RunStatus::Failed
                    && !r.stop_requested
                    && r.requeue_at.is_some_and(|t| t <= now)
            })
            .cloned()
            .collect();
        let mut v = sorted_runs(runs, |r| (r.requeue_at.expect("filtered"), r.id));
        v.truncate(take(limit));
        Ok(v)
    }

    async fn mark_eligible_host_seen(&mut self, ids: &[Uuid]) -> StoreResult<()> {
        for id in ids {
            if let Some(r) = self.work.runs.get_mut(id) {
                if r.status == RunStatus::Pending && !r.eligible_host_seen {
                    r.eligible_host_seen = true;
                    r.meta.resource_version += 1;
                }
            }
        }
        Ok(())
    }

    async fn advance_progress(&mut self, id: Uuid, attempt: i32, seq: i64) -> StoreResult<bool> {
        let r = self
            .work
            .runs
            .get_mut(&id)
            .ok_or_else(|| not_found("run", id))?;
        Ok(r.advance_progress(attempt, seq))
    }

    async fn lock_runs_with_signals(
        &mut self,
        ids: &[Uuid],
    ) -> StoreResult<(Vec<Run>, Vec<SignalMarker>)> {
        // The whole store is locked by this transaction already.
        let mut ids = ids.to_vec();
        ids.sort_unstable();
        ids.dedup();
        let runs = ids
            .iter()
            .filter_map(|id| self.work.runs.get(id).cloned())
            .collect();
        let markers = ids
            .iter()
            .flat_map(|id| {
                self.work
                    .signals
                    .range((*id, i32::MIN, String::new())..)
                    .take_while(move |((r, _, _), _)| r == id)
                    .map(|((run_id, attempt, kind), _)| SignalMarker {
                        run_id: *run_id,
                        attempt: *attempt,
                        kind: kind.clone(),
                    })
            })
            .collect();
        Ok((runs, markers))
    }

    async fn insert_signal_markers(
        &mut self,
        markers: &[SignalMarker],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        let s = &mut self.work;
        if let Some(m) = markers.iter().find(|m| !s.runs.contains_key(&m.run_id)) {
            return Err(StoreError::NotFound(format!(
                "referenced row (run {})",
                m.run_id
            )));
        }
        let mut new = 0;
        for m in markers {
            let key = (m.run_id, m.attempt, m.kind.clone());
            if let std::collections::btree_map::Entry::Vacant(e) = s.signals.entry(key) {
                e.insert(now);
                new += 1;
            }
        }
        Ok(new)
    }

    async fn write_run_states(&mut self, runs: &[(Run, i64)]) -> StoreResult<()> {
        let s = &mut self.work;
        for (r, expected) in runs {
            let cur = s.runs.get(&r.id).ok_or_else(|| not_found("runs", r.id))?;
            if cur.meta.resource_version != *expected {
                return Err(conflict(format!(
                    "run {} changed since it was read (resourceVersion {} ≠ {expected})",
                    r.id, cur.meta.resource_version
                )));
            }
        }
        for (r, _) in runs {
            let cur = s.runs.get_mut(&r.id).expect("checked above");
            cur.status = r.status;
            cur.host_id = r.host_id;
            cur.exit_code = r.exit_code;
            cur.failure_reason = r.failure_reason;
            cur.failure_message = r.failure_message.clone();
            cur.started_at = r.started_at;
            cur.finished_at = r.finished_at;
            cur.requeue_at = r.requeue_at;
            cur.last_progress_seq = r.last_progress_seq;
            cur.usage = r.usage;
            cur.session_id = r.session_id.clone();
            cur.last_activity = r.last_activity.clone();
            cur.denials = r.denials.clone();
            cur.updated_at = r.updated_at;
            cur.meta.resource_version = r.meta.resource_version;
        }
        Ok(())
    }

    async fn delete_run(&mut self, id: Uuid) -> StoreResult<bool> {
        if !self.work.runs.contains_key(&id) {
            return Ok(false);
        }
        self.work.remove_runs(&BTreeSet::from([id]));
        Ok(true)
    }

    async fn count_runs_by_status(&mut self) -> StoreResult<Vec<(RunStatus, i64)>> {
        let mut by: BTreeMap<&'static str, (RunStatus, i64)> = BTreeMap::new();
        for r in self.work.runs.values() {
            by.entry(r.status.as_str()).or_insert((r.status, 0)).1 += 1;
        }
        Ok(by.into_values().collect())
    }

    async fn usage_by_project(&mut self, project_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, Usage)>> {
        let mut by: HashMap<Uuid, Usage> = HashMap::new();
        for r in self.work.runs.values() {
            if project_ids.contains(&r.project_id) {
                let u = by.entry(r.project_id).or_default();
                *u = *u + r.usage.total;
            }
        }
        Ok(by.into_iter().collect())
    }

    async fn usage_by_work_item(&mut self, item_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, Usage)>> {
        let mut by: HashMap<Uuid, Usage> = HashMap::new();
        for id in item_ids {
            let Some(root) = self.work.work_items.get(id) else {
                continue;
            };
            let prefix = format!("{}/", root.path);
            for r in self.work.runs.values() {
                let Some(task) = self.work.work_items.get(&r.task_id) else {
                    continue;
                };
                if task.project_id == root.project_id
                    && (task.path == root.path || task.path.starts_with(&prefix))
                {
                    let u = by.entry(*id).or_default();
                    *u = *u + r.usage.total;
                }
            }
        }
        Ok(by.into_iter().collect())
    }

    async fn count_live_runs(&mut self, host_id: Uuid) -> StoreResult<i64> {
        Ok(self
            .work
            .runs
            .values()
            .filter(|r| r.host_id == Some(host_id) && r.status.is_live())
            .count() as i64)
    }
}

impl MemTx {
    /// [`RunTx::list_pending_runs`]'s runs, whole.
    fn pending_runs(&self, limit: i64) -> Vec<Run> {
        let runs = self
            .work
            .runs
            .values()
            .filter(|r| {
                r.status == RunStatus::Pending
                    && ((r.dispatchable_since.is_some()
                        && !self.work.secret_waits.contains_key(&r.id))
                        || r.stop_requested)
            })
            .cloned()
            .collect();
        let mut v = sorted_runs(runs, |r| (r.pending_since, r.id));
        v.truncate(take(limit));
        v
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(Run, runs, "runs", "runs_project_id_name_key", name, |x| {
    Some(x.project_id)
});
