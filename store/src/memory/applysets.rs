use super::*;
use crate::applysets::{ApplySetRecord, ApplySetTx};

#[async_trait]
impl ApplySetTx for MemTx {
    async fn applyset(&mut self, name: &str) -> StoreResult<Option<ApplySetRecord>> {
        Ok(self.work.applysets.get(name).cloned())
    }

    async fn put_applyset(&mut self, r: &ApplySetRecord, _now: DateTime<Utc>) -> StoreResult<()> {
        self.work.applysets.insert(r.name.clone(), r.clone());
        Ok(())
    }
}
