use super::*;
use crate::leader::{LeaderTx, Lease};

#[async_trait]
impl LeaderTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn lead(
        &mut self,
        name: &str,
        holder: &str,
        instance: Uuid,
        ttl: chrono::Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<i64>> {
        // One statement: insert, renew (same process, same term), or take
        // over (expired, or the same replica restarted: term + 1).
        let term: Option<i64> = sqlx::query_scalar(
            "INSERT INTO leader_leases (name, holder, instance, term, renewed_at, expires_at) \
             VALUES ($1, $2, $3, 1, $4, $5) \
             ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, \
                 instance = EXCLUDED.instance, \
                 term = leader_leases.term + \
                     CASE WHEN leader_leases.instance = EXCLUDED.instance THEN 0 ELSE 1 END, \
                 renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at \
             WHERE leader_leases.instance = EXCLUDED.instance \
                OR leader_leases.holder = EXCLUDED.holder \
                OR leader_leases.expires_at <= EXCLUDED.renewed_at \
             RETURNING term",
        )
        .bind(name)
        .bind(holder)
        .bind(instance)
        .bind(now)
        .bind(now + ttl)
        .fetch_optional(self.conn())
        .await
        .map_err(db_err)?;
        Ok(term)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn resign(&mut self, name: &str, instance: Uuid, now: DateTime<Utc>) -> StoreResult<()> {
        let q = sqlx::query(
            "UPDATE leader_leases SET expires_at = $3 WHERE name = $1 AND instance = $2",
        )
        .bind(name)
        .bind(instance)
        .bind(now);
        self.exec(q).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn fence(&mut self, name: &str, term: i64) -> StoreResult<()> {
        // FOR SHARE: a takeover's UPDATE of this row waits until this
        // transaction ends, so what commits under the fence committed
        // while `term` held the lease.
        let now: Option<i64> =
            sqlx::query_scalar("SELECT term FROM leader_leases WHERE name = $1 FOR SHARE")
                .bind(name)
                .fetch_optional(self.conn())
                .await
                .map_err(db_err)?;
        match now {
            Some(t) if t == term => Ok(()),
            other => Err(StoreError::Fenced(format!(
                "lease {name:?} is at term {}, this process led term {term}",
                other.map_or("none".to_string(), |t| t.to_string())
            ))),
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_lease(&mut self, name: &str) -> StoreResult<Option<Lease>> {
        let row = sqlx::query(
            "SELECT name, holder, instance, term, renewed_at, expires_at \
             FROM leader_leases WHERE name = $1",
        )
        .bind(name)
        .fetch_optional(self.conn())
        .await
        .map_err(db_err)?;
        row.map(|r| {
            Ok(Lease {
                name: get(&r, "name")?,
                holder: get(&r, "holder")?,
                instance: get(&r, "instance")?,
                term: get(&r, "term")?,
                renewed_at: get(&r, "renewed_at")?,
                expires_at: get(&r, "expires_at")?,
            })
        })
        .transpose()
    }
}
