use super::*;

/// The tokens with these fingerprints, one statement
/// ([`crate::Store::tokens_by_fingerprints`]).
pub(super) async fn tokens_by_fingerprints<'e>(
    conn: impl sqlx::PgExecutor<'e>,
    fps: &[String],
) -> StoreResult<Vec<ApiToken>> {
    let sql = format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE fingerprint = ANY($1)");
    let rows = sqlx::query(&sql)
        .bind(fps)
        .fetch_all(conn)
        .await
        .map_err(db_err)?;
    rows.iter().map(token_from_row).collect()
}

#[async_trait]
impl TokenTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_token(&mut self, t: &ApiToken) -> StoreResult<()> {
        let sql = format!(
            "INSERT INTO api_tokens ({TOKEN_COLS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"
        );
        let q = sqlx::query(&sql)
            .bind(t.id)
            .bind(&t.name)
            .bind(token_kind_str(t.kind))
            .bind(&t.fingerprint)
            .bind(&t.host_name)
            .bind(t.created_at)
            .bind(t.last_used_at)
            .bind(t.revoked_at)
            .bind(t.role.as_str())
            .bind(&t.projects);
        self.insert_guarded(q).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_token_by_fingerprint(&mut self, fp: &str) -> StoreResult<Option<ApiToken>> {
        let fps = [fp.to_string()];
        Ok(tokens_by_fingerprints(self.conn(), &fps).await?.pop())
    }

    #[tracing::instrument(level = "debug", skip_all, fields(n = ids.len()))]
    async fn dead_tokens(&mut self, ids: &[Uuid]) -> StoreResult<Vec<Uuid>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        sqlx::query_scalar(
            "SELECT t.id FROM unnest($1::uuid[]) AS t(id) WHERE NOT EXISTS \
             (SELECT 1 FROM api_tokens a WHERE a.id = t.id AND a.revoked_at IS NULL)",
        )
        .bind(ids)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_tokens(&mut self) -> StoreResult<Vec<ApiToken>> {
        let sql = format!("SELECT {TOKEN_COLS} FROM api_tokens ORDER BY created_at, id");
        self.rows(sqlx::query(&sql), token_from_row).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn revoke_token(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<bool> {
        let q = sqlx::query(
            "UPDATE api_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
        )
        .bind(id)
        .bind(now);
        Ok(self.exec(q).await? == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn touch_tokens(
        &mut self,
        uses: &[(Uuid, DateTime<Utc>)],
        window: chrono::Duration,
    ) -> StoreResult<u64> {
        let ids: Vec<Uuid> = uses.iter().map(|u| u.0).collect();
        let ats: Vec<DateTime<Utc>> = uses.iter().map(|u| u.1).collect();
        let unless: Vec<DateTime<Utc>> = uses.iter().map(|u| u.1 - window).collect();
        let q = sqlx::query(
            "UPDATE api_tokens t SET last_used_at = u.at \
             FROM UNNEST($1::uuid[], $2::timestamptz[], $3::timestamptz[]) AS u(id, at, unless) \
             WHERE t.id = u.id AND (t.last_used_at IS NULL OR t.last_used_at < u.unless)",
        )
        .bind(ids)
        .bind(ats)
        .bind(unless);
        self.exec(q).await
    }
}
