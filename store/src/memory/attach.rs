use super::*;
use crate::attach::{AttachLease, AttachRefusal, AttachTx};

#[async_trait]
impl AttachTx for MemTx {
    async fn acquire_attach(
        &mut self,
        lease: &AttachLease,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<Option<AttachLease>, AttachRefusal>> {
        if !self.work.runs.contains_key(&lease.run_id) {
            return Err(not_found("run", lease.run_id));
        }
        let leases = &mut self.work.attach_leases;
        let expired = match leases.get(&lease.run_id) {
            Some(l) if l.expires_at > now => return Ok(Err(AttachRefusal::Held(l.clone()))),
            Some(_) => leases.remove(&lease.run_id),
            None => None,
        };
        leases.insert(lease.run_id, lease.clone());
        Ok(Ok(expired))
    }

    async fn renew_attach(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>> {
        Ok(match self.work.attach_leases.get_mut(&run_id) {
            Some(l) if l.id == lease_id && l.expires_at > now => {
                l.expires_at = now
                    + chrono::Duration::from_std(l.ttl).unwrap_or(chrono::Duration::seconds(30));
                Some(l.clone())
            }
            _ => None,
        })
    }

    async fn release_attach(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>> {
        let held = matches!(self.work.attach_leases.get(&run_id),
            Some(l) if l.id == lease_id && l.expires_at > now);
        Ok(if held {
            self.work.attach_leases.remove(&run_id)
        } else {
            None
        })
    }

    async fn push_attach_input(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        text: &str,
        max: usize,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(), AttachRefusal>> {
        let attempt = match self.work.attach_leases.get(&run_id) {
            Some(l) if l.id == lease_id && l.expires_at > now => l.attempt,
            _ => return Ok(Err(AttachRefusal::NotHeld)),
        };
        let q = self.work.attach_input.entry(run_id).or_default();
        if q.len() >= max {
            return Ok(Err(AttachRefusal::Backlog));
        }
        q.push((attempt, text.to_string()));
        Ok(Ok(()))
    }

    async fn take_attach_input(
        &mut self,
        runs: &[(Uuid, i32)],
    ) -> StoreResult<HashMap<Uuid, Vec<String>>> {
        let mut out = HashMap::new();
        for &(run, attempt) in runs {
            let lines: Vec<String> = self
                .work
                .attach_input
                .remove(&run)
                .unwrap_or_default()
                .into_iter()
                .filter(|(a, _)| *a == attempt)
                .map(|(_, t)| t)
                .collect();
            if !lines.is_empty() {
                out.insert(run, lines);
            }
        }
        Ok(out)
    }

    async fn get_attach(
        &mut self,
        run_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>> {
        Ok(self
            .work
            .attach_leases
            .get(&run_id)
            .filter(|l| l.expires_at > now)
            .cloned())
    }

    async fn take_expired_attach(&mut self, now: DateTime<Utc>) -> StoreResult<Vec<AttachLease>> {
        Ok(take_leases(&mut self.work.attach_leases, |l| {
            l.expires_at <= now
        }))
    }

    async fn take_revoked_attach(&mut self) -> StoreResult<Vec<AttachLease>> {
        let tokens = &self.work.tokens;
        Ok(take_leases(&mut self.work.attach_leases, |l| {
            l.token_id
                .and_then(|t| tokens.get(&t))
                .is_some_and(|t| t.revoked_at.is_some())
        }))
    }
}

/// Removes and returns the leases `gone` picks (the memory store's
/// `DELETE … WHERE … RETURNING`).
fn take_leases(
    leases: &mut HashMap<Uuid, AttachLease>,
    gone: impl Fn(&AttachLease) -> bool,
) -> Vec<AttachLease> {
    let ids: Vec<Uuid> = leases
        .values()
        .filter(|l| gone(l))
        .map(|l| l.run_id)
        .collect();
    ids.into_iter().filter_map(|r| leases.remove(&r)).collect()
}
