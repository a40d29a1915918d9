//! The controller loops. Each is level-triggered (kube-rs style): it is told
//! nothing about why it runs, reads the rows that need action (index-driven,
//! never the whole history), and acts idempotently through guarded writes.
//! A wake-up (a write, a worker report) only makes it sooner; the periodic
//! resync makes it correct. Time comes from the injected clock.
//!
//! A loop decides *which* rows need action and *when*; the change itself
//! is a rule ([`crate::rules`]). One file per loop: [`dispatch`] (claims),
//! [`gate`] (task dependencies: unblock, re-block, dependency_cancelled),
//! [`timeout`] (dispatch timeout, pending stops), [`restart`] (requeue
//! with backoff), [`liveness`] (offline hosts, host_lost), [`integrity`],
//! [`retention`]; [`ingest`] applies worker signals.

pub mod budget;
pub mod dispatch;
pub mod gate;
pub mod ingest;
pub mod integrity;
pub mod liveness;
pub mod restart;
pub mod retention;
pub mod schedule;
pub mod secrets;
pub mod timeout;
pub mod webhooks;

use pam_store::{StoreError, StoreResult};
use tokio_util::sync::CancellationToken;

use crate::ctx::Ctx;

/// What one pass of the loops did (for tests and loop-duration metrics).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Pass {
    pub hosts_offline: usize,
    pub runs_host_lost: usize,
    pub runs_timed_out: usize,
    pub runs_stopped: usize,
    pub runs_requeued: usize,
    /// Pending runs whose task dependencies became all done (issue 17).
    pub runs_unblocked: usize,
    /// Pending runs failed because a dependency was cancelled.
    pub runs_dependency_cancelled: usize,
}

/// One pass of every periodic loop, in dependency order: liveness first (it
/// fails runs the restart loop then requeues), then the dependency gate
/// (so the timeout sees who became dispatchable), timeouts and restarts.
///
/// A pass that fails because the database does not answer (`Store::ready`
/// fails too) makes pamd blind to the workers' reports; the next pass
/// starts observing the fleet again ([`Ctx::lost_sight`]), so hosts get a
/// full offline window once the database is back.
pub async fn pass(ctx: &Ctx) -> anyhow::Result<Pass> {
    ctx.begin_observing_pass(ctx.now());
    match sweep_all(ctx).await {
        Ok(p) => {
            ctx.pass_succeeded();
            Ok(p)
        }
        Err(e) => {
            if ctx.store.ready().await.is_err() {
                ctx.lost_sight();
            }
            Err(e)
        }
    }
}

async fn sweep_all(ctx: &Ctx) -> anyhow::Result<Pass> {
    let mut p = Pass::default();
    let started = std::time::Instant::now();
    let (offline, lost) = liveness::sweep(ctx).await?;
    ctx.metrics.loop_took("liveness", started);
    p.hosts_offline = offline;
    p.runs_host_lost = lost;
    let started = std::time::Instant::now();
    let gated = gate::sweep(ctx).await?;
    ctx.metrics.loop_took("gate", started);
    p.runs_unblocked = gated.unblocked;
    p.runs_dependency_cancelled = gated.dependency_cancelled;
    if gated.unblocked > 0 {
        ctx.claimable.notify_waiters();
    }
    let started = std::time::Instant::now();
    schedule::sweep(ctx).await?;
    ctx.metrics.loop_took("schedule", started);
    let started = std::time::Instant::now();
    secrets::sweep(ctx).await?;
    ctx.metrics.loop_took("secrets", started);
    let started = std::time::Instant::now();
    let budgets = budget::sweep(ctx).await?;
    ctx.metrics.loop_took("budget", started);
    if budgets.restored > 0 {
        ctx.claimable.notify_waiters();
    }
    let started = std::time::Instant::now();
    let (timed_out, stopped) = timeout::sweep(ctx).await?;
    ctx.metrics.loop_took("timeout", started);
    p.runs_timed_out = timed_out;
    p.runs_stopped = stopped;
    let started = std::time::Instant::now();
    p.runs_requeued = restart::sweep(ctx).await?;
    ctx.metrics.loop_took("restart", started);
    if p.runs_requeued > 0 {
        ctx.claimable.notify_waiters();
    }
    Ok(p)
}

/// How often the integrity check runs (its cost is per active run, so it
/// is not part of every pass; only out-of-band SQL can break integrity).
const INTEGRITY_EVERY: chrono::Duration = chrono::Duration::minutes(5);

/// Runs [`pass`] every resync period or on a wake-up, until `shutdown`;
/// the integrity check at start and every few minutes.
pub async fn run_loops(ctx: Ctx, shutdown: CancellationToken) {
    let mut integrity_due = ctx.now();
    loop {
        if ctx.now() >= integrity_due {
            integrity_due = ctx.now() + INTEGRITY_EVERY;
            let started = std::time::Instant::now();
            if let Err(e) = integrity::sweep(&ctx).await {
                tracing::error!(error = %e, "integrity check failed");
            }
            if let Err(e) = retention::purge_idempotency_keys(&ctx).await {
                tracing::warn!(error = %e, "cannot purge expired idempotency keys");
            }
            ctx.metrics.loop_took("integrity", started);
        }
        if let Err(e) = pass(&ctx).await {
            tracing::error!(error = %e, "reconcile pass failed; retrying on the next resync");
        }
        tokio::select! {
            _ = tokio::time::sleep(ctx.thresholds.resync) => {}
            _ = ctx.wake.notified() => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

/// `Ok(None)` on a guarded-update conflict: another writer moved the row
/// first, which a level-triggered loop treats as "nothing to do now".
pub(crate) fn ignore_conflict<T>(r: StoreResult<T>) -> StoreResult<Option<T>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(StoreError::Conflict(_)) => Ok(None),
        Err(e) => Err(e),
    }
}
