use super::*;
use crate::managed::{ManagedFields, ManagedFieldsTx};

#[async_trait]
impl ManagedFieldsTx for MemTx {
    async fn managed_fields_of(
        &mut self,
        objects: &[(String, Uuid)],
    ) -> StoreResult<Vec<ManagedFields>> {
        Ok(objects
            .iter()
            .filter_map(|(kind, id)| {
                let entries = self.work.managed.get(&(kind.clone(), *id))?;
                Some(ManagedFields {
                    kind: kind.clone(),
                    object_id: *id,
                    entries: entries.clone(),
                })
            })
            .collect())
    }

    async fn insert_managed_fields(&mut self, rows: &[ManagedFields]) -> StoreResult<()> {
        if let Some(r) = rows.iter().find(|r| {
            self.work
                .managed
                .contains_key(&(r.kind.clone(), r.object_id))
        }) {
            return Err(StoreError::AlreadyExists(format!(
                "managed_fields_pkey: {} {}",
                r.kind, r.object_id
            )));
        }
        self.put_managed_fields(rows).await
    }

    async fn put_managed_fields(&mut self, rows: &[ManagedFields]) -> StoreResult<()> {
        for r in rows {
            let key = (r.kind.clone(), r.object_id);
            if r.entries.is_empty() {
                self.work.managed.remove(&key);
            } else {
                self.work.managed.insert(key, r.entries.clone());
            }
        }
        Ok(())
    }
}
