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
        self.insert_guarded(q).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_host(&mut self, id: Uuid) -> StoreResult<Option<Host>> {
        self.named_by_id(id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_host_by_name(&mut self, name: &str) -> StoreResult<Option<Host>> {
        self.named(None, name).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_hosts(&mut self) -> StoreResult<Vec<Host>> {
        self.all_named(None).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_host(&mut self, h: &Host, expected_rv: i64) -> StoreResult<Host> {
        let cols = [
            "platform",
            "token_fingerprint",
            "instance_id",
            "instance_suspect",
            "instance_flagged_at",
            "last_seen_at",
            "capacity",
            "disabled",
            "presented_instance_id",
            "dispatch_labels",
            "worker_labels",
            "capabilities",
        ];
        self.update_named(
            (h.id, expected_rv),
            (&h.meta, h.updated_at),
            (&cols, |q| {
                q.bind(h.platform.as_str())
                    .bind(h.token_fingerprint.clone())
                    .bind(h.instance_id)
                    .bind(h.instance_suspect)
                    .bind(h.instance_flagged_at)
                    .bind(h.last_seen_at)
                    .bind(h.capacity)
                    .bind(h.disabled)
                    .bind(h.presented_instance_id)
                    .bind(labels_to_json(&h.dispatch_labels))
                    .bind(labels_to_json(&h.worker_labels))
                    .bind(capabilities_to_json(&h.capabilities))
            }),
            format!("host {}", h.id),
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(n = names.len()))]
    async fn get_hosts_by_names(&mut self, names: &[String]) -> StoreResult<Vec<Host>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!("SELECT {} FROM hosts WHERE name = ANY($1)", host_cols());
        self.rows(sqlx::query(&sql).bind(names), host_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(n = seen.len()))]
    async fn touch_hosts(
        &mut self,
        seen: &[(Uuid, i64)],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Uuid>> {
        if seen.is_empty() {
            return Ok(Vec::new());
        }
        // Rows locked in id order, like every other batch over hosts, so
        // two batches never wait on each other crosswise.
        let mut seen = seen.to_vec();
        seen.sort_unstable();
        let (ids, rvs): (Vec<Uuid>, Vec<i64>) = seen.into_iter().unzip();
        sqlx::query_scalar(
            "UPDATE hosts h SET last_seen_at = $3, resource_version = h.resource_version + 1 \
             FROM (SELECT l.id FROM hosts l \
                   JOIN unnest($1::uuid[], $2::bigint[]) AS s(id, rv) \
                     ON l.id = s.id AND l.resource_version = s.rv \
                   ORDER BY l.id FOR UPDATE OF l) AS t \
             WHERE h.id = t.id RETURNING h.id",
        )
        .bind(&ids)
        .bind(&rvs)
        .bind(now)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)
    }

    #[tracing::instrument(level = "debug", skip_all, fields(n = hosts.len()))]
    async fn live_runs_on_hosts(&mut self, hosts: &[Uuid]) -> StoreResult<Vec<Run>> {
        if hosts.is_empty() {
            return Ok(Vec::new());
        }
        // runs_live (the partial index on live runs) serves it.
        let sql = format!(
            "SELECT {} FROM runs WHERE host_id = ANY($1) \
             AND status IN ('spawning', 'running') ORDER BY created_at, id",
            run_cols()
        );
        self.rows(sqlx::query(&sql).bind(hosts), run_from_row).await
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
        self.set_named_status((id, from.as_str(), to.as_str()), now, "host")
            .await
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
        self.rows(sqlx::query(&sql).bind(cutoff), host_from_row)
            .await
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

impl super::named::Named for Host {
    const TABLE: &'static str = "hosts";
    const SCOPE: Option<&'static str> = None;
    fn cols() -> String {
        host_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        host_from_row(row)
    }
}
