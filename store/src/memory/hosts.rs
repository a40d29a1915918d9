use super::named::Table;
use super::*;

#[async_trait]
impl HostTx for MemTx {
    async fn get_hosts_by_names(&mut self, names: &[String]) -> StoreResult<Vec<Host>> {
        let names: std::collections::BTreeSet<&str> = names.iter().map(String::as_str).collect();
        Ok(self
            .work
            .hosts
            .values()
            .filter(|h| names.contains(h.name.as_str()))
            .cloned()
            .collect())
    }

    async fn touch_hosts(
        &mut self,
        seen: &[(Uuid, i64)],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Uuid>> {
        let mut written = Vec::new();
        for &(id, rv) in seen {
            if let Some(h) = self.work.hosts.get_mut(&id) {
                if h.meta.resource_version == rv {
                    h.last_seen_at = Some(now);
                    h.meta.resource_version = rv + 1;
                    written.push(id);
                }
            }
        }
        Ok(written)
    }

    async fn set_host_status(
        &mut self,
        id: Uuid,
        from: HostStatus,
        to: HostStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<Host> {
        transition(from, to)?;
        self.work
            .set_named_status(id, |h: &mut Host| &mut h.status, (from, to), now, "host")
    }

    async fn count_live_runs_per_host(&mut self) -> StoreResult<Vec<(Uuid, i64)>> {
        let mut by: BTreeMap<Uuid, i64> = BTreeMap::new();
        for r in self.work.runs.values() {
            if let (Some(h), RunStatus::Spawning | RunStatus::Running) = (r.host_id, r.status) {
                *by.entry(h).or_default() += 1;
            }
        }
        Ok(by.into_iter().collect())
    }

    async fn count_hosts_by_status(&mut self) -> StoreResult<Vec<(HostStatus, i64)>> {
        let mut by: BTreeMap<&'static str, (HostStatus, i64)> = BTreeMap::new();
        for h in self.work.hosts.values() {
            by.entry(h.status.as_str()).or_insert((h.status, 0)).1 += 1;
        }
        Ok(by.into_values().collect())
    }

    async fn list_silent_hosts(&mut self, cutoff: DateTime<Utc>) -> StoreResult<Vec<Host>> {
        let mut v: Vec<Host> = self
            .work
            .hosts
            .values()
            .filter(|h| {
                h.status == HostStatus::Online && h.last_seen_at.is_some_and(|t| t < cutoff)
            })
            .cloned()
            .collect();
        v.sort_by(|a, b| (a.last_seen_at, &a.name).cmp(&(b.last_seen_at, &b.name)));
        Ok(v)
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(Host, hosts, "hosts", "hosts_name_key", name, |_h| None);

impl Table for Host {
    fn check(&self) -> StoreResult<()> {
        check_host(self)
    }
    fn copy_own(&mut self, h: &Self) {
        self.platform = h.platform;
        self.token_fingerprint = h.token_fingerprint.clone();
        self.instance_id = h.instance_id;
        self.instance_suspect = h.instance_suspect;
        self.instance_flagged_at = h.instance_flagged_at;
        self.presented_instance_id = h.presented_instance_id;
        self.dispatch_labels = h.dispatch_labels.clone();
        self.worker_labels = h.worker_labels.clone();
        self.last_seen_at = h.last_seen_at;
        self.capacity = h.capacity;
        self.disabled = h.disabled;
    }
    /// Refused while a run names it (no cascade).
    fn on_delete(s: &mut State, id: Uuid) -> StoreResult<()> {
        if s.runs.values().any(|r| r.host_id == Some(id)) {
            return Err(StoreError::Invalid(
                "still referenced by other objects".into(),
            ));
        }
        Ok(())
    }
}
