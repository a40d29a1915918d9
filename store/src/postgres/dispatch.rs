//! The dispatch reads of the PostgreSQL store: a host's claim (the
//! dispatch predicate's SQL form, `crate::dispatch`) and the pending runs
//! the dispatch pass places (the narrow [`PendingRun`]).

use super::*;

/// The claim statement, made once (a claim runs on every worker's tick):
/// the dispatch predicate's SQL form ([`crate::dispatch::CLAIMABLE_SQL`])
/// with the blocked test filled in.
static CLAIM_SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let claimable = crate::dispatch::CLAIMABLE_SQL
        .replace("{blocked}", &super::deps::blocked_sql("runs.task_id"))
        .replace("{uses_workspace}", crate::dispatch::USES_WORKSPACE_SQL);
    // Session names are `pam-` and 8 hex digits of the run id, which
    // collide (the seed's "Short-id collisions"; `UNIQUE (host_id,
    // session_name)` binds at dispatch): of the runs picked, one whose name
    // the host holds, or that a picked run with a smaller id shares, is
    // left pending for another claim (the memory store does the same after
    // its limit) rather than failing this one. Checked in the UPDATE, not
    // in the pick: a first version filtered the pick and a second picked
    // again from it (DISTINCT ON), and either made bench-loops claim 15x
    // slower.
    format!(
        "WITH c AS ( \
             SELECT id AS cid, session_name AS sn FROM runs WHERE {claimable} \
             ORDER BY dispatchable_since, id LIMIT $4 FOR UPDATE SKIP LOCKED \
         ) UPDATE runs SET status = 'spawning', host_id = $1, updated_at = $5, \
             resource_version = resource_version + 1 \
         FROM c WHERE runs.id = c.cid AND runs.status = 'pending' \
             AND NOT EXISTS (SELECT 1 FROM c first WHERE first.sn = c.sn AND first.cid < c.cid) \
             AND NOT EXISTS (SELECT 1 FROM runs o WHERE o.host_id = $1 \
                 AND o.session_name = c.sn AND o.id <> c.cid) \
         RETURNING {}",
        qualified("runs", &run_cols())
    )
});

impl PgTx {
    /// [`RunTx::claim_runs`].
    pub(super) async fn claim(
        &mut self,
        host: &Host,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Run>> {
        transition(RunStatus::Pending, RunStatus::Spawning)?;
        // A host that never reported capabilities meets no requirement.
        let pairs: Vec<(String, String)> = match host.capabilities {
            None => Vec::new(),
            Some(_) => sqlx::query_as(crate::dispatch::PENDING_REQUIREMENTS_SQL)
                .fetch_all(self.conn())
                .await
                .map_err(db_err)?,
        };
        let met = crate::dispatch::requirements_met(host, &pairs);
        let sql: &str = &CLAIM_SQL;
        let rows = sqlx::query(sql)
            .bind(host.id)
            .bind(&host.name)
            .bind(labels_to_json(&host.labels()))
            .bind(limit)
            .bind(now)
            .bind(crate::dispatch::providers_json(host))
            .bind(serde_json::json!(met))
            .bind(crate::dispatch::workspace_low(host))
            .bind(crate::dispatch::allows_full(host))
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        let mut runs = all(rows, run_from_row)?;
        runs.sort_by_key(|r| (r.dispatchable_since, r.id));
        Ok(runs)
    }

    /// [`RunTx::list_pending_runs`]'s rows (columns `cols`), of those only
    /// the runs meeting `and` (a condition over `runs`).
    pub(super) async fn pending_runs(
        &mut self,
        cols: &str,
        and: &str,
        limit: i64,
    ) -> StoreResult<Vec<PgRow>> {
        let sql = format!(
            "SELECT {cols} FROM runs WHERE status = 'pending' \
             AND ((dispatchable_since IS NOT NULL \
                   AND NOT EXISTS (SELECT 1 FROM run_secret_waits w WHERE w.run_id = runs.id)) \
                  OR stop_requested) \
             AND {and} \
             ORDER BY pending_since, id LIMIT $1"
        );
        sqlx::query(&sql)
            .bind(limit)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)
    }
}

/// The columns of a [`PendingRun`] (its `Scheduled` condition's reason
/// and message picked out of `conditions` here, not in pamd).
pub(super) static PENDING_RUN_COLS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "id, project_id, provider, spec->>'providerVersion' AS provider_version, \
        target, stop_requested, dispatchable_since, dispatch_timeout_seconds, eligible_host_seen, \
        jsonb_path_query_first(conditions, '$[*] ? (@.type == \"Scheduled\")') AS scheduled, \
        {} AS uses_workspace, COALESCE({}, false) AS asks_full",
        crate::dispatch::USES_WORKSPACE_SQL,
        crate::dispatch::ASKS_FULL_SQL
    )
});

pub(super) fn pending_run_from_row(row: &PgRow) -> StoreResult<PendingRun> {
    let scheduled: Option<serde_json::Value> = get(row, "scheduled")?;
    Ok(PendingRun {
        id: get(row, "id")?,
        project_id: get(row, "project_id")?,
        provider: get(row, "provider")?,
        provider_version: get(row, "provider_version")?,
        target: target_from_json(get(row, "target")?)?,
        stop_requested: get(row, "stop_requested")?,
        dispatchable_since: get(row, "dispatchable_since")?,
        dispatch_timeout_seconds: get(row, "dispatch_timeout_seconds")?,
        eligible_host_seen: get(row, "eligible_host_seen")?,
        uses_workspace: get(row, "uses_workspace")?,
        asks_full: get(row, "asks_full")?,
        scheduled: scheduled.map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (text("reason"), text("message"))
        }),
    })
}
