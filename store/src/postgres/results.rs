use super::*;
use crate::results::{RunResultRow, RunResultTx};

fn result_from_row(r: &sqlx::postgres::PgRow) -> StoreResult<RunResultRow> {
    Ok(RunResultRow {
        run_id: get(r, "run_id")?,
        attempt: get(r, "attempt")?,
        branch: get(r, "branch")?,
        base_commit: get(r, "base_commit")?,
        head_commit: get(r, "head_commit")?,
        commits: get(r, "commits")?,
        files_changed: get(r, "files_changed")?,
        insertions: get(r, "insertions")?,
        deletions: get(r, "deletions")?,
        patch: get(r, "patch")?,
        patch_bytes: get(r, "patch_bytes")?,
        patch_truncated: get(r, "patch_truncated")?,
        pushed: get(r, "pushed")?,
        push_message: get(r, "push_message")?,
        recorded_at: get(r, "recorded_at")?,
    })
}

#[async_trait]
impl RunResultTx for PgTx {
    async fn insert_run_results(&mut self, rows: &[RunResultRow]) -> StoreResult<()> {
        // A handful per signal batch at most (one per finished attempt
        // with a workspace): one statement each.
        for r in rows {
            let q = sqlx::query(
                "INSERT INTO run_results (run_id, attempt, branch, base_commit, head_commit,
                    commits, files_changed, insertions, deletions, patch, patch_truncated,
                    recorded_at, pushed, push_message)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
                 ON CONFLICT (run_id, attempt) DO NOTHING",
            )
            .bind(r.run_id)
            .bind(r.attempt)
            .bind(&r.branch)
            .bind(&r.base_commit)
            .bind(&r.head_commit)
            .bind(r.commits)
            .bind(r.files_changed)
            .bind(r.insertions)
            .bind(r.deletions)
            .bind(&r.patch)
            .bind(r.patch_truncated)
            .bind(r.recorded_at)
            .bind(r.pushed)
            .bind(&r.push_message);
            self.exec(q).await?;
        }
        Ok(())
    }

    async fn run_results(
        &mut self,
        run_id: Uuid,
        attempt: Option<i32>,
    ) -> StoreResult<Vec<RunResultRow>> {
        self.rows(sqlx::query(
            "SELECT *, octet_length(patch)::bigint AS patch_bytes FROM run_results WHERE run_id = $1 AND ($2::int IS NULL OR attempt = $2)
             ORDER BY attempt",
        )
        .bind(run_id)
        .bind(attempt), result_from_row).await
    }

    async fn latest_run_results(&mut self, run_ids: &[Uuid]) -> StoreResult<Vec<RunResultRow>> {
        if run_ids.is_empty() {
            return Ok(Vec::new());
        }
        self.rows(
            sqlx::query(
                "SELECT DISTINCT ON (run_id) run_id, attempt, branch, base_commit, head_commit,
                    commits, files_changed, insertions, deletions, ''::text AS patch,
                    octet_length(patch)::bigint AS patch_bytes, patch_truncated, recorded_at,
                    pushed, push_message
             FROM run_results WHERE run_id = ANY($1) ORDER BY run_id, attempt DESC",
            )
            .bind(run_ids),
            result_from_row,
        )
        .await
    }
}
