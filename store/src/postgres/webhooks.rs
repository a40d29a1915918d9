use super::*;
use crate::webhooks::{Delivery, DeliveryFilter, DeliveryOutcome, DeliveryStatus, Webhook};

const DELIVERY_COLS: &str = "id, webhook_id, event_seq, topic, payload, status, attempts, \
    next_attempt_at, last_attempt_at, last_code, last_error, created_at";

fn delivery_from_row(row: &PgRow) -> StoreResult<Delivery> {
    let status: String = get(row, "status")?;
    Ok(Delivery {
        id: get(row, "id")?,
        webhook_id: get(row, "webhook_id")?,
        event_seq: get(row, "event_seq")?,
        topic: get(row, "topic")?,
        payload: get(row, "payload")?,
        status: DeliveryStatus::parse(&status).ok_or_else(|| corrupt("status", &status))?,
        attempts: get(row, "attempts")?,
        next_attempt_at: get(row, "next_attempt_at")?,
        last_attempt_at: get(row, "last_attempt_at")?,
        last_code: get(row, "last_code")?,
        last_error: get(row, "last_error")?,
        created_at: get(row, "created_at")?,
    })
}

impl PgTx {
    async fn one_delivery(&mut self, sql: &str, id: Uuid) -> StoreResult<Option<Delivery>> {
        self.row(sqlx::query(sql).bind(id), delivery_from_row).await
    }
}

#[async_trait]
impl WebhookTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn webhook_targets(&mut self) -> StoreResult<Vec<(Webhook, Vec<Uuid>)>> {
        let sql = format!(
            "SELECT {}, ARRAY(SELECT p.id FROM projects p WHERE p.slug IN \
               (SELECT jsonb_array_elements_text(COALESCE(w.spec->'projects', '[]'::jsonb))) \
               ORDER BY p.id) AS project_ids \
             FROM webhooks w ORDER BY name COLLATE \"C\"",
            webhook_cols()
                .split(", ")
                .map(|c| format!("w.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let rows = sqlx::query(&sql)
            .fetch_all(self.conn())
            .await
            .map_err(db_err)?;
        rows.iter()
            .map(|r| Ok((webhook_from_row(r)?, get(r, "project_ids")?)))
            .collect()
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_deliveries(&mut self, rows: &[Delivery]) -> StoreResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        for chunk in rows.chunks(5000) {
            let q = sqlx::query(
                "INSERT INTO webhook_deliveries (id, webhook_id, event_seq, topic, payload, \
                   status, attempts, next_attempt_at, created_at) \
                 SELECT i, w, s, t, p, 'pending', 0, n, c \
                 FROM UNNEST($1::uuid[], $2::uuid[], $3::bigint[], $4::text[], $5::jsonb[], \
                             $6::timestamptz[], $7::timestamptz[]) AS u(i, w, s, t, p, n, c) \
                 ON CONFLICT (webhook_id, event_seq) DO NOTHING",
            )
            .bind(chunk.iter().map(|d| d.id).collect::<Vec<_>>())
            .bind(chunk.iter().map(|d| d.webhook_id).collect::<Vec<_>>())
            .bind(chunk.iter().map(|d| d.event_seq).collect::<Vec<_>>())
            .bind(chunk.iter().map(|d| d.topic.as_str()).collect::<Vec<_>>())
            .bind(chunk.iter().map(|d| &d.payload).collect::<Vec<_>>())
            .bind(
                chunk
                    .iter()
                    .map(|d| d.next_attempt_at.unwrap_or(d.created_at))
                    .collect::<Vec<_>>(),
            )
            .bind(chunk.iter().map(|d| d.created_at).collect::<Vec<_>>());
            self.exec(q).await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn get_delivery(&mut self, id: Uuid) -> StoreResult<Option<Delivery>> {
        let sql = format!("SELECT {DELIVERY_COLS} FROM webhook_deliveries WHERE id = $1");
        self.one_delivery(&sql, id).await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn pending_deliveries(
        &mut self,
        webhook: Uuid,
        limit: i64,
    ) -> StoreResult<Vec<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLS} FROM webhook_deliveries \
             WHERE webhook_id = $1 AND status = 'pending' ORDER BY event_seq LIMIT $2"
        );
        self.rows(
            sqlx::query(&sql).bind(webhook).bind(limit),
            delivery_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn webhooks_due(&mut self, now: DateTime<Utc>) -> StoreResult<Vec<Uuid>> {
        sqlx::query_scalar(
            "SELECT DISTINCT webhook_id FROM webhook_deliveries \
             WHERE status = 'pending' AND next_attempt_at <= $1",
        )
        .bind(now)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn record_delivery(&mut self, id: Uuid, o: &DeliveryOutcome) -> StoreResult<Delivery> {
        let sql = format!(
            "UPDATE webhook_deliveries SET status = $2, attempts = $3, next_attempt_at = $4, \
             last_attempt_at = $5, last_code = $6, last_error = $7 \
             WHERE id = $1 AND status = 'pending' AND attempts = $3 - 1 \
             RETURNING {DELIVERY_COLS}"
        );
        let q = sqlx::query(&sql)
            .bind(id)
            .bind(o.status.as_str())
            .bind(o.attempts)
            .bind(o.next_attempt_at)
            .bind(o.at)
            .bind(o.code)
            .bind(&o.error);
        let why = || format!("delivery {id} is not pending at attempt {}", o.attempts - 1);
        self.guarded_update(q, ("webhook_deliveries", id), why, delivery_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn redeliver(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<Delivery> {
        let sql = format!(
            "UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = $2 \
             WHERE id = $1 RETURNING {DELIVERY_COLS}"
        );
        let q = sqlx::query(&sql).bind(id).bind(now);
        self.written(q, ("webhook_deliveries", id), delivery_from_row)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn list_deliveries(&mut self, f: &DeliveryFilter) -> StoreResult<Vec<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLS} FROM webhook_deliveries \
             WHERE ($1::uuid IS NULL OR webhook_id = $1) AND ($2::text IS NULL OR status = $2) \
             ORDER BY event_seq DESC, webhook_id LIMIT $3"
        );
        self.rows(
            sqlx::query(&sql)
                .bind(f.webhook_id)
                .bind(f.status.map(DeliveryStatus::as_str))
                .bind(f.limit),
            delivery_from_row,
        )
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn delivery_counts(&mut self) -> StoreResult<HashMap<Uuid, (u64, u64)>> {
        let rows: Vec<(Uuid, i64, i64)> = sqlx::query_as(
            "SELECT webhook_id, count(*) FILTER (WHERE status = 'pending'), \
                    count(*) FILTER (WHERE status = 'failed') \
             FROM webhook_deliveries WHERE status IN ('pending', 'failed') GROUP BY webhook_id",
        )
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        Ok(rows
            .into_iter()
            .map(|(w, p, f)| (w, (p as u64, f as u64)))
            .collect())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn purge_deliveries_before(&mut self, cutoff: DateTime<Utc>) -> StoreResult<u64> {
        let q = sqlx::query(
            "DELETE FROM webhook_deliveries WHERE created_at < $1 AND status <> 'pending'",
        )
        .bind(cutoff);
        self.exec(q).await
    }
}
