use super::*;
use crate::idempotency::{Claimed, IdempotencyClaim};

/// One stored key (the `idempotency_keys` row).
#[derive(Debug, Clone)]
pub(super) struct KeyRow {
    request_hash: String,
    status: Option<i32>,
    body: Option<Vec<u8>>,
    content_type: Option<String>,
    claimed_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
}

#[async_trait]
impl IdempotencyTx for MemTx {
    async fn claim_idempotency_key(&mut self, c: &IdempotencyClaim) -> StoreResult<Claimed> {
        let k = (c.principal.clone(), c.key_hash.clone());
        let take = match self.work.idempotency.get(&k) {
            None => true,
            Some(r) => {
                r.expires_at <= c.now
                    || (r.status.is_none()
                        && r.claimed_at < c.stale_before
                        && r.request_hash == c.request_hash)
            }
        };
        if take {
            self.work.idempotency.insert(
                k,
                KeyRow {
                    request_hash: c.request_hash.clone(),
                    status: None,
                    body: None,
                    content_type: None,
                    claimed_at: c.now,
                    expires_at: c.expires_at,
                },
            );
            return Ok(Claimed::New);
        }
        let r = &self.work.idempotency[&k];
        if r.request_hash != c.request_hash {
            return Ok(Claimed::Mismatch);
        }
        Ok(match r.status {
            None => Claimed::InProgress,
            Some(status) => Claimed::Answered {
                status,
                body: r.body.clone(),
                content_type: r.content_type.clone(),
            },
        })
    }

    async fn answer_idempotency_key(
        &mut self,
        principal: &str,
        key_hash: &str,
        status: i32,
        body: Option<&[u8]>,
        content_type: Option<&str>,
    ) -> StoreResult<()> {
        let k = (principal.to_string(), key_hash.to_string());
        if let Some(r) = self.work.idempotency.get_mut(&k) {
            r.status = Some(status);
            r.body = body.map(<[u8]>::to_vec);
            r.content_type = content_type.map(str::to_string);
        }
        Ok(())
    }

    async fn release_idempotency_key(
        &mut self,
        principal: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        let k = (principal.to_string(), key_hash.to_string());
        if self
            .work
            .idempotency
            .get(&k)
            .is_some_and(|r| r.status.is_none())
        {
            self.work.idempotency.remove(&k);
        }
        Ok(())
    }

    async fn purge_idempotency_keys(&mut self, now: DateTime<Utc>) -> StoreResult<u64> {
        let before = self.work.idempotency.len();
        self.work.idempotency.retain(|_, r| r.expires_at > now);
        Ok((before - self.work.idempotency.len()) as u64)
    }
}
