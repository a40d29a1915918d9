//! The schedule loop: each pass gives every Schedule its due
//! tick, one transaction per Schedule, through
//! [`crate::rules::schedules::tick`] — which takes the tick with a guarded
//! update in the transaction that creates its run, so a restarted pamd or
//! a second replica never doubles a tick. Time is the injected clock's.

use pam_store::{Project, StoreError};

use crate::ctx::Ctx;
use crate::rules::schedules::{self, Tick};

/// Returns how many runs the pass created.
pub async fn sweep(ctx: &Ctx) -> anyhow::Result<usize> {
    let now = ctx.now();
    let all = {
        let mut tx = ctx.store.begin().await?;
        tx.list_all_schedules().await?
    };
    let mut created = 0;
    for s in all {
        let mut tx = ctx.store.begin().await?;
        let Some(project) = tx.get::<Project>(s.project_id).await? else {
            continue;
        };
        match schedules::tick(tx.as_mut(), &s, &project.slug, now).await {
            Ok(None) => {}
            Ok(Some(t)) => {
                ctx.commit(tx).await?;
                if matches!(t, Tick::Created(_)) {
                    created += 1;
                }
            }
            // Another pass took this tick first (its transaction has the
            // run): nothing to do.
            Err(StoreError::Conflict(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    if created > 0 {
        ctx.wakeups.claimable.notify_waiters();
    }
    Ok(created)
}
