use super::*;
use crate::managed::{ManagedEntry, ManagedFields, ManagedFieldsTx};

fn entries_json(entries: &[ManagedEntry]) -> StoreResult<Value> {
    serde_json::to_value(entries).map_err(|e| StoreError::Database(e.to_string()))
}

#[async_trait]
impl ManagedFieldsTx for PgTx {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn managed_fields_of(
        &mut self,
        objects: &[(String, Uuid)],
    ) -> StoreResult<Vec<ManagedFields>> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let kinds: Vec<&str> = objects.iter().map(|(k, _)| k.as_str()).collect();
        let ids: Vec<Uuid> = objects.iter().map(|(_, id)| *id).collect();
        // The entries as text, parsed straight into their type (no JSON
        // tree in between: a big apply reads thousands).
        let rows = sqlx::query(
            "SELECT kind, object_id, entries::text AS entries FROM managed_fields \
             WHERE (kind, object_id) IN (SELECT * FROM UNNEST($1::text[], $2::uuid[]))",
        )
        .bind(&kinds)
        .bind(&ids)
        .fetch_all(self.conn())
        .await
        .map_err(db_err)?;
        all(rows, |r| {
            let entries: String = get(r, "entries")?;
            Ok(ManagedFields {
                kind: get(r, "kind")?,
                object_id: get(r, "object_id")?,
                entries: serde_json::from_str(&entries)
                    .map_err(|e| StoreError::Database(format!("managed_fields.entries: {e}")))?,
            })
        })
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_managed_fields(&mut self, rows: &[ManagedFields]) -> StoreResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let mut data = String::with_capacity(rows.len() * 160);
        for r in rows {
            copy_text(&mut data, &r.kind);
            data.push('\t');
            data.push_str(&r.object_id.to_string());
            data.push('\t');
            copy_json(&mut data, &r.entries);
            data.push('\n');
        }
        self.copy_in(
            "COPY managed_fields (kind, object_id, entries) FROM STDIN",
            data.as_bytes(),
        )
        .await
        .map_err(db_err)?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn put_managed_fields(&mut self, rows: &[ManagedFields]) -> StoreResult<()> {
        if rows.is_empty() {
            return Ok(());
        }
        let kinds: Vec<&str> = rows.iter().map(|r| r.kind.as_str()).collect();
        let ids: Vec<Uuid> = rows.iter().map(|r| r.object_id).collect();
        let entries = rows
            .iter()
            .map(|r| entries_json(&r.entries))
            .collect::<StoreResult<Vec<Value>>>()?;
        // One statement for the batch: the emptied records deleted, the
        // others upserted (a data-modifying CTE runs whether or not the
        // outer statement reads it).
        let q = sqlx::query(
            "WITH input AS ( \
                 SELECT * FROM UNNEST($1::text[], $2::uuid[], $3::jsonb[]) AS i(kind, object_id, entries)), \
             gone AS ( \
                 DELETE FROM managed_fields m USING input i \
                 WHERE m.kind = i.kind AND m.object_id = i.object_id AND i.entries = '[]'::jsonb) \
             INSERT INTO managed_fields (kind, object_id, entries) \
             SELECT kind, object_id, entries FROM input WHERE entries <> '[]'::jsonb \
             ON CONFLICT (kind, object_id) DO UPDATE SET entries = EXCLUDED.entries",
        )
        .bind(&kinds)
        .bind(&ids)
        .bind(&entries);
        self.exec(q).await?;
        Ok(())
    }
}
