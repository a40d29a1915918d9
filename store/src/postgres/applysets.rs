use super::*;
use crate::applysets::{ApplySetRecord, ApplySetTx};

#[async_trait]
impl ApplySetTx for PgTx {
    async fn applyset(&mut self, name: &str) -> StoreResult<Option<ApplySetRecord>> {
        let q =
            sqlx::query("SELECT name, kinds, projects FROM applysets WHERE name = $1").bind(name);
        self.row(q, |r| {
            Ok(ApplySetRecord {
                name: get(r, "name")?,
                kinds: get(r, "kinds")?,
                projects: get(r, "projects")?,
            })
        })
        .await
    }

    async fn put_applyset(&mut self, r: &ApplySetRecord, now: DateTime<Utc>) -> StoreResult<()> {
        let q = sqlx::query(
            "INSERT INTO applysets (name, kinds, projects, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (name) DO UPDATE SET kinds = EXCLUDED.kinds, \
             projects = EXCLUDED.projects, updated_at = EXCLUDED.updated_at",
        )
        .bind(&r.name)
        .bind(&r.kinds)
        .bind(&r.projects)
        .bind(now);
        self.exec(q).await?;
        Ok(())
    }
}
