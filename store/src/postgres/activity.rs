use super::*;
use crate::activity::{keep_newest, ActivityAppend, RunActivityTx};
use pam_manifests::protocol::{Entry, ACTIVITY_KEPT};

/// Appends and keeps the newest [`ACTIVITY_KEPT`] in one statement
/// ([`keep_newest`] in SQL): the stored items then the new, numbered, the
/// last ones kept in order.
static APPEND: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "INSERT INTO run_activity AS t (run_id, attempt, items, updated_at) \
         SELECT r, a, i, $4 FROM UNNEST($1::uuid[], $2::int4[], $3::jsonb[]) AS u(r, a, i) \
         ON CONFLICT (run_id, attempt) DO UPDATE SET updated_at = EXCLUDED.updated_at, \
           items = (SELECT COALESCE(jsonb_agg(x ORDER BY n), '[]'::jsonb) FROM ( \
             SELECT x, n FROM jsonb_array_elements(t.items || EXCLUDED.items) \
               WITH ORDINALITY AS e(x, n) ORDER BY n DESC LIMIT {ACTIVITY_KEPT}) kept)"
    )
});

#[async_trait]
impl RunActivityTx for PgTx {
    async fn append_run_activity(
        &mut self,
        appends: &[ActivityAppend],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        // One row per attempt: a statement may not update a row twice.
        let mut merged: Vec<ActivityAppend> = Vec::with_capacity(appends.len());
        for a in appends {
            match merged
                .iter_mut()
                .find(|m| (m.run_id, m.attempt) == (a.run_id, a.attempt))
            {
                Some(m) => m.items = keep_newest(std::mem::take(&mut m.items), &a.items),
                None => merged.push(ActivityAppend {
                    items: keep_newest(Vec::new(), &a.items),
                    ..a.clone()
                }),
            }
        }
        if merged.is_empty() {
            return Ok(());
        }
        let q = sqlx::query(&APPEND)
            .bind(merged.iter().map(|a| a.run_id).collect::<Vec<_>>())
            .bind(merged.iter().map(|a| a.attempt).collect::<Vec<_>>())
            .bind(
                merged
                    .iter()
                    .map(|a| serde_json::to_value(&a.items).expect("entries serialize"))
                    .collect::<Vec<_>>(),
            )
            .bind(now);
        self.exec(q).await?;
        Ok(())
    }

    async fn run_activity(&mut self, run_id: Uuid, attempt: i32) -> StoreResult<Vec<Entry>> {
        let q = sqlx::query("SELECT items FROM run_activity WHERE run_id = $1 AND attempt = $2")
            .bind(run_id)
            .bind(attempt);
        let items = self
            .row(q, |r| get::<serde_json::Value>(r, "items"))
            .await?;
        Ok(items
            .and_then(|v| serde_json::from_value(v).ok())
            .unwrap_or_default())
    }
}
