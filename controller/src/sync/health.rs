//! A Source's health rolled up from its owned runs (level-
//! triggered). A sync writes it with its status; between syncs the loop
//! recomputes it for each Source whose health can still move (Progressing
//! or Degraded: runs pending, running or failed) once a run's event was
//! journaled since it last looked, at most every [`REFRESH`] — so a run
//! that ends shows in `get sources` and on the dashboard within a second,
//! with no sync, and a fleet whose runs do not move costs no reads — and
//! at least every [`RESYNC`] (a missed event costs time, not truth).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pam_manifests::kinds::HealthState;
use pam_store::{OwnedObject, Source};
use tokio::sync::broadcast::{self, error::TryRecvError};
use uuid::Uuid;

use crate::ctx::Ctx;
use crate::events::Published;
use crate::rules::sources::{self, Health};

/// How often one Source's health is recomputed between syncs at most.
pub const REFRESH: Duration = Duration::from_millis(500);
/// How long a Source whose health can move goes without a recompute at
/// most, run events or not.
pub const RESYNC: Duration = Duration::from_secs(30);

/// Health rolled up from the owned objects: a failed run is Degraded, a
/// pending or running one Progressing, else Healthy.
pub fn health_of(owned: &[OwnedObject]) -> Health {
    health_of_runs(
        owned
            .iter()
            .filter_map(|o| Some((o.owner.name.as_str(), o.run_status?))),
    )
}

/// One owned run's health (the one rule for the roll-up and
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

/// What the loop remembers to decide when a Source's health is due: the
/// run events it has seen on the bus, and when (and after how many) it
/// last recomputed each Source.
pub(super) struct HealthWatch {
    events: broadcast::Receiver<Arc<Published>>,
    /// Bus messages carrying a run's event (a lag or a closed bus counts
    /// too: something may have moved).
    moved: u64,
    checked: HashMap<Uuid, (Instant, u64)>,
}

impl HealthWatch {
    pub(super) fn new(ctx: &Ctx) -> HealthWatch {
        HealthWatch {
            events: ctx.bus.subscribe(),
            moved: 0,
            checked: HashMap::new(),
        }
    }

    /// Takes in what the bus published since the last pass.
    pub(super) fn drain(&mut self) {
        loop {
            match self.events.try_recv() {
                Ok(p) => {
                    if p.events.iter().any(|e| e.topic.starts_with("run.")) {
                        self.moved += 1;
                    }
                }
                Err(TryRecvError::Empty) => return,
                Err(TryRecvError::Lagged(_)) => self.moved += 1,
                Err(TryRecvError::Closed) => {
                    self.moved += 1;
                    return;
                }
            }
        }
    }

    /// Forgets the Sources `keep` says no longer exist.
    pub(super) fn retain(&mut self, keep: impl Fn(&Uuid) -> bool) {
        self.checked.retain(|id, _| keep(id));
    }

    /// Whether `id`'s health is due for a recompute now (and if so,
    /// notes that it was done).
    fn due(&mut self, id: Uuid) -> bool {
        let now = Instant::now();
        let due = due(self.checked.get(&id).copied(), self.moved, now);
        if due {
            self.checked.insert(id, (now, self.moved));
        }
        due
    }

    /// Recomputes the health of `s` from its owned runs when it can still
    /// move and is due ([`HealthWatch::due`]); writes it when it changed
    /// (rules::sources::refresh_health).
    pub(super) async fn refresh(&mut self, ctx: &Ctx, s: &Source) -> anyhow::Result<()> {
        if !matches!(
            s.status.health,
            HealthState::Progressing | HealthState::Degraded
        ) || s.status.revision.is_none()
        {
            return Ok(());
        }
        if !self.due(s.id) {
            return Ok(());
        }
        let mut tx = ctx.store.begin().await?;
        let runs = tx.owned_runs(s.id).await?;
        let health = health_of_runs(runs.iter().map(|(n, st)| (n.as_str(), *st)));
        if sources::refresh_health(tx.as_mut(), s.id, health, ctx.now()).await? {
            ctx.commit(tx).await?;
        }
        Ok(())
    }
}

/// Whether a Source last recomputed at `last` — (when, after how many run
/// events) — is due at `now`, `moved` run events having been seen.
fn due(last: Option<(Instant, u64)>, moved: u64, now: Instant) -> bool {
    match last {
        None => true,
        Some((at, seen)) => {
            let since = now.saturating_duration_since(at);
            since >= RESYNC || (seen < moved && since >= REFRESH)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_after_a_run_event_at_most_every_refresh_and_at_least_every_resync() {
        let t0 = Instant::now();
        assert!(due(None, 0, t0), "never looked at");
        let last = Some((t0, 3));
        let later = |d: Duration| t0 + d;
        assert!(!due(last, 3, later(REFRESH * 10)), "no run moved");
        assert!(!due(last, 4, later(REFRESH / 2)), "moved, but too soon");
        assert!(due(last, 4, later(REFRESH)), "moved");
        assert!(due(last, 3, later(RESYNC)), "the safety net");
    }
}
