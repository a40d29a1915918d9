use super::*;

const OBJECT_COLS: &str = "source_id, kind, object_id, project, name, declared, file";

fn object_from_row(row: &PgRow) -> StoreResult<SourceObject> {
    Ok(SourceObject {
        source_id: get(row, "source_id")?,
        kind: get(row, "kind")?,
        object_id: get(row, "object_id")?,
        project: get(row, "project")?,
        name: get(row, "name")?,
        declared: get(row, "declared")?,
        file: get(row, "file")?,
    })
}

#[async_trait]
impl SourceTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn write_source_status(
        &mut self,
        s: &Source,
        clear_request: bool,
    ) -> StoreResult<Source> {
        let st = &s.status;
        let sql = format!(
            "UPDATE sources SET revision = $2, attempted_revision = $3, last_synced_at = $4, \
             last_attempt_at = $5, sync_status = $6, sync_message = $7, health = $8, \
             health_message = $9, errors = $10, drift = $11, conditions = $12, \
             observed_generation = $13, updated_at = $14, departed = $17, \
             sync_requested_at = CASE WHEN $15 AND sync_requested_at <= $16 \
                                      THEN NULL ELSE sync_requested_at END, \
             resource_version = resource_version + 1 \
             WHERE id = $1 RETURNING {}",
            source_cols()
        );
        let q = sqlx::query(&sql)
            .bind(s.id)
            .bind(&st.revision)
            .bind(&st.attempted_revision)
            .bind(st.last_synced_at)
            .bind(st.last_attempt_at)
            .bind(st.sync.as_str())
            .bind(&st.sync_message)
            .bind(st.health.as_str())
            .bind(&st.health_message)
            .bind(&st.errors)
            .bind(&st.drift)
            .bind(&s.meta.conditions)
            .bind(s.meta.observed_generation)
            .bind(s.updated_at)
            .bind(clear_request)
            .bind(st.sync_requested_at)
            .bind(&st.departed);
        self.written(q, ("sources", s.id), source_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn request_source_sync(&mut self, id: Uuid, at: DateTime<Utc>) -> StoreResult<Source> {
        let sql = format!(
            "UPDATE sources SET sync_requested_at = $2, resource_version = resource_version + 1 \
             WHERE id = $1 RETURNING {}",
            source_cols()
        );
        let q = sqlx::query(&sql).bind(id).bind(at);
        self.written(q, ("sources", id), source_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_source_objects(&mut self, source_id: Uuid) -> StoreResult<Vec<SourceObject>> {
        let sql = format!(
            "SELECT {OBJECT_COLS} FROM source_objects WHERE source_id = $1 \
             ORDER BY kind COLLATE \"C\", project COLLATE \"C\" NULLS FIRST, name COLLATE \"C\""
        );
        self.rows(sqlx::query(&sql).bind(source_id), object_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn count_source_objects(
        &mut self,
        source_ids: &[Uuid],
    ) -> StoreResult<std::collections::HashMap<Uuid, u64>> {
        let rows: Vec<(Uuid, i64)> = sqlx::query_as(
            "SELECT source_id, count(*) FROM source_objects \
             WHERE source_id = ANY($1) GROUP BY source_id",
        )
        .bind(source_ids)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        Ok(rows
            .into_iter()
            .map(|(id, n)| (id, u64::try_from(n).unwrap_or(0)))
            .collect())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn owners_of(&mut self, objects: &[(String, Uuid)]) -> StoreResult<Vec<SourceObject>> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let kinds: Vec<&str> = objects.iter().map(|(k, _)| k.as_str()).collect();
        let ids: Vec<Uuid> = objects.iter().map(|(_, id)| *id).collect();
        let sql = format!(
            "SELECT {OBJECT_COLS} FROM source_objects \
             WHERE (kind, object_id) IN (SELECT * FROM UNNEST($1::text[], $2::uuid[]))"
        );
        self.rows(sqlx::query(&sql).bind(&kinds).bind(&ids), object_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn put_source_objects(&mut self, rows: &[SourceObject]) -> StoreResult<u64> {
        if rows.is_empty() {
            return Ok(0);
        }
        let col = |f: fn(&SourceObject) -> Value| rows.iter().map(f).collect::<Vec<Value>>();
        let source_ids: Vec<Uuid> = rows.iter().map(|r| r.source_id).collect();
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
        let ids: Vec<Uuid> = rows.iter().map(|r| r.object_id).collect();
        let projects: Vec<Option<&str>> = rows.iter().map(|r| r.project.as_deref()).collect();
        let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
        let declared = col(|r| r.declared.clone());
        let files: Vec<&str> = rows.iter().map(|r| r.file.as_str()).collect();
        let q = sqlx::query(
            "INSERT INTO source_objects (source_id, kind, object_id, project, name, declared, file) \
             SELECT * FROM UNNEST($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::text[], \
                                  $6::jsonb[], $7::text[]) \
             ON CONFLICT (kind, object_id) DO UPDATE SET project = EXCLUDED.project, \
                 name = EXCLUDED.name, declared = EXCLUDED.declared, file = EXCLUDED.file \
             WHERE source_objects.source_id = EXCLUDED.source_id",
        )
        .bind(&source_ids)
        .bind(&kinds)
        .bind(&ids)
        .bind(&projects)
        .bind(&names)
        .bind(&declared)
        .bind(&files);
        self.exec(q).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_source_objects(
        &mut self,
        source_id: Uuid,
        objects: &[(String, Uuid)],
    ) -> StoreResult<()> {
        if objects.is_empty() {
            return Ok(());
        }
        let kinds: Vec<&str> = objects.iter().map(|(k, _)| k.as_str()).collect();
        let ids: Vec<Uuid> = objects.iter().map(|(_, id)| *id).collect();
        let q = sqlx::query(
            "DELETE FROM source_objects WHERE source_id = $1 \
             AND (kind, object_id) IN (SELECT * FROM UNNEST($2::text[], $3::uuid[]))",
        )
        .bind(source_id)
        .bind(&kinds)
        .bind(&ids);
        self.exec(q).await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn owned_runs(
        &mut self,
        source_id: Uuid,
    ) -> StoreResult<Vec<(String, pam_manifests::state::RunStatus)>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT o.name, r.status FROM source_objects o \
             JOIN runs r ON r.id = o.object_id \
             WHERE o.source_id = $1 AND o.kind = 'Run' \
             ORDER BY o.project COLLATE \"C\", o.name COLLATE \"C\"",
        )
        .bind(source_id)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        rows.into_iter()
            .map(|(name, status)| {
                Ok((name, status.parse().map_err(|e| corrupt("runs.status", e))?))
            })
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn owned_objects(&mut self, source_id: Uuid) -> StoreResult<Vec<OwnedObject>> {
        // One query: the inventory left-joined to each kind's table, each
        // table's meta columns under its own prefix.
        let aliased = |t: &str| {
            META_COLS
                .split(',')
                .map(|c| format!("{t}.{c} AS {t}_{c}", c = c.trim()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let sql = format!(
            "SELECT o.source_id, o.kind, o.object_id, o.project, o.name, o.declared, o.file, \
                    COALESCE(p.id, w.id, r.id) AS found, r.status AS run_status, \
                    w.status AS task_status, {}, {}, {} \
             FROM source_objects o \
             LEFT JOIN projects p ON o.kind = 'Project' AND p.id = o.object_id \
             LEFT JOIN work_items w ON o.kind = 'Task' AND w.id = o.object_id \
             LEFT JOIN runs r ON o.kind = 'Run' AND r.id = o.object_id \
             WHERE o.source_id = $1 \
             ORDER BY o.kind COLLATE \"C\", o.project COLLATE \"C\" NULLS FIRST, \
                      o.name COLLATE \"C\"",
            aliased("p"),
            aliased("w"),
            aliased("r"),
        );
        let rows = sqlx::query(&sql)
            .bind(source_id)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            let owner = object_from_row(row)?;
            let found: Option<Uuid> = get(row, "found")?;
            let prefix = match owner.kind.as_str() {
                "Project" => "p_",
                "Task" => "w_",
                _ => "r_",
            };
            let meta = match found {
                None => None,
                Some(_) => Some(Meta {
                    spec: get(row, &format!("{prefix}spec"))?,
                    labels: labels_from_json(get(row, &format!("{prefix}labels"))?)?,
                    annotations: labels_from_json(get(row, &format!("{prefix}annotations"))?)?,
                    generation: get(row, &format!("{prefix}generation"))?,
                    resource_version: get(row, &format!("{prefix}resource_version"))?,
                    observed_generation: get(row, &format!("{prefix}observed_generation"))?,
                    conditions: get(row, &format!("{prefix}conditions"))?,
                }),
            };
            let run_status = match get::<Option<String>>(row, "run_status")? {
                Some(s) => Some(s.parse().map_err(|e| corrupt("runs.status", e))?),
                None => None,
            };
            let task_status = match get::<Option<String>>(row, "task_status")? {
                Some(s) => Some(s.parse().map_err(|e| corrupt("work_items.status", e))?),
                None => None,
            };
            out.push(OwnedObject {
                owner,
                meta,
                run_status,
                task_status,
            });
        }
        Ok(out)
    }
}
