use super::*;

#[async_trait]
impl HostTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_host(&mut self, h: &Host) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO hosts ({}) VALUES \
             ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,$16,$17,$18,$19,$20,$21,$22,$23,$24)",
            host_cols()
        );
        let q = sqlx::query(&sql)
            .bind(h.id)
            .bind(&h.name)
            .bind(h.platform.as_str())
            .bind(&h.token_fingerprint)
            .bind(h.status.as_str())
            .bind(h.instance_id)
            .bind(h.instance_suspect)
            .bind(h.instance_flagged_at)
            .bind(h.last_seen_at)
            .bind(h.capacity)
            .bind(h.disabled)
            .bind(h.presented_instance_id)
            .bind(labels_to_json(&h.dispatch_labels))
            .bind(labels_to_json(&h.worker_labels));
        let q = bind_meta!(q, h.meta)
            .bind(h.created_at)
            .bind(h.updated_at)
            .bind(capabilities_to_json(&h.capabilities));
        self.savepoint().await?;
        let r = q.execute(self.conn()).await;
        self.end_savepoint(r).await.map(|_| ())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_host(&mut self, id: Uuid) -> StoreResult<Option<Host>> {
        let sql = format!("SELECT {} FROM hosts WHERE id = $1", host_cols());
        let row = sqlx::query(&sql)
            .bind(id)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(host_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_host_by_name(&mut self, name: &str) -> StoreResult<Option<Host>> {
        let sql = format!("SELECT {} FROM hosts WHERE name = $1", host_cols());
        let row = sqlx::query(&sql)
            .bind(name)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        row.as_ref().map(host_from_row).transpose()
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_hosts(&mut self) -> StoreResult<Vec<Host>> {
        let sql = format!(
            "SELECT {} FROM hosts ORDER BY name COLLATE \"C\"",
            host_cols()
        );
        let rows = sqlx::query(&sql)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, host_from_row)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_host(&mut self, h: &Host, expected_rv: i64) -> StoreResult<Host> {
        let sql = format!(
            "UPDATE hosts SET platform = $3, token_fingerprint = $4, instance_id = $5, \
             instance_suspect = $6, instance_flagged_at = $7, last_seen_at = $8, \
             capacity = $9, disabled = $10, spec = $11, labels = $12, annotations = $13, \
             generation = $14, observed_generation = $15, conditions = $16, updated_at = $17, \
             presented_instance_id = $18, dispatch_labels = $19, worker_labels = $20, \
             capabilities = $21, resource_version = resource_version + 1 \
             WHERE id = $1 AND resource_version = $2 RETURNING {}",
            host_cols()
        );
        let row = sqlx::query(&sql)
            .bind(h.id)
            .bind(expected_rv)
            .bind(h.platform.as_str())
            .bind(&h.token_fingerprint)
            .bind(h.instance_id)
            .bind(h.instance_suspect)
            .bind(h.instance_flagged_at)
            .bind(h.last_seen_at)
            .bind(h.capacity)
            .bind(h.disabled)
            .bind(&h.meta.spec)
            .bind(labels_to_json(&h.meta.labels))
            .bind(labels_to_json(&h.meta.annotations))
            .bind(h.meta.generation)
            .bind(h.meta.observed_generation)
            .bind(&h.meta.conditions)
            .bind(h.updated_at)
            .bind(h.presented_instance_id)
            .bind(labels_to_json(&h.dispatch_labels))
            .bind(labels_to_json(&h.worker_labels))
            .bind(capabilities_to_json(&h.capabilities))
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => host_from_row(&row),
            None => Err(self
                .zero_rows(
                    "hosts",
                    h.id,
                    format!("host {} is not at resource version {expected_rv}", h.id),
                )
                .await),
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_host_status(
        &mut self,
        id: Uuid,
        from: HostStatus,
        to: HostStatus,
        now: DateTime<Utc>,
    ) -> StoreResult<Host> {
        transition(from, to)?;
        let sql = format!(
            "UPDATE hosts SET status = $3, updated_at = $4, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND status = $2 RETURNING {}",
            host_cols()
        );
        let row = sqlx::query(&sql)
            .bind(id)
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(now)
            .fetch_optional(self.conn())
            .await
            .map_err(db_err)?;
        match row {
            Some(row) => host_from_row(&row),
            None => Err(self
                .zero_rows("hosts", id, format!("host {id} is not {from}"))
                .await),
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn count_live_runs_per_host(&mut self) -> StoreResult<Vec<(Uuid, i64)>> {
        // runs_live (the partial index on live runs) serves it.
        sqlx::query_as(
            "SELECT host_id, count(*) FROM runs \
             WHERE status IN ('spawning', 'running') AND host_id IS NOT NULL GROUP BY host_id",
        )
        .fetch_all(self.conn())
        .await
        .map_err(db_err)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn count_hosts_by_status(&mut self) -> StoreResult<Vec<(HostStatus, i64)>> {
        let rows: Vec<(String, i64)> =
            sqlx::query_as("SELECT status, count(*) FROM hosts GROUP BY status ORDER BY status")
                .fetch_all(self.conn())
                .await
                .map_err(db_err)?;
        rows.into_iter()
            .map(|(s, n)| Ok((s.parse().map_err(|e| corrupt("hosts.status", e))?, n)))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_silent_hosts(&mut self, cutoff: DateTime<Utc>) -> StoreResult<Vec<Host>> {
        let sql = format!(
            "SELECT {} FROM hosts WHERE status = 'online' AND last_seen_at < $1 \
             ORDER BY last_seen_at, name COLLATE \"C\"",
            host_cols()
        );
        let rows = sqlx::query(&sql)
            .bind(cutoff)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        all(rows, host_from_row)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_host(&mut self, id: Uuid) -> StoreResult<bool> {
        self.savepoint().await?;
        let r = sqlx::query("DELETE FROM hosts WHERE id = $1")
            .bind(id)
            .execute(self.conn())
            .await;
        let r = match r {
            Ok(r) => self.end_savepoint(Ok(r)).await?,
            Err(e) => {
                // Keep the delete-specific mapping (a referenced host is
                // Invalid, not NotFound) while still undoing the savepoint.
                self.undo_savepoint().await?;
                return Err(db_err_delete(e));
            }
        };
        Ok(r.rows_affected() == 1)
    }
}
