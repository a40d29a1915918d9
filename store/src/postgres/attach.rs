use super::*;
use crate::attach::{AttachLease, AttachRefusal, AttachTx};

const LEASE_COLS: &str = "run_id, id, attempt, holder, ttl_ms, token_id, acquired_at, expires_at";

fn lease_from_row(r: &sqlx::postgres::PgRow) -> StoreResult<AttachLease> {
    let ttl_ms: i64 = get(r, "ttl_ms")?;
    Ok(AttachLease {
        run_id: get(r, "run_id")?,
        id: get(r, "id")?,
        attempt: get(r, "attempt")?,
        holder: get(r, "holder")?,
        ttl: std::time::Duration::from_millis(u64::try_from(ttl_ms).unwrap_or(0)),
        token_id: get(r, "token_id")?,
        acquired_at: get(r, "acquired_at")?,
        expires_at: get(r, "expires_at")?,
    })
}

fn ttl_ms(l: &AttachLease) -> i64 {
    i64::try_from(l.ttl.as_millis()).unwrap_or(i64::MAX)
}

impl PgTx {
    /// `sql` (binding run, lease id, now) on the unexpired lease it names.
    async fn held_lease(
        &mut self,
        sql: &str,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>> {
        self.row(
            sqlx::query(sql).bind(run_id).bind(lease_id).bind(now),
            lease_from_row,
        )
        .await
    }

    async fn leases(&mut self, sql: &str, run_id: Option<Uuid>) -> StoreResult<Vec<AttachLease>> {
        let mut q = sqlx::query(sql);
        if let Some(id) = run_id {
            q = q.bind(id);
        }
        let rows = q.fetch_all(self.conn()).await.map_err(db_err)?;
        all(rows, lease_from_row)
    }
}

#[async_trait]
impl AttachTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn acquire_attach(
        &mut self,
        lease: &AttachLease,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<Option<AttachLease>, AttachRefusal>> {
        // The row locked (or the key, when none): two replicas acquiring at
        // once serialize here.
        let sql = format!("SELECT {LEASE_COLS} FROM attach_leases WHERE run_id = $1 FOR UPDATE");
        let current = self.leases(&sql, Some(lease.run_id)).await?.pop();
        let expired = match current {
            Some(l) if l.expires_at > now => return Ok(Err(AttachRefusal::Held(l))),
            Some(l) => {
                let q = sqlx::query("DELETE FROM attach_leases WHERE run_id = $1").bind(l.run_id);
                self.exec(q).await?;
                Some(l)
            }
            None => None,
        };
        let inserted = sqlx::query(&format!(
            "INSERT INTO attach_leases ({LEASE_COLS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8) \
             ON CONFLICT (run_id) DO NOTHING"
        ))
        .bind(lease.run_id)
        .bind(lease.id)
        .bind(lease.attempt)
        .bind(&lease.holder)
        .bind(ttl_ms(lease))
        .bind(lease.token_id)
        .bind(lease.acquired_at)
        .bind(lease.expires_at)
        .execute(self.conn())
        .await
        .map_err(db_err)?;
        if inserted.rows_affected() == 0 {
            // Another replica's acquire committed first.
            let sql = format!("SELECT {LEASE_COLS} FROM attach_leases WHERE run_id = $1");
            if let Some(l) = self.leases(&sql, Some(lease.run_id)).await?.pop() {
                return Ok(Err(AttachRefusal::Held(l)));
            }
        }
        Ok(Ok(expired))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn renew_attach(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>> {
        let sql = format!(
            "UPDATE attach_leases SET expires_at = $3 + ttl_ms * interval '1 millisecond' \
             WHERE run_id = $1 AND id = $2 AND expires_at > $3 RETURNING {LEASE_COLS}"
        );
        self.held_lease(&sql, run_id, lease_id, now).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn release_attach(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>> {
        let sql = format!(
            "DELETE FROM attach_leases WHERE run_id = $1 AND id = $2 AND expires_at > $3 \
             RETURNING {LEASE_COLS}"
        );
        self.held_lease(&sql, run_id, lease_id, now).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn push_attach_input(
        &mut self,
        run_id: Uuid,
        lease_id: Uuid,
        text: &str,
        max: usize,
        now: DateTime<Utc>,
    ) -> StoreResult<Result<(), AttachRefusal>> {
        let attempt: Option<i32> = sqlx::query_scalar(
            "SELECT attempt FROM attach_leases \
             WHERE run_id = $1 AND id = $2 AND expires_at > $3 FOR UPDATE",
        )
        .bind(run_id)
        .bind(lease_id)
        .bind(now)
        .fetch_optional(self.conn())
        .await
        .map_err(db_err)?;
        let Some(attempt) = attempt else {
            return Ok(Err(AttachRefusal::NotHeld));
        };
        let queued: i64 = sqlx::query_scalar("SELECT count(*) FROM attach_input WHERE run_id = $1")
            .bind(run_id)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)?;
        if queued as usize >= max {
            return Ok(Err(AttachRefusal::Backlog));
        }
        let q = sqlx::query("INSERT INTO attach_input (run_id, attempt, text) VALUES ($1, $2, $3)")
            .bind(run_id)
            .bind(attempt)
            .bind(text);
        self.exec(q).await?;
        Ok(Ok(()))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn take_attach_input(
        &mut self,
        runs: &[(Uuid, i32)],
    ) -> StoreResult<std::collections::HashMap<Uuid, Vec<String>>> {
        let mut out = std::collections::HashMap::new();
        if runs.is_empty() {
            return Ok(out);
        }
        let ids: Vec<Uuid> = runs.iter().map(|(id, _)| *id).collect();
        let mut rows: Vec<(Uuid, i64, i32, String)> = sqlx::query_as(
            "DELETE FROM attach_input WHERE run_id = ANY($1) RETURNING run_id, seq, attempt, text",
        )
        .bind(&ids)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        rows.sort_by_key(|r| r.1);
        let attempt: std::collections::HashMap<Uuid, i32> = runs.iter().copied().collect();
        for (run, _, a, text) in rows {
            if attempt.get(&run) == Some(&a) {
                out.entry(run).or_insert_with(Vec::new).push(text);
            }
        }
        Ok(out)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_attach(
        &mut self,
        run_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<Option<AttachLease>> {
        let sql = format!("SELECT {LEASE_COLS} FROM attach_leases WHERE run_id = $1");
        Ok(self
            .leases(&sql, Some(run_id))
            .await?
            .pop()
            .filter(|l| l.expires_at > now))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn take_expired_attach(&mut self, now: DateTime<Utc>) -> StoreResult<Vec<AttachLease>> {
        self.rows(
            sqlx::query(&format!(
                "DELETE FROM attach_leases WHERE expires_at <= $1 RETURNING {LEASE_COLS}"
            ))
            .bind(now),
            lease_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn take_revoked_attach(&mut self) -> StoreResult<Vec<AttachLease>> {
        let cols: Vec<String> = LEASE_COLS.split(", ").map(|c| format!("l.{c}")).collect();
        let sql = format!(
            "DELETE FROM attach_leases l USING api_tokens t \
             WHERE l.token_id = t.id AND t.revoked_at IS NOT NULL RETURNING {}",
            cols.join(", ")
        );
        self.leases(&sql, None).await
    }
}
