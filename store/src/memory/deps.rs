use super::*;
use crate::{DependencyLink, Gated};
use pam_manifests::state::WorkItemStatus;

impl MemTx {
    fn links(&self, ids: &[Uuid], out_edges: bool) -> Vec<DependencyLink> {
        let s = &self.work;
        let mut v: Vec<DependencyLink> = Vec::new();
        for (task, on) in &s.deps {
            for dep in on {
                let (end, other) = if out_edges { (task, dep) } else { (dep, task) };
                if !ids.contains(end) {
                    continue;
                }
                if let Some(w) = s.work_items.get(other) {
                    v.push(DependencyLink {
                        task_id: *end,
                        other: w.clone(),
                    });
                }
            }
        }
        sort_links(&mut v);
        v
    }
}

fn sort_links(v: &mut [DependencyLink]) {
    v.sort_by(|a, b| (a.task_id, &a.other.name).cmp(&(b.task_id, &b.other.name)));
}

#[async_trait]
impl DependencyTx for MemTx {
    async fn set_dependencies(&mut self, task_id: Uuid, on: &[Uuid]) -> StoreResult<()> {
        let s = &mut self.work;
        if on.contains(&task_id) {
            return Err(StoreError::Invalid(format!(
                "task {task_id} depends on itself"
            )));
        }
        let project = s
            .work_items
            .get(&task_id)
            .map(|w| w.project_id)
            .ok_or_else(|| not_found("work_items", task_id))?;
        for id in on {
            match s.work_items.get(id) {
                None => return Err(not_found("work_items", *id)),
                Some(w) if w.project_id != project => {
                    return Err(StoreError::Invalid(format!(
                        "task {id} is not in the project of task {task_id}"
                    )))
                }
                Some(_) => {}
            }
        }
        let mut list: Vec<Uuid> = Vec::new();
        for id in on {
            if !list.contains(id) {
                list.push(*id);
            }
        }
        if list.is_empty() {
            s.deps.remove(&task_id);
        } else {
            s.deps.insert(task_id, list);
        }
        Ok(())
    }

    async fn dependencies_of(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>> {
        Ok(self.links(task_ids, true))
    }

    async fn dependents_of(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>> {
        Ok(self.links(task_ids, false))
    }

    async fn dependency_closure(&mut self, task_ids: &[Uuid]) -> StoreResult<Vec<DependencyLink>> {
        let s = &self.work;
        let mut seen: BTreeSet<Uuid> = task_ids.iter().copied().collect();
        let mut frontier: Vec<Uuid> = task_ids.to_vec();
        let mut v = Vec::new();
        while let Some(task) = frontier.pop() {
            for dep in s.deps.get(&task).into_iter().flatten() {
                if let Some(w) = s.work_items.get(dep) {
                    v.push(DependencyLink {
                        task_id: task,
                        other: w.clone(),
                    });
                }
                if seen.insert(*dep) {
                    frontier.push(*dep);
                }
            }
        }
        sort_links(&mut v);
        v.dedup_by(|a, b| a.task_id == b.task_id && a.other.id == b.other.id);
        Ok(v)
    }

    async fn refresh_dispatchable(&mut self, now: DateTime<Utc>) -> StoreResult<Gated> {
        let s = &mut self.work;
        let mut gated = Gated::default();
        let pending: Vec<(Uuid, Uuid, bool)> = s
            .runs
            .values()
            .filter(|r| r.status == RunStatus::Pending)
            .map(|r| (r.id, r.task_id, r.dispatchable_since.is_some()))
            .collect();
        for (id, task, dispatchable) in pending {
            let blocked = s.blocked(task);
            if blocked == dispatchable {
                let r = s.runs.get_mut(&id).expect("listed above");
                r.dispatchable_since = (!blocked).then_some(now);
                r.updated_at = now;
                r.meta.resource_version += 1;
                if blocked {
                    gated.blocked.push(r.clone());
                } else {
                    gated.unblocked.push(r.clone());
                }
            }
        }
        gated.unblocked.sort_by_key(|r| r.id);
        gated.blocked.sort_by_key(|r| r.id);
        Ok(gated)
    }

    async fn runs_waiting_on_cancelled(&mut self, limit: i64) -> StoreResult<Vec<(Run, WorkItem)>> {
        let s = &self.work;
        let mut v: Vec<(Run, WorkItem)> = Vec::new();
        for r in s.runs.values() {
            if r.status != RunStatus::Pending || r.dispatchable_since.is_some() {
                continue;
            }
            let cancelled = s
                .deps
                .get(&r.task_id)
                .into_iter()
                .flatten()
                .filter_map(|d| s.work_items.get(d))
                .filter(|w| w.status == WorkItemStatus::Cancelled)
                .min_by(|a, b| a.name.cmp(&b.name));
            if let Some(w) = cancelled {
                v.push((r.clone(), w.clone()));
            }
        }
        v.sort_by_key(|(r, _)| r.id);
        v.truncate(take(limit));
        Ok(v)
    }
}
