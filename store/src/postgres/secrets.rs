use super::named::{Named, PgQuery, Table};
use super::*;
use crate::{Secret, SecretWait};

/// In the order [`Table::bind_insert`] binds.
fn secret_cols() -> String {
    let own = Secret::OWN.join(", ");
    format!("id, project_id, name, {META_COLS}, {own}, created_at, updated_at")
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

impl Named for Secret {
    const TABLE: &'static str = "secrets";
    fn cols() -> String {
        secret_cols()
    }
    fn from_row(row: &PgRow) -> StoreResult<Self> {
        secret_from_row(row)
    }
}

impl Table for Secret {
    fn bind_insert<'q>(&'q self, q: PgQuery<'q>) -> PgQuery<'q> {
        let q = q.bind(self.id).bind(self.project_id).bind(&self.name);
        self.bind_own(bind_meta!(q, self.meta))
            .bind(self.created_at)
            .bind(self.updated_at)
    }
    const OWN: &'static [&'static str] = &["salt", "key_id", "nonce", "ciphertext"];
    fn bind_own<'q>(&self, q: PgQuery<'q>) -> PgQuery<'q> {
        q.bind(self.salt.clone())
            .bind(self.key_id.clone())
            .bind(self.nonce.clone())
            .bind(self.ciphertext.clone())
    }
}
