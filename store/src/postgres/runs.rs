use super::*;

#[async_trait]
impl RunTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all, fields(n = hosts.len()))]
    async fn live_runs_on_hosts(&mut self, hosts: &[Uuid]) -> StoreResult<Vec<Run>> {
        if hosts.is_empty() {
            return Ok(Vec::new());
        }
        // runs_live (the partial index on live runs) serves it.
        let sql = format!(
            "SELECT {} FROM runs WHERE host_id = ANY($1) AND {} ORDER BY created_at, id",
            run_cols(),
            crate::dispatch::LIVE_SQL
        );
        self.rows(sqlx::query(&sql).bind(hosts), run_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_run(&mut self, r: &Run) -> StoreResult<()> {
        let task_project: Option<Uuid> =
            sqlx::query_scalar("SELECT project_id FROM work_items WHERE id = $1")
                .bind(r.task_id)
                .fetch_optional(self.conn())
                .await
                .map_err(db_err)?;
        match task_project {
            None => return Err(StoreError::NotFound(format!("task {}", r.task_id))),
            Some(p) if p != r.project_id => {
                return Err(StoreError::Invalid(format!(
                    "task {} is not in project {}",
                    r.task_id, r.project_id
                )))
            }
            Some(_) => {}
        }
        let sql = format!(
            "INSERT INTO runs ({}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12,$13,$14,$15,\
             $16,$17,$18,$19,$20,$21,$22,$23,$24,$25,$26,$27,$28,$29,$30,$31,$32,$33,$34,$35,\
             $36,$37,$38,$39,$40,$41,$42,$43,$44,$45,$46,$47,$48,\
             CASE WHEN {} THEN NULL ELSE $14::timestamptz END)",
            run_cols(),
            super::deps::blocked_sql("$3::uuid")
        );
        let q = sqlx::query(&sql)
            .bind(r.id)
            .bind(r.project_id)
            .bind(r.task_id)
            .bind(&r.name)
            .bind(r.host_id)
            .bind(&r.provider)
            .bind(&r.prompt)
            .bind(&r.cwd)
            .bind(&r.session_name)
            .bind(r.status.as_str())
            .bind(r.attempt)
            .bind(r.last_progress_seq)
            .bind(r.failure_reason.map(|f| f.as_str()))
            .bind(r.pending_since)
            .bind(r.exit_code)
            .bind(r.started_at)
            .bind(r.finished_at)
            .bind(target_to_json(&r.target))
            .bind(r.max_attempts)
            .bind(r.backoff_seconds)
            .bind(r.backoff_max_seconds)
            .bind(r.dispatch_timeout_seconds)
            .bind(r.stop_requested)
            .bind(r.requeue_at)
            .bind(r.eligible_host_seen);
        let q = bind_meta!(q, r.meta)
            .bind(r.created_at)
            .bind(r.updated_at)
            .bind(&r.failure_message);
        let q = usage_values(&r.usage)
            .into_iter()
            .fold(q, |q, v| q.bind(v))
            .bind(&r.stopped_by)
            .bind(json(&r.permissions))
            .bind(&r.session_id)
            .bind(json(&r.last_activity))
            .bind(json(&r.denials));
        self.insert_guarded(q).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_run(&mut self, id: Uuid) -> StoreResult<Option<Run>> {
        let sql = format!("SELECT {} FROM runs WHERE id = $1", run_cols());
        self.one_run(&sql, id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_run_by_session(
        &mut self,
        host_id: Uuid,
        session_name: &str,
    ) -> StoreResult<Option<Run>> {
        let sql = format!(
            "SELECT {} FROM runs WHERE host_id = $1 AND session_name = $2",
            run_cols()
        );
        let q = sqlx::query(&sql).bind(host_id).bind(session_name);
        self.row(q, run_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_run_by_name(&mut self, project_id: Uuid, name: &str) -> StoreResult<Option<Run>> {
        self.named(project_id, name).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_runs(&mut self, f: &RunFilter) -> StoreResult<Vec<Run>> {
        let statuses: Option<Vec<String>> = f
            .statuses
            .as_ref()
            .map(|v| v.iter().map(|s| s.as_str().to_string()).collect());
        let sql = format!(
            "SELECT {} FROM runs WHERE ($1::uuid IS NULL OR project_id = $1) \
             AND ($2::uuid IS NULL OR task_id = $2) AND ($3::uuid IS NULL OR host_id = $3) \
             AND ($4::text[] IS NULL OR status = ANY($4)) \
             AND ($5::uuid[] IS NULL OR id = ANY($5)) ORDER BY created_at, id",
            run_cols()
        );
        let q = sqlx::query(&sql)
            .bind(f.project_id)
            .bind(f.task_id)
            .bind(f.host_id)
            .bind(statuses)
            .bind(f.ids.as_deref());
        self.rows(q, run_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all, fields(names = names.len()))]
    async fn runs_named(&mut self, project_id: Uuid, names: &[String]) -> StoreResult<Vec<Run>> {
        if names.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT {} FROM runs WHERE project_id = $1 AND name = ANY($2) ORDER BY created_at, id",
            run_cols()
        );
        let q = sqlx::query(&sql).bind(project_id).bind(names);
        self.rows(q, run_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_run_spec(&mut self, r: &Run, expected_rv: i64) -> StoreResult<Run> {
        let extra = [
            "target",
            "max_attempts",
            "backoff_seconds",
            "backoff_max_seconds",
            "dispatch_timeout_seconds",
            "stop_requested",
            "stopped_by",
        ];
        self.update_named(
            (r.id, expected_rv),
            (&r.meta, r.updated_at),
            (&extra, |q| {
                q.bind(target_to_json(&r.target))
                    .bind(r.max_attempts)
                    .bind(r.backoff_seconds)
                    .bind(r.backoff_max_seconds)
                    .bind(r.dispatch_timeout_seconds)
                    .bind(r.stop_requested)
                    .bind(r.stopped_by.clone())
            }),
            format!("run {}", r.id),
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn transition_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        from: RunStatus,
        to: RunStatus,
        update: &RunUpdate,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        transition(from, to)?;
        let sql = format!(
            "UPDATE runs SET status = $4, host_id = COALESCE($5, host_id), \
             exit_code = COALESCE($6, exit_code), \
             failure_reason = COALESCE($7, failure_reason), \
             started_at = COALESCE($8, started_at), finished_at = COALESCE($9, finished_at), \
             requeue_at = COALESCE($10, requeue_at), updated_at = $11, \
             failure_message = COALESCE($12, failure_message), \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND attempt = $2 AND status = $3 RETURNING {}",
            run_cols()
        );
        let q = sqlx::query(&sql)
            .bind(id)
            .bind(attempt)
            .bind(from.as_str())
            .bind(to.as_str())
            .bind(update.host_id)
            .bind(update.exit_code)
            .bind(update.failure_reason.map(|f| f.as_str()))
            .bind(update.started_at)
            .bind(update.finished_at)
            .bind(update.requeue_at)
            .bind(now)
            .bind(&update.failure_message);
        let why = || format!("run {id} is not {from} at attempt {attempt}");
        self.guarded_update(q, ("runs", id), why, run_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn requeue_run(
        &mut self,
        id: Uuid,
        attempt: i32,
        now: DateTime<Utc>,
    ) -> StoreResult<Run> {
        transition(RunStatus::Failed, RunStatus::Pending)?;
        let sql = format!(
            "UPDATE runs SET status = 'pending', attempt = attempt + 1, host_id = NULL, \
             started_at = NULL, finished_at = NULL, exit_code = NULL, \
             last_progress_seq = NULL, failure_reason = NULL, failure_message = NULL, \
             session_id = NULL, last_activity = NULL, denials = NULL, requeue_at = NULL, attempt_input_tokens = 0, attempt_cached_input_tokens = 0, \
             attempt_output_tokens = 0, attempt_cost_micro_usd = 0, \
             eligible_host_seen = false, pending_since = $3, updated_at = $3, \
             dispatchable_since = CASE WHEN {} THEN NULL ELSE $3 END, \
             resource_version = resource_version + 1 \
             WHERE id = $1 AND attempt = $2 AND status = 'failed' RETURNING {}",
            super::deps::blocked_sql("runs.task_id"),
            run_cols()
        );
        let q = sqlx::query(&sql).bind(id).bind(attempt).bind(now);
        let why = || format!("run {id} is not failed at attempt {attempt}");
        self.guarded_update(q, ("runs", id), why, run_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn claim_runs(
        &mut self,
        host: &Host,
        limit: i64,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Run>> {
        self.claim(host, limit, now).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_pending_runs(&mut self, limit: i64) -> StoreResult<Vec<PendingRun>> {
        let rows = self
            .pending_runs(&super::dispatch::PENDING_RUN_COLS, "TRUE", limit)
            .await?;
        all(rows, super::dispatch::pending_run_from_row)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_pending_runs_reading_secrets(&mut self, limit: i64) -> StoreResult<Vec<Run>> {
        let rows = self
            .pending_runs(&run_cols(), crate::secrets::READS_SECRETS_SQL, limit)
            .await?;
        all(rows, run_from_row)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_requeue_due(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<Vec<Run>> {
        let sql = format!(
            "SELECT {} FROM runs WHERE status = 'failed' AND requeue_at IS NOT NULL \
             AND requeue_at <= $1 AND NOT stop_requested ORDER BY requeue_at, id LIMIT $2",
            run_cols()
        );
        self.rows(sqlx::query(&sql).bind(now).bind(limit), run_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn mark_eligible_host_seen(&mut self, ids: &[Uuid]) -> StoreResult<()> {
        // A row another transaction holds (a claim taking it, a signal
        // batch, an apply) is skipped, never waited for: the flag is
        // level-triggered and the next pass sets it. Waiting here, with
        // the rows already updated locked, deadlocked against signal
        // batches locking their runs in id order (bench-queue).
        sqlx::query(
            "UPDATE runs SET eligible_host_seen = true, resource_version = resource_version + 1 \
             WHERE id IN (SELECT id FROM runs WHERE id = ANY($1) AND status = 'pending' \
               AND NOT eligible_host_seen ORDER BY id FOR UPDATE SKIP LOCKED)",
        )
        .bind(ids)
        .execute(self.conn())
        .await
        .map_err(db_err)?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn advance_progress(&mut self, id: Uuid, attempt: i32, seq: i64) -> StoreResult<bool> {
        let sql = format!(
            "UPDATE runs SET last_progress_seq = $3, resource_version = resource_version + 1 \
             WHERE id = $1 AND {}",
            crate::runs::ADVANCES_PROGRESS_SQL
        );
        let r = sqlx::query(&sql)
            .bind(id)
            .bind(attempt)
            .bind(seq)
            .execute(self.conn())
            .await
            .map_err(db_err)?;
        if r.rows_affected() == 1 {
            return Ok(true);
        }
        if !self.exists("runs", id).await? {
            return Err(StoreError::NotFound(format!("run {id}")));
        }
        Ok(false)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_runs_with_signals(
        &mut self,
        ids: &[Uuid],
    ) -> StoreResult<(Vec<Run>, Vec<SignalMarker>)> {
        if ids.is_empty() {
            return Ok((Vec::new(), Vec::new()));
        }
        let sql = format!(
            "SELECT {} FROM runs WHERE id = ANY($1) ORDER BY id FOR UPDATE",
            run_cols()
        );
        let runs = self.rows(sqlx::query(&sql).bind(ids), run_from_row).await?;
        let markers: Vec<(Uuid, i32, String)> = sqlx::query_as(
            "SELECT run_id, attempt, kind FROM processed_signals WHERE run_id = ANY($1)",
        )
        .bind(ids)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        let markers = markers
            .into_iter()
            .map(|(run_id, attempt, kind)| SignalMarker {
                run_id,
                attempt,
                kind,
            })
            .collect();
        Ok((runs, markers))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_signal_markers(
        &mut self,
        markers: &[SignalMarker],
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        if markers.is_empty() {
            return Ok(0);
        }
        self.savepoint().await?;
        let r = sqlx::query(
            "INSERT INTO processed_signals (run_id, attempt, kind, received_at) \
             SELECT r, a, k, $4 FROM UNNEST($1::uuid[], $2::int4[], $3::text[]) AS u(r, a, k) \
             ON CONFLICT DO NOTHING",
        )
        .bind(markers.iter().map(|m| m.run_id).collect::<Vec<_>>())
        .bind(markers.iter().map(|m| m.attempt).collect::<Vec<_>>())
        .bind(markers.iter().map(|m| m.kind.as_str()).collect::<Vec<_>>())
        .bind(now)
        .execute(self.conn())
        .await;
        let r = self.end_savepoint(r).await?;
        Ok(r.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn write_run_states(&mut self, runs: &[(Run, i64)]) -> StoreResult<()> {
        if runs.is_empty() {
            return Ok(());
        }
        self.savepoint().await?;
        let col = |f: &dyn Fn(&Run) -> Option<DateTime<Utc>>| -> Vec<Option<DateTime<Utc>>> {
            runs.iter().map(|(r, _)| f(r)).collect()
        };
        let r = sqlx::query(
            "UPDATE runs r SET status = u.status, host_id = u.host_id, exit_code = u.exit_code, \
             failure_reason = u.failure_reason, started_at = u.started_at, \
             finished_at = u.finished_at, requeue_at = u.requeue_at, \
             last_progress_seq = u.last_progress_seq, updated_at = u.updated_at, \
             resource_version = u.resource_version, failure_message = u.failure_message, \
             attempt_input_tokens = u.ai, attempt_cached_input_tokens = u.ac, \
             attempt_output_tokens = u.ao, attempt_cost_micro_usd = u.am, \
             total_input_tokens = u.ti, total_cached_input_tokens = u.tc, \
             total_output_tokens = u.to_, total_cost_micro_usd = u.tm, \
             session_id = u.session_id, last_activity = u.last_activity, denials = u.denials \
             FROM UNNEST($1::uuid[], $2::text[], $3::uuid[], $4::int4[], $5::text[], \
               $6::timestamptz[], $7::timestamptz[], $8::timestamptz[], $9::int8[], \
               $10::timestamptz[], $11::int8[], $12::int8[], $13::text[], \
               $14::int8[], $15::int8[], $16::int8[], $17::int8[], \
               $18::int8[], $19::int8[], $20::int8[], $21::int8[], \
               $22::text[], $23::jsonb[], $24::jsonb[]) \
               AS u(id, status, host_id, exit_code, failure_reason, started_at, finished_at, \
                    requeue_at, last_progress_seq, updated_at, resource_version, expected, \
                    failure_message, ai, ac, ao, am, ti, tc, to_, tm, \
                    session_id, last_activity, denials) \
             WHERE r.id = u.id AND r.resource_version = u.expected",
        )
        .bind(runs.iter().map(|(r, _)| r.id).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|(r, _)| r.status.as_str())
                .collect::<Vec<_>>(),
        )
        .bind(runs.iter().map(|(r, _)| r.host_id).collect::<Vec<_>>())
        .bind(runs.iter().map(|(r, _)| r.exit_code).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|(r, _)| r.failure_reason.map(|f| f.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(col(&|r| r.started_at))
        .bind(col(&|r| r.finished_at))
        .bind(col(&|r| r.requeue_at))
        .bind(
            runs.iter()
                .map(|(r, _)| r.last_progress_seq)
                .collect::<Vec<_>>(),
        )
        .bind(col(&|r| Some(r.updated_at)))
        .bind(
            runs.iter()
                .map(|(r, _)| r.meta.resource_version)
                .collect::<Vec<_>>(),
        )
        .bind(runs.iter().map(|(_, rv)| *rv).collect::<Vec<_>>())
        .bind(
            runs.iter()
                .map(|(r, _)| r.failure_message.as_deref())
                .collect::<Vec<_>>(),
        );
        let usage: Vec<[i64; 8]> = runs.iter().map(|(r, _)| usage_values(&r.usage)).collect();
        let r = (0..8)
            .fold(r, |q, i| {
                q.bind(usage.iter().map(|u| u[i]).collect::<Vec<_>>())
            })
            .bind(
                runs.iter()
                    .map(|(r, _)| r.session_id.as_deref())
                    .collect::<Vec<_>>(),
            )
            .bind(
                runs.iter()
                    .map(|(r, _)| json(&r.last_activity))
                    .collect::<Vec<_>>(),
            )
            .bind(
                runs.iter()
                    .map(|(r, _)| json(&r.denials))
                    .collect::<Vec<_>>(),
            )
            .execute(self.conn())
            .await;
        let written = match r {
            Ok(r) => r.rows_affected(),
            Err(e) => return self.end_savepoint::<()>(Err(e)).await,
        };
        if written != runs.len() as u64 {
            // All or nothing: undo the rows that did match.
            self.undo_savepoint().await?;
            return Err(StoreError::Conflict(format!(
                "{} of {} runs changed since they were read",
                runs.len() as u64 - written,
                runs.len()
            )));
        }
        self.end_savepoint(Ok(())).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_run(&mut self, id: Uuid) -> StoreResult<bool> {
        self.delete_named::<Run>(id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn usage_by_project(&mut self, project_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, Usage)>> {
        super::usage::by_project(self.conn(), project_ids).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn usage_by_work_item(&mut self, item_ids: &[Uuid]) -> StoreResult<Vec<(Uuid, Usage)>> {
        super::usage::by_work_item(self.conn(), item_ids).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn count_live_runs(&mut self, host_id: Uuid) -> StoreResult<i64> {
        let sql = format!(
            "SELECT count(*) FROM runs WHERE host_id = $1 AND {}",
            crate::dispatch::LIVE_SQL
        );
        sqlx::query_scalar(&sql)
            .bind(host_id)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn count_runs_by_status(&mut self) -> StoreResult<Vec<(RunStatus, i64)>> {
        self.count_by_status("runs").await
    }
}

/// An optional value as a nullable JSON column.
fn json<T: serde::Serialize>(v: &Option<T>) -> Option<serde_json::Value> {
    v.as_ref()
        .map(|v| serde_json::to_value(v).expect("stored values serialize"))
}
