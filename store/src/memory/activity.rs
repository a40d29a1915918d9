use super::*;
use crate::activity::{keep_newest, ActivityAppend, RunActivityTx};
use pam_manifests::protocol::Entry;

#[async_trait]
impl RunActivityTx for MemTx {
    async fn append_run_activity(
        &mut self,
        appends: &[ActivityAppend],
        _now: DateTime<Utc>,
    ) -> StoreResult<()> {
        if let Some(a) = appends
            .iter()
            .find(|a| !self.work.runs.contains_key(&a.run_id))
        {
            return Err(not_found("run", a.run_id));
        }
        for a in appends {
            let old = self
                .work
                .activity
                .remove(&(a.run_id, a.attempt))
                .unwrap_or_default();
            self.work
                .activity
                .insert((a.run_id, a.attempt), keep_newest(old, &a.items));
        }
        Ok(())
    }

    async fn run_activity(&mut self, run_id: Uuid, attempt: i32) -> StoreResult<Vec<Entry>> {
        Ok(self
            .work
            .activity
            .get(&(run_id, attempt))
            .cloned()
            .unwrap_or_default())
    }
}
