use super::*;
use crate::results::{RunResultRow, RunResultTx};

#[async_trait]
impl RunResultTx for MemTx {
    async fn insert_run_results(&mut self, rows: &[RunResultRow]) -> StoreResult<()> {
        if let Some(r) = rows
            .iter()
            .find(|r| !self.work.runs.contains_key(&r.run_id))
        {
            return Err(not_found("run", r.run_id));
        }
        for r in rows {
            self.work
                .results
                .entry((r.run_id, r.attempt))
                .or_insert_with(|| RunResultRow {
                    patch_bytes: r.patch.len() as i64,
                    ..r.clone()
                });
        }
        Ok(())
    }

    async fn run_results(
        &mut self,
        run_id: Uuid,
        attempt: Option<i32>,
    ) -> StoreResult<Vec<RunResultRow>> {
        Ok(self
            .work
            .results
            .range((run_id, i32::MIN)..=(run_id, i32::MAX))
            .filter(|((_, a), _)| attempt.is_none_or(|n| n == *a))
            .map(|(_, r)| r.clone())
            .collect())
    }

    async fn latest_run_results(&mut self, run_ids: &[Uuid]) -> StoreResult<Vec<RunResultRow>> {
        let mut latest: BTreeMap<Uuid, RunResultRow> = BTreeMap::new();
        for ((run, _), r) in &self.work.results {
            if run_ids.contains(run) {
                // In attempt order: the last one wins.
                latest.insert(
                    *run,
                    RunResultRow {
                        patch: String::new(),
                        ..r.clone()
                    },
                );
            }
        }
        Ok(latest.into_values().collect())
    }
}
