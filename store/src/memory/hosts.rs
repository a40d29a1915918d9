use super::*;

#[async_trait]
impl HostTx for MemTx {
    async fn insert_host(&mut self, h: &Host) -> StoreResult<()> {
        check_host(h)?;
        let s = &mut self.work;
        if s.hosts.contains_key(&h.id) {
            return Err(StoreError::AlreadyExists("hosts_pkey".into()));
        }
        if s.hosts.values().any(|o| o.name == h.name) {
            return Err(StoreError::AlreadyExists("hosts_name_key".into()));
        }
        s.hosts.insert(h.id, h.clone());
        Ok(())
    }

    async fn get_host(&mut self, id: Uuid) -> StoreResult<Option<Host>> {
        Ok(self.work.by_id(id))
    }

    async fn get_host_by_name(&mut self, name: &str) -> StoreResult<Option<Host>> {
        Ok(self.work.hosts.values().find(|h| h.name == name).cloned())
    }

    async fn list_hosts(&mut self) -> StoreResult<Vec<Host>> {
        let mut v: Vec<Host> = self.work.hosts.values().cloned().collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(v)
    }

    async fn update_host(&mut self, h: &Host, expected_rv: i64) -> StoreResult<Host> {
        let what = format!("host {}", h.id);
        self.work
            .update_named(h, expected_rv, what, |cur: &mut Host, h| {
                check_host(h)?;
                cur.platform = h.platform;
                cur.token_fingerprint = h.token_fingerprint.clone();
                cur.instance_id = h.instance_id;
                cur.instance_suspect = h.instance_suspect;
                cur.instance_flagged_at = h.instance_flagged_at;
                cur.presented_instance_id = h.presented_instance_id;
                cur.dispatch_labels = h.dispatch_labels.clone();
                cur.worker_labels = h.worker_labels.clone();
                cur.last_seen_at = h.last_seen_at;
                cur.capacity = h.capacity;
                cur.disabled = h.disabled;
                Ok(())
            })
    }

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

    async fn live_runs_on_hosts(&mut self, hosts: &[Uuid]) -> StoreResult<Vec<Run>> {
        let f = RunFilter {
            statuses: Some(vec![RunStatus::Spawning, RunStatus::Running]),
            ..RunFilter::default()
        };
        let mut runs = self.list_runs(&f).await?;
        runs.retain(|r| r.host_id.is_some_and(|h| hosts.contains(&h)));
        Ok(runs)
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

    async fn delete_host(&mut self, id: Uuid) -> StoreResult<bool> {
        let s = &mut self.work;
        if !s.hosts.contains_key(&id) {
            return Ok(false);
        }
        if s.runs.values().any(|r| r.host_id == Some(id)) {
            return Err(StoreError::Invalid(
                "still referenced (runs_host_id_fkey)".into(),
            ));
        }
        s.hosts.remove(&id);
        Ok(true)
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(Host, hosts, "hosts", "hosts_name_key", name, |_h| None);
