//! Leader election among pamd replicas: every replica serves
//! the API, the dashboard and SSE; the loops (reconcile and GitOps sync)
//! run on the one that holds the `loops` lease in PostgreSQL
//! ([`pam_store::LeaderTx`]), like a Kubernetes Lease.
//!
//! # Guarantees
//! - The lease is renewed every third of its TTL; another replica takes it
//!   once it expired, so the loops move within 2× the TTL of a leader's
//!   death (the TTL to expire, a third of it to notice).
//! - Every loop commit is fenced by the term ([`crate::ctx::Fence`]): a
//!   leader that lost the lease — paused past it, cut off from the
//!   database — writes nothing, even before it learns that it lost.
//! - A leader that cannot renew steps down when its lease would have
//!   expired by its own clock, before another can have taken over.
//! - pamd stopping resigns: the next replica leads at once.
//!
//! # Caveats
//! - Expiry compares the replicas' clocks (the injected clock, like a
//!   Kubernetes Lease's renewTime): keep them in sync (NTP). Fencing does
//!   not depend on clocks.
//! - A replica is its data dir (`<data dir>/replica-id`): two pamds on one
//!   data dir are one replica to the election.

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::ctx::{Ctx, Fence};

/// The lease the loops run under.
pub const LOOPS_LEASE: &str = "loops";

/// This replica's stable id: `<data dir>/replica-id`, made once.
pub fn replica_id(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("replica-id");
    if let Ok(id) = std::fs::read_to_string(&path) {
        let id = id.trim();
        if !id.is_empty() {
            return Ok(id.to_string());
        }
    }
    std::fs::create_dir_all(data_dir)?;
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let host: String = host
        .chars()
        .take(40)
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let unique = Uuid::new_v4().simple().to_string();
    let id = if host.is_empty() {
        unique
    } else {
        format!("{host}-{}", &unique[..12])
    };
    std::fs::write(&path, format!("{id}\n"))?;
    Ok(id)
}

/// Runs the election until `stop`: while this process holds the lease,
/// `start` runs the loops on a fenced context until the token it is given
/// is cancelled; their handles are awaited when the lead is lost.
pub async fn run<F, Fut>(ctx: Ctx, holder: String, ttl: Duration, start: F, stop: CancellationToken)
where
    F: Fn(Ctx, CancellationToken) -> Fut,
    Fut: Future<Output = Vec<JoinHandle<()>>>,
{
    let instance = Uuid::new_v4();
    let fence = Arc::new(Fence::new(LOOPS_LEASE));
    let loops_ctx = ctx.fenced(fence.clone());
    let lease_ttl = chrono::Duration::from_std(ttl).unwrap_or(chrono::Duration::seconds(15));
    let mut running: Option<(CancellationToken, Vec<JoinHandle<()>>)> = None;
    let mut renewed_at = None;
    loop {
        let now = ctx.now();
        let led = async {
            let mut tx = ctx.store.begin().await?;
            let term = tx
                .lead(LOOPS_LEASE, &holder, instance, lease_ttl, now)
                .await?;
            ctx.commit(tx).await?;
            pam_store::StoreResult::Ok(term)
        }
        .await;
        match led {
            Ok(Some(term)) => {
                renewed_at = Some(now);
                if fence.term() != term {
                    stop_loops(&mut running).await;
                    fence.set(term);
                    ctx.metrics.leader.set(1);
                    ctx.metrics.leader_term.set(term);
                    tracing::info!(term, replica = %holder, "leading: the loops run here");
                    let token = stop.child_token();
                    let handles = start(loops_ctx.clone(), token.clone()).await;
                    running = Some((token, handles));
                }
            }
            Ok(None) => {
                if fence.term() != 0 {
                    tracing::warn!(replica = %holder, "lost the lead: another replica runs the loops");
                }
                fence.set(0);
                ctx.metrics.leader.set(0);
                ctx.metrics.leader_term.set(0);
                stop_loops(&mut running).await;
            }
            Err(e) => {
                // Cannot renew: lead on only as long as the lease surely
                // holds by this clock.
                let expired = renewed_at.is_none_or(|at| ctx.now() >= at + lease_ttl);
                if expired && fence.term() != 0 {
                    tracing::warn!(error = %e, "cannot renew the lead; stepping down");
                    fence.set(0);
                    ctx.metrics.leader.set(0);
                    ctx.metrics.leader_term.set(0);
                    stop_loops(&mut running).await;
                } else {
                    tracing::debug!(error = %e, "lease renewal failed; retrying");
                }
            }
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(ttl / 3) => {}
        }
    }
    stop_loops(&mut running).await;
    if fence.term() != 0 {
        let resigned = async {
            let mut tx = ctx.store.begin().await?;
            tx.resign(LOOPS_LEASE, instance, ctx.now()).await?;
            ctx.commit(tx).await?;
            pam_store::StoreResult::Ok(())
        }
        .await;
        if let Err(e) = resigned {
            tracing::warn!(error = %e, "could not resign the lead; it expires by itself");
        }
    }
}

async fn stop_loops(running: &mut Option<(CancellationToken, Vec<JoinHandle<()>>)>) {
    if let Some((token, handles)) = running.take() {
        token.cancel();
        for h in handles {
            let _ = h.await;
        }
    }
}
