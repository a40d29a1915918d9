//! Usage roll-ups: one statement each.

use super::*;

/// The usage sums of `sql`, one row per id of `ids` (`$1`).
async fn sums(
    conn: &mut sqlx::PgConnection,
    sql: &str,
    ids: &[Uuid],
) -> StoreResult<Vec<(Uuid, Usage)>> {
    let rows = sqlx::query(sql)
        .bind(ids)
        .fetch_all(conn)
        .await
        .map_err(db_err)?;
    rows.iter().map(usage_sum_from_row).collect()
}

/// [`crate::RunTx::usage_by_project`].
pub(super) async fn by_project(
    conn: &mut sqlx::PgConnection,
    project_ids: &[Uuid],
) -> StoreResult<Vec<(Uuid, Usage)>> {
    let sql = format!(
        "SELECT r.project_id AS id, {USAGE_SUMS} FROM runs r \
         WHERE r.project_id = ANY($1) GROUP BY r.project_id"
    );
    sums(conn, &sql, project_ids).await
}

/// [`crate::RunTx::usage_by_work_item`]: the subtree by materialized path
/// (the `work_items_path` index), the item itself and every path under
/// `<path>/`.
pub(super) async fn by_work_item(
    conn: &mut sqlx::PgConnection,
    item_ids: &[Uuid],
) -> StoreResult<Vec<(Uuid, Usage)>> {
    let sql = format!(
        "SELECT a.id AS id, {USAGE_SUMS} FROM work_items a \
         JOIN work_items t ON t.project_id = a.project_id \
           AND (t.path = a.path OR t.path LIKE a.path || '/%') \
         JOIN runs r ON r.task_id = t.id \
         WHERE a.id = ANY($1) GROUP BY a.id"
    );
    sums(conn, &sql, item_ids).await
}
