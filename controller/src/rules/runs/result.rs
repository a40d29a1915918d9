//! Workspace results: an attempt's result as the worker
//! reported it with `finished`, stored per attempt and journaled once
//! (`run.result_recorded`) — the `finished` marker makes both happen
//! exactly once, in the signal's own transaction.

use chrono::{DateTime, Utc};
use pam_manifests::kinds::RunResult;
use pam_manifests::protocol::WorkspaceResult;
use pam_store::{Run, RunResultRow, StoreResult};
use serde_json::json;

use super::RunWrites;
use crate::events::{payload, topic};

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The row for attempt `attempt` of `run`, and journals
/// `run.result_recorded` for it (without the patch: the journal is not
/// where diffs are kept).
pub async fn record<W: RunWrites + ?Sized>(
    w: &mut W,
    run: &Run,
    attempt: i32,
    r: &WorkspaceResult,
    now: DateTime<Utc>,
) -> StoreResult<RunResultRow> {
    let row = RunResultRow {
        run_id: run.id,
        attempt,
        branch: r.branch.clone(),
        base_commit: r.base_commit.clone(),
        head_commit: r.head_commit.clone(),
        commits: i32::try_from(r.commits).unwrap_or(i32::MAX),
        files_changed: i32::try_from(r.files_changed).unwrap_or(i32::MAX),
        insertions: clamp(r.insertions),
        deletions: clamp(r.deletions),
        patch: r.patch.clone(),
        patch_bytes: r.patch.len() as i64,
        patch_truncated: r.patch_truncated,
        pushed: r.pushed,
        push_message: r.push_message.clone(),
        recorded_at: now,
    };
    let p = payload::run(
        run,
        json!({
            "branch": row.branch, "base_commit": row.base_commit, "head_commit": row.head_commit,
            "commits": row.commits, "files_changed": row.files_changed,
            "insertions": row.insertions, "deletions": row.deletions,
            "patch_truncated": row.patch_truncated,
            "pushed": row.pushed, "push_message": row.push_message,
        }),
    );
    w.journal(topic::RUN_RESULT_RECORDED, p, now).await?;
    Ok(row)
}

/// A stored result as `status.result` and `pamctl result` show it.
pub fn status(r: &RunResultRow) -> RunResult {
    let n = |v: i64| u64::try_from(v).unwrap_or(0);
    RunResult {
        attempt: u32::try_from(r.attempt).unwrap_or(0),
        branch: r.branch.clone(),
        base_commit: r.base_commit.clone(),
        head_commit: r.head_commit.clone(),
        commits: u32::try_from(r.commits).unwrap_or(0),
        files_changed: u32::try_from(r.files_changed).unwrap_or(0),
        insertions: n(r.insertions),
        deletions: n(r.deletions),
        patch_bytes: u64::try_from(r.patch_bytes).unwrap_or(0),
        patch_truncated: r.patch_truncated,
        pushed: r.pushed,
        push_message: r.push_message.clone(),
    }
}
