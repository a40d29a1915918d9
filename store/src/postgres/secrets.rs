use super::*;
use crate::{Secret, SecretWait};

fn secret_cols() -> String {
    format!(
        "id, project_id, name, {META_COLS}, salt, key_id, nonce, ciphertext, created_at, updated_at"
    )
}

fn secret_from_row(row: &PgRow) -> StoreResult<Secret> {
    Ok(Secret {
        id: get(row, "id")?,
        project_id: get(row, "project_id")?,
        name: get(row, "name")?,
        meta: meta_from_row(row)?,
        salt: get(row, "salt")?,
        key_id: get(row, "key_id")?,
        nonce: get(row, "nonce")?,
        ciphertext: get(row, "ciphertext")?,
        created_at: get(row, "created_at")?,
        updated_at: get(row, "updated_at")?,
    })
}

fn wait_from_row(row: &PgRow) -> StoreResult<SecretWait> {
    Ok(SecretWait {
        run_id: get(row, "run_id")?,
        message: get(row, "message")?,
        since: get(row, "since")?,
    })
}

#[async_trait]
impl SecretTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_secret(&mut self, s: &Secret) -> StoreResult<()> {
        let sql = insert_sql::<Secret>();
        let q = sqlx::query(&sql)
            .bind(s.id)
            .bind(s.project_id)
            .bind(&s.name);
        let q = bind_meta!(q, s.meta)
            .bind(&s.salt)
            .bind(&s.key_id)
            .bind(&s.nonce)
            .bind(&s.ciphertext)
            .bind(s.created_at)
            .bind(s.updated_at);
        self.insert_guarded(q).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_secret(&mut self, id: Uuid) -> StoreResult<Option<Secret>> {
        self.named_by_id(id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_secret_by_name(
        &mut self,
        project_id: Uuid,
        name: &str,
    ) -> StoreResult<Option<Secret>> {
        self.named(Some(project_id), name).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_secrets(&mut self, project_id: Uuid) -> StoreResult<Vec<Secret>> {
        self.all_named(Some(project_id)).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_secret(&mut self, s: &Secret, expected_rv: i64) -> StoreResult<Secret> {
        self.update_named(
            (s.id, expected_rv),
            (&s.meta, s.updated_at),
            (&["salt", "key_id", "nonce", "ciphertext"], |q| {
                q.bind(s.salt.clone())
                    .bind(s.key_id.clone())
                    .bind(s.nonce.clone())
                    .bind(s.ciphertext.clone())
            }),
            format!("secret {}", s.id),
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delete_secret(&mut self, id: Uuid) -> StoreResult<bool> {
        self.delete_named::<Secret>(id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn secrets_sealed_with_other(
        &mut self,
        key_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Secret>> {
        let sql = format!(
            "SELECT {} FROM secrets WHERE key_id <> $1 ORDER BY id LIMIT $2",
            secret_cols()
        );
        self.rows(sqlx::query(&sql).bind(key_id).bind(limit), secret_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn secrets_sealed_with(&mut self, key_id: &str) -> StoreResult<bool> {
        let row = sqlx::query("SELECT EXISTS (SELECT 1 FROM secrets WHERE key_id = $1) AS any")
            .bind(key_id)
            .fetch_one(self.conn())
            .await
            .map_err(db_err)?;
        get(&row, "any")
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn set_run_secret_wait(
        &mut self,
        run_id: Uuid,
        wait: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        match wait {
            None => {
                let q = sqlx::query(
                    "WITH d AS (DELETE FROM run_secret_waits WHERE run_id = $1 RETURNING run_id) \
                     UPDATE runs SET dispatchable_since = $2, updated_at = $2, \
                     resource_version = resource_version + 1 FROM d \
                     WHERE runs.id = d.run_id AND runs.status = 'pending' \
                     AND runs.dispatchable_since IS NOT NULL",
                )
                .bind(run_id)
                .bind(now);
                self.exec(q).await?;
                Ok(())
            }
            Some(message) => {
                let q = sqlx::query(
                    "INSERT INTO run_secret_waits (run_id, message, since) VALUES ($1, $2, $3) \
                     ON CONFLICT (run_id) DO UPDATE SET message = EXCLUDED.message",
                )
                .bind(run_id)
                .bind(message)
                .bind(now);
                self.insert_guarded(q).await
            }
        }
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn run_secret_waits(&mut self, run_ids: Option<&[Uuid]>) -> StoreResult<Vec<SecretWait>> {
        let rows = match run_ids {
            Some(ids) => {
                sqlx::query(
                    "SELECT run_id, message, since FROM run_secret_waits WHERE run_id = ANY($1) \
                 ORDER BY run_id",
                )
                .bind(ids)
                .fetch_all(self.conn())
                .await
            }
            None => {
                sqlx::query("SELECT run_id, message, since FROM run_secret_waits ORDER BY run_id")
                    .fetch_all(self.conn())
                    .await
            }
        }
        .map_err(db_err)?;
        all(rows, wait_from_row)
    }
}

impl super::named::Named for Secret {
    const TABLE: &'static str = "secrets";
    const SCOPE: Option<&'static str> = Some("project_id");
    fn cols() -> String {
        secret_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        secret_from_row(row)
    }
}
