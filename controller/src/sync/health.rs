//! A Source's health rolled up from its owned runs (issue 35: level-
//! triggered). A sync writes it with its status; between syncs the loop
//! recomputes it for each Source whose health can still move (Progressing
//! or Degraded: runs pending, running or failed) at most every
//! [`REFRESH`], so a run that ends shows in `get sources` and on the
//! dashboard within a second, with no sync.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use pam_manifests::kinds::HealthState;
use pam_store::{OwnedObject, Source};
use uuid::Uuid;

use crate::ctx::Ctx;
use crate::rules::sources::{self, Health};

/// How often one Source's health is recomputed between syncs at most.
pub const REFRESH: Duration = Duration::from_millis(500);

/// Health rolled up from the owned objects: a failed run is Degraded, a
/// pending or running one Progressing, else Healthy.
pub fn health_of(owned: &[OwnedObject]) -> Health {
    health_of_runs(
        owned
            .iter()
            .filter_map(|o| Some((o.owner.name.as_str(), o.run_status?))),
    )
}

/// One owned run's health (issue 35; the one rule for the roll-up and
/// each object's state, super::objects): failed is Degraded, pending,
/// spawning or running Progressing, ended well Healthy.
pub fn run_health(status: pam_manifests::state::RunStatus) -> HealthState {
    use pam_manifests::state::RunStatus as R;
    match status {
        R::Failed => HealthState::Degraded,
        R::Pending | R::Spawning | R::Running => HealthState::Progressing,
        R::Exited | R::Stopped => HealthState::Healthy,
    }
}

/// [`health_of`] from the owned runs' names and statuses.
pub fn health_of_runs<'a>(
    runs: impl IntoIterator<Item = (&'a str, pam_manifests::state::RunStatus)>,
) -> Health {
    let runs: Vec<(&str, HealthState)> = runs
        .into_iter()
        .map(|(name, s)| (name, run_health(s)))
        .collect();
    let failed: Vec<&str> = runs
        .iter()
        .filter(|(_, h)| *h == HealthState::Degraded)
        .map(|(name, _)| *name)
        .collect();
    if !failed.is_empty() {
        return Health {
            status: HealthState::Degraded,
            message: format!("failed run(s): {}", failed.join(", ")),
        };
    }
    let busy = runs
        .iter()
        .filter(|(_, h)| *h == HealthState::Progressing)
        .count();
    if busy > 0 {
        return Health {
            status: HealthState::Progressing,
            message: format!("{busy} run(s) pending or running"),
        };
    }
    Health {
        status: HealthState::Healthy,
        message: String::new(),
    }
}

/// Recomputes the health of `s` from its owned runs when it can still
/// move and was not looked at within [`REFRESH`]; writes it when it
/// changed (rules::sources::refresh_health).
pub(super) async fn refresh(
    ctx: &Ctx,
    s: &Source,
    last: &mut HashMap<Uuid, Instant>,
) -> anyhow::Result<()> {
    if !matches!(
        s.status.health,
        HealthState::Progressing | HealthState::Degraded
    ) || s.status.revision.is_none()
    {
        return Ok(());
    }
    if last.get(&s.id).is_some_and(|at| at.elapsed() < REFRESH) {
        return Ok(());
    }
    last.insert(s.id, Instant::now());
    let mut tx = ctx.store.begin().await?;
    let runs = tx.owned_runs(s.id).await?;
    let health = health_of_runs(runs.iter().map(|(n, st)| (n.as_str(), *st)));
    if sources::refresh_health(tx.as_mut(), s.id, health, ctx.now()).await? {
        ctx.commit(tx).await?;
    }
    Ok(())
}
