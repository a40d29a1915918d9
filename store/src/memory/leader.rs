use super::*;
use crate::leader::{LeaderTx, Lease};

#[async_trait]
impl LeaderTx for MemTx {
    async fn lead(
        &mut self,
        name: &str,
        holder: &str,
        instance: Uuid,
        ttl: chrono::Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        let leases = &mut self.work.leases;
        let term = match leases.get(name) {
            None => 1,
            Some(l) if l.instance == instance => l.term,
            Some(l) if l.holder == holder || l.expires_at <= now => l.term + 1,
            Some(_) => return Ok(None),
        };
        leases.insert(
            name.to_string(),
            Lease {
                name: name.to_string(),
                holder: holder.to_string(),
                instance,
                term,
                renewed_at: now,
                expires_at: now + ttl,
            },
        );
        Ok(Some(term))
    }

    async fn resign(&mut self, name: &str, instance: Uuid, now: DateTime<Utc>) -> StoreResult<()> {
        if let Some(l) = self.work.leases.get_mut(name) {
            if l.instance == instance {
                l.expires_at = now;
            }
        }
        Ok(())
    }

    async fn fence(&mut self, name: &str, term: i64) -> StoreResult<()> {
        // Transactions are serializable here: no takeover can interleave.
        match self.work.leases.get(name).map(|l| l.term) {
            Some(t) if t == term => Ok(()),
            other => Err(StoreError::Fenced(format!(
                "lease {name:?} is at term {}, this process led term {term}",
                other.map_or("none".to_string(), |t| t.to_string())
            ))),
        }
    }

    async fn get_lease(&mut self, name: &str) -> StoreResult<Option<Lease>> {
        Ok(self.work.leases.get(name).cloned())
    }
}
