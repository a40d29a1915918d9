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
    /// Pending runs whose task dependencies became all done.
    pub runs_unblocked: usize,
    /// Pending runs failed because a dependency was cancelled.
    pub runs_dependency_cancelled: usize,
}

/// One pass of every periodic loop, in dependency order: liveness first (it
/// fails runs the restart loop then requeues), then the dependency gate
/// (so the timeout sees who became dispatchable), timeouts and restarts.
///
/// # Guarantees
/// - Sweeps are isolated: one sweep's error is logged with its
///   loop's name, counted in `pam_loop_errors_total{loop}` and retried on
///   the next pass; the sweeps after it still run. The pass then returns
///   the errors (after every sweep ran).
/// - A pass that fails because the database does not answer
///   (`Store::ready` fails too) makes pamd blind to the workers' reports;
///   the next pass starts observing the fleet again ([`Ctx::lost_sight`]),
///   so hosts get a full offline window once the database is back. A sweep
///   that fails while the database answers does not.
pub async fn pass(ctx: &Ctx) -> anyhow::Result<Pass> {
    ctx.begin_observing_pass(ctx.now());
    let mut failed = Failed::default();
    let p = sweep_all(ctx, &mut failed).await;
    if failed.0.is_empty() {
        ctx.pass_succeeded();
        return Ok(p);
    }
    if ctx.store.ready().await.is_err() {
        ctx.lost_sight();
    } else {
        ctx.pass_succeeded();
    }
    Err(anyhow::anyhow!(
        "{} sweep(s) failed: {}",
        failed.0.len(),
        failed
            .0
            .iter()
            .map(|(name, e)| format!("{name}: {e:#}"))
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

/// The sweeps of a pass that failed, by loop name.
#[derive(Default)]
struct Failed(Vec<(&'static str, anyhow::Error)>);

impl Failed {
    /// Runs one sweep: times it, and on an error logs and counts it and
    /// gives the sweep's default (nothing done) so the pass goes on.
    async fn sweep<T: Default>(
        &mut self,
        ctx: &Ctx,
        name: &'static str,
        sweep: impl std::future::Future<Output = anyhow::Result<T>>,
    ) -> T {
        let started = std::time::Instant::now();
        let r = sweep.await;
        ctx.metrics.loop_took(name, started);
        match r {
            Ok(v) => v,
            Err(e) => {
                tracing::error!(r#loop = name, error = %format!("{e:#}"), "a loop sweep failed; the others ran, it is retried on the next pass");
                ctx.metrics.loop_failed(name);
                self.0.push((name, e));
                T::default()
            }
        }
    }
}

async fn sweep_all(ctx: &Ctx, failed: &mut Failed) -> Pass {
    let mut p = Pass::default();
    let (offline, lost) = failed.sweep(ctx, "liveness", liveness::sweep(ctx)).await;
    p.hosts_offline = offline;
    p.runs_host_lost = lost;
    let gated = failed.sweep(ctx, "gate", gate::sweep(ctx)).await;
    p.runs_unblocked = gated.unblocked;
    p.runs_dependency_cancelled = gated.dependency_cancelled;
    if gated.unblocked > 0 {
        ctx.wakeups.claimable.notify_waiters();
    }
    failed.sweep(ctx, "schedule", schedule::sweep(ctx)).await;
    failed.sweep(ctx, "secrets", secrets::sweep(ctx)).await;
    let budgets = failed.sweep(ctx, "budget", budget::sweep(ctx)).await;
    if budgets.restored > 0 {
        ctx.wakeups.claimable.notify_waiters();
    }
    let (timed_out, stopped) = failed.sweep(ctx, "timeout", timeout::sweep(ctx)).await;
    p.runs_timed_out = timed_out;
    p.runs_stopped = stopped;
    p.runs_requeued = failed.sweep(ctx, "restart", restart::sweep(ctx)).await;
    if p.runs_requeued > 0 {
        ctx.wakeups.claimable.notify_waiters();
    }
    p
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
            _ = ctx.wakeups.loops.notified() => {}
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
