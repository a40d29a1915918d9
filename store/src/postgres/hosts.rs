use super::*;

#[async_trait]
impl HostTx for PgTx {
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
        let sql = format!(
            "SELECT host_id, count(*) FROM runs WHERE {} AND host_id IS NOT NULL GROUP BY host_id",
            crate::dispatch::LIVE_SQL
        );
        sqlx::query_as(&sql)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn count_hosts_by_status(&mut self) -> StoreResult<Vec<(HostStatus, i64)>> {
        self.count_by_status("hosts").await
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
}
