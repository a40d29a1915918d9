//! pamd's sync loop (GitOps), level-triggered like the others: each tick
//! it looks at every Source and syncs the ones that are due — the
//! interval elapsed, a sync was requested (`pamctl sync`), or a watched
//! directory changed. A sync is told nothing about why it runs: it reads
//! the tree, the inventory and the stored objects, and acts idempotently.
//!
//! # Watching
//! A directory Source is watched with `notify` ([`super::watch`]): a
//! change wakes the loop, which syncs once the tree has been still for
//! [`super::watch::DEBOUNCE`]; polling is the fallback when a watcher cannot start. The
//! interval's full resync is the safety net.
//!
//! # Caveats
//! - Time for "due" comes from the injected clock; the tick itself is a
//!   real sleep.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{Drift, SourceSpec};
use pam_store::{OwnedObject, Source};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::apply::{apply_tree, source_error, SyncError};
use super::fetch::{self, GitMirror, Tree};
use super::watch::DirWatch;
use crate::apply::ownership::owned_drift;
use crate::ctx::Ctx;
use crate::rules::sources::{self, Health, Outcome};

/// How often the loop looks at the Sources.
pub const TICK: Duration = Duration::from_millis(200);
/// Runs the sync loop until `stop`.
pub async fn run(ctx: Ctx, data_dir: PathBuf, stop: CancellationToken) {
    let mut watches: HashMap<Uuid, DirWatch> = HashMap::new();
    let wake = Arc::new(tokio::sync::Notify::new());
    loop {
        let next = match pass(&ctx, &data_dir, &mut watches, &wake).await {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "sync pass failed; retrying");
                None
            }
        };
        // A change still settling is looked at again when its debounce
        // ends; a new change wakes the loop at once.
        let nap = next.map_or(TICK, |at| {
            at.saturating_duration_since(Instant::now()).min(TICK)
        });
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = wake.notified() => {}
            _ = tokio::time::sleep(nap) => {}
        }
    }
}

async fn pass(
    ctx: &Ctx,
    data_dir: &Path,
    watches: &mut HashMap<Uuid, DirWatch>,
    wake: &Arc<tokio::sync::Notify>,
) -> anyhow::Result<Option<Instant>> {
    let mut next: Option<Instant> = None;
    let list = {
        let mut tx = ctx.store.begin().await?;
        tx.list_sources().await?
    };
    watches.retain(|id, _| list.iter().any(|s| s.id == *id));
    for s in list {
        let Ok(spec) = serde_json::from_value::<SourceSpec>(s.meta.spec.clone()) else {
            continue;
        };
        if spec.suspend {
            continue;
        }
        let mut changed = false;
        let mut mark = None;
        if let Some(path) = &spec.path {
            let root = PathBuf::from(path);
            if watches.get(&s.id).is_none_or(|w| w.root() != root) {
                watches.insert(s.id, DirWatch::new(root, wake.clone()));
            }
            if let Some(w) = watches.get_mut(&s.id) {
                match w.check(wake).await {
                    Ok(c) => changed = c,
                    Err(at) => next = Some(next.map_or(at, |n| n.min(at))),
                }
                mark = Some(w.mark());
            }
        } else {
            watches.remove(&s.id);
        }
        if !(changed || due(&s, &spec, ctx.now())) {
            continue;
        }
        let name = s.name.clone();
        let id = s.id;
        match sync_source(ctx, data_dir, s, &spec).await {
            Ok(_) => {
                if let (Some(w), Some(mark)) = (watches.get_mut(&id), mark) {
                    w.synced(mark);
                }
            }
            Err(e) => tracing::warn!(source = %name, error = %format!("{e:#}"), "sync failed"),
        }
    }
    Ok(next)
}

/// Whether a Source is due by time or request.
fn due(s: &Source, spec: &SourceSpec, now: DateTime<Utc>) -> bool {
    if s.status.sync_requested_at.is_some() || s.meta.observed_generation < s.meta.generation {
        return true;
    }
    match s.status.last_attempt_at {
        None => true,
        Some(at) => {
            let interval = chrono::Duration::from_std(spec.interval()).unwrap_or_default();
            now - at >= interval
        }
    }
}

/// Reads the Source's tree at its current revision.
async fn read_tree(data_dir: &Path, s: &Source, spec: &SourceSpec) -> anyhow::Result<Tree> {
    if let Some(path) = &spec.path {
        let root = PathBuf::from(path);
        return tokio::task::spawn_blocking(move || fetch::read_dir(&root)).await?;
    }
    let git = spec
        .git
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("neither spec.path nor spec.git"))?;
    let mirror = GitMirror::new(data_dir.join("sources").join(format!("{}.git", s.id)));
    let commit = mirror.fetch(&git.url, &git.reference).await?;
    mirror.tree(&commit, &git.path, &|_| None).await
}

/// The drift of the owned objects: owned fields changed by another path,
/// and owned objects deleted behind the Source's back.
pub fn drift_of(owned: &[OwnedObject]) -> Vec<Drift> {
    owned
        .iter()
        .filter_map(|o| {
            let fields = match &o.meta {
                None => vec!["(deleted)".to_string()],
                Some(meta) => owned_drift(&o.owner, meta),
            };
            (!fields.is_empty()).then(|| Drift {
                kind: o.owner.kind.clone(),
                project: o.owner.project.clone(),
                name: o.owner.name.clone(),
                fields,
            })
        })
        .collect()
}

