use super::*;
use crate::{Secret, SecretWait};

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
