//! Runs waiting for a Secret: each pass re-checks the waiting
//! runs (released once their Secret and key exist, waking the claimers)
//! and the other pending runs that read Secrets (a Secret deleted or a key
//! removed since makes them wait). The rule is
//! [`crate::rules::runs::env::check_wait`]; this loop only decides *when*.

use std::collections::HashSet;

use crate::ctx::Ctx;
use crate::rules::runs::env;

/// Pending runs looked at per pass beyond the waiting ones.
const PENDING_PER_PASS: i64 = 1000;

/// Returns how many runs were released.
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<usize> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let mut released = 0;
    let mut seen = HashSet::new();
    for w in tx.run_secret_waits(None).await? {
        seen.insert(w.run_id);
        if let Some(run) = tx.get_run(w.run_id).await? {
            if env::check_wait(tx.as_mut(), &run, Some(&w.message), now).await? {
                released += 1;
            }
        }
    }
    for run in tx
        .list_pending_runs_reading_secrets(PENDING_PER_PASS)
        .await?
    {
        if !seen.contains(&run.id) {
            env::check_wait(tx.as_mut(), &run, None, now).await?;
        }
    }
    ctx.commit(tx).await?;
    if released > 0 {
        ctx.wakeups.claimable.notify_waiters();
    }
    Ok(released)
}
