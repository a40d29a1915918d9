use super::*;
use crate::idempotency::{Claimed, IdempotencyClaim};

#[async_trait]
impl IdempotencyTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn claim_idempotency_key(&mut self, c: &IdempotencyClaim) -> StoreResult<Claimed> {
        // Insert, or take over an expired key or an abandoned claim; the
        // row comes back only when this request now holds the key.
        let took: Option<i32> = sqlx::query_scalar(
            "INSERT INTO idempotency_keys (principal, key_hash, request_hash, created_at, \
               claimed_at, expires_at) VALUES ($1, $2, $3, $4, $4, $5) \
             ON CONFLICT (principal, key_hash) DO UPDATE SET request_hash = $3, \
               response_status = NULL, response_body = NULL, response_content_type = NULL, \
               created_at = $4, claimed_at = $4, expires_at = $5 \
             WHERE idempotency_keys.expires_at <= $4 \
                OR (idempotency_keys.response_status IS NULL \
                    AND idempotency_keys.claimed_at < $6 \
                    AND idempotency_keys.request_hash = $3) \
             RETURNING 1",
        )
        .bind(&c.principal)
        .bind(&c.key_hash)
        .bind(&c.request_hash)
        .bind(c.now)
        .bind(c.expires_at)
        .bind(c.stale_before)
        .fetch_optional(self.conn())
        .await
        .map_err(db_err)?;
        if took.is_some() {
            return Ok(Claimed::New);
        }
        let row = sqlx::query(
            "SELECT request_hash, response_status, response_body, response_content_type \
             FROM idempotency_keys WHERE principal = $1 AND key_hash = $2",
        )
        .bind(&c.principal)
        .bind(&c.key_hash)
        .fetch_optional(self.conn())
        .await
        .map_err(db_err)?;
        let Some(row) = row else {
            // Deleted in between (purged): claim again.
            return Box::pin(self.claim_idempotency_key(c)).await;
        };
        let hash: String = get(&row, "request_hash")?;
        if hash != c.request_hash {
            return Ok(Claimed::Mismatch);
        }
        match get::<Option<i32>>(&row, "response_status")? {
            None => Ok(Claimed::InProgress),
            Some(status) => Ok(Claimed::Answered {
                status,
                body: get(&row, "response_body")?,
                content_type: get(&row, "response_content_type")?,
            }),
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn answer_idempotency_key(
        &mut self,
        principal: &str,
        key_hash: &str,
        status: i32,
        body: Option<&[u8]>,
        content_type: Option<&str>,
    ) -> StoreResult<()> {
        let q = sqlx::query(
            "UPDATE idempotency_keys SET response_status = $3, response_body = $4, \
             response_content_type = $5 WHERE principal = $1 AND key_hash = $2",
        )
        .bind(principal)
        .bind(key_hash)
        .bind(status)
        .bind(body)
        .bind(content_type);
        self.exec(q).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn release_idempotency_key(
        &mut self,
        principal: &str,
        key_hash: &str,
    ) -> StoreResult<()> {
        let q = sqlx::query(
            "DELETE FROM idempotency_keys WHERE principal = $1 AND key_hash = $2 \
             AND response_status IS NULL",
        )
        .bind(principal)
        .bind(key_hash);
        self.exec(q).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn purge_idempotency_keys(&mut self, now: DateTime<Utc>) -> StoreResult<u64> {
        let q = sqlx::query("DELETE FROM idempotency_keys WHERE expires_at <= $1").bind(now);
        self.exec(q).await
    }
}