/// Health rolled up from the owned objects: a failed run is Degraded, a
/// pending or running one Progressing, else Healthy.
pub fn health_of(owned: &[OwnedObject]) -> Health {
    health_of_runs(
        owned
            .iter()
            .filter_map(|o| Some((o.owner.name.as_str(), o.run_status?))),
    )
}

/// [`health_of`] from the owned runs' names and statuses.
pub fn health_of_runs<'a>(
    runs: impl IntoIterator<Item = (&'a str, pam_manifests::state::RunStatus)>,
) -> Health {
    use pam_manifests::state::RunStatus as R;
    let runs: Vec<(&str, R)> = runs.into_iter().collect();
    let failed: Vec<&str> = runs
        .iter()
        .filter(|(_, s)| *s == R::Failed)
        .map(|(name, _)| *name)
        .collect();
    if !failed.is_empty() {
        return Health {
            status: "Degraded",
            message: format!("failed run(s): {}", failed.join(", ")),
        };
    }
    let busy = runs
        .iter()
        .filter(|(_, s)| matches!(s, R::Pending | R::Spawning | R::Running))
        .count();
    if busy > 0 {
        return Health {
            status: "Progressing",
            message: format!("{busy} run(s) pending or running"),
        };
    }
    Health {
        status: "Healthy",
        message: String::new(),
    }
}

/// Syncs one Source now: the whole sync — writes, inventory, prune,
/// status and events — commits in one transaction, or a failure status is
/// written and nothing else.
pub async fn sync_source(
    ctx: &Ctx,
    data_dir: &Path,
    s: Source,
    spec: &SourceSpec,
) -> anyhow::Result<Source> {
    let now = ctx.now();
    let tree = match read_tree(data_dir, &s, spec).await {
        Ok(t) => t,
        Err(e) => {
            return failed(ctx, s, None, Vec::new(), format!("{e:#}")).await;
        }
    };
    let mut tx = ctx.store.begin().await?;
    // The row as of this transaction (a request may have come since the
    // list was read).
    let s = tx.get_source(s.id).await?.unwrap_or(s);
    let owned = tx.owned_objects(s.id).await?;
    let drift = drift_of(&owned);
    let same = s.status.revision.as_deref() == Some(tree.revision.as_str())
        && s.meta.observed_generation >= s.meta.generation;
    if same && drift.is_empty() {
        let health = health_of(&owned);
        let n = owned.len();
        let outcome = Outcome::Synced {
            revision: tree.revision,
            counts: Default::default(),
            healed: Vec::new(),
        };
        let s = sources::write_status(tx.as_mut(), s, outcome, health, n, now).await?;
        ctx.commit(tx).await?;
        return Ok(s);
    }
    if same && !spec.self_heal {
        let health = health_of(&owned);
        let n = owned.len();
        let s = sources::write_status(tx.as_mut(), s, Outcome::OutOfSync { drift }, health, n, now)
            .await?;
        ctx.commit(tx).await?;
        return Ok(s);
    }
    // Owned fields changed by another path are put back by this sync too
    // (a new revision or a new spec rewrites them): journaled as a heal
    // only when the Source asks for healing.
    let healed = if spec.self_heal { drift } else { Vec::new() };
    let offline_after = ctx.thresholds.offline_after;
    match apply_tree(tx.as_mut(), &s, spec, &tree, &owned, now, offline_after).await {
        Ok(applied) => {
            // The inventory's runs as this sync left them: no second read
            // of the whole inventory.
            let health = health_of_runs(applied.runs.iter().map(|(n, s)| (n.as_str(), *s)));
            let (counts, n) = (applied.counts, applied.inventory);
            let outcome = Outcome::Synced {
                revision: tree.revision,
                counts,
                healed,
            };
            let s = sources::write_status(tx.as_mut(), s, outcome, health, n, now).await?;
            ctx.commit(tx).await?;
            ctx.claimable.notify_waiters();
            Ok(s)
        }
        Err(SyncError::Invalid(errors)) => {
            drop(tx);
            let list: Vec<_> = errors.iter().map(source_error).collect();
            let message = match errors.len() {
                1 => errors[0].to_string(),
                n => format!("{} (and {} more problem(s))", errors[0], n - 1),
            };
            failed(ctx, s, Some(tree.revision), list, message).await
        }
        Err(SyncError::Other(m)) => {
            drop(tx);
            failed(ctx, s, Some(tree.revision), Vec::new(), m).await
        }
    }
}

/// Writes a failed sync's status (in its own transaction: the sync's was
/// rolled back); the last good revision and the objects stay.
async fn failed(
    ctx: &Ctx,
    s: Source,
    attempted: Option<String>,
    errors: Vec<pam_manifests::kinds::SourceError>,
    message: String,
) -> anyhow::Result<Source> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let s = tx.get_source(s.id).await?.unwrap_or(s);
    let owned = tx.owned_objects(s.id).await?;
    // Nothing applied yet: no health to roll up (not "Healthy").
    let health = if s.status.revision.is_none() {
        Health {
            status: "Unknown",
            message: "no revision applied yet".into(),
        }
    } else {
        health_of(&owned)
    };
    let n = owned.len();
    let outcome = Outcome::Failed {
        attempted,
        errors,
        message,
    };
    let s = sources::write_status(tx.as_mut(), s, outcome, health, n, now).await?;
    ctx.commit(tx).await?;
    Ok(s)
}
