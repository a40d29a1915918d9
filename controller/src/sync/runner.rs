//! pamd's sync loop (GitOps), level-triggered like the others: each tick
//! it looks at every Source and syncs the ones that are due — the
//! interval elapsed, a sync was requested (`pamctl sync`), or a watched
//! directory changed. A sync acts idempotently on what it reads (the
//! tree, the inventory, the stored objects); why it runs only decides how
//! much it may skip ([`Trigger`]).
//!
//! # Watching
//! A directory Source is watched with `notify` ([`super::watch`]): a
//! change wakes the loop, which syncs once the tree has been still for
//! [`super::watch::SETTLE`] after a completed file (else
//! [`super::watch::DEBOUNCE`]) — applying only what changed when it can
//! ([`super::cache`]), and waiting for DEBOUNCE when it needs the whole
//! tree; polling is the fallback when a watcher cannot start. The
//! interval's full resync is the safety net (and the drift pass).
//!
//! # Directories
//! A directory Source's path is resolved and checked against the allowed
//! roots ([`super::roots`]) at every pass and every sync: a refused one
//! is not watched, and its sync fails before reading anything. A sync
//! never applies from a file still open for writing, and never prunes by
//! files that are not settled ([`super::settle`]): it is deferred.
//!
//! # Caveats
//! - Time for "due" comes from the injected clock; the tick itself is a
//!   real sleep.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use pam_manifests::kinds::{Drift, SourceSpec, SyncState};
use pam_store::Source;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use pam_manifests::load::Document;
use serde_json::Value;

use super::apply::{apply_tree, Prev};
use super::cache::{Loaded, Plan, SourceCache};
use super::fetch::{self, Repos, Tree};
pub use super::health::health_of;
use super::health::{health_of_runs, HealthWatch};
use super::objects::drift_of;
use super::settle;
use super::status::{defer, failed, invalid, refused};
use super::watch::{DirWatch, DEBOUNCE};
use crate::apply::stored::{key_of, ObjectKey};
use crate::ctx::Ctx;
use crate::rules::sources::{self, Health, Outcome};

/// How often the loop looks at the Sources.
pub const TICK: Duration = Duration::from_millis(200);
/// How soon a sync deferred for files still being written (super::settle)
/// is tried again.
pub const WAIT_RETRY: Duration = Duration::from_millis(500);
/// Runs the sync loop until `stop`.
pub async fn run(ctx: Ctx, repos: Repos, stop: CancellationToken) {
    let mut watches: HashMap<Uuid, DirWatch> = HashMap::new();
    let mut caches: HashMap<Uuid, SourceCache> = HashMap::new();
    let mut waiting: HashMap<Uuid, Instant> = HashMap::new();
    let mut health = HealthWatch::new(&ctx);
    let wake = Arc::new(tokio::sync::Notify::new());
    loop {
        let maps = (&mut watches, &mut caches, &mut waiting, &mut health);
        let next = match pass(&ctx, &repos, maps, &wake).await {
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

/// The loop's memory: the watches, the caches, the Sources whose
/// deferred sync is tried again at an instant, and when each Source's
/// health is due (super::health).
type Maps<'a> = (
    &'a mut HashMap<Uuid, DirWatch>,
    &'a mut HashMap<Uuid, SourceCache>,
    &'a mut HashMap<Uuid, Instant>,
    &'a mut HealthWatch,
);

async fn pass(
    ctx: &Ctx,
    repos: &Repos,
    (watches, caches, waiting, health): Maps<'_>,
    wake: &Arc<tokio::sync::Notify>,
) -> anyhow::Result<Option<Instant>> {
    let mut next: Option<Instant> = None;
    let list = {
        let mut tx = ctx.store.begin().await?;
        tx.list::<Source>(()).await?
    };
    watches.retain(|id, _| list.iter().any(|s| s.id == *id));
    caches.retain(|id, _| list.iter().any(|s| s.id == *id));
    waiting.retain(|id, _| list.iter().any(|s| s.id == *id));
    health.retain(|id| list.iter().any(|s| s.id == *id));
    health.drain();
    for s in list {
        let Ok(spec) = serde_json::from_value::<SourceSpec>(s.meta.spec.clone()) else {
            continue;
        };
        // Health follows the owned runs between syncs, suspended or not
        // (suspend stops syncs, not the runs).
        if let Err(e) = health.refresh(ctx, &s).await {
            tracing::warn!(source = %s.name, error = %format!("{e:#}"), "health refresh failed");
        }
        if spec.suspend {
            continue;
        }
        if let Some(at) = waiting.get(&s.id).copied() {
            if Instant::now() < at {
                next = Some(next.map_or(at, |n| n.min(at)));
                continue;
            }
        }
        let mut changed = None;
        let mut mark = None;
        // A path outside the allowed roots (or missing) is neither watched
        // nor polled: the sync reports why when it is due.
        let root = spec.path.as_ref().and_then(|p| repos.dirs.resolve(p).ok());
        if let Some(root) = root {
            if watches.get(&s.id).is_none_or(|w| w.root() != root) {
                watches.insert(s.id, DirWatch::new(root, wake.clone()));
            }
            if let Some(w) = watches.get_mut(&s.id) {
                match w.check(wake).await {
                    Ok(true) => changed = Some(w.still_for()),
                    Ok(false) => {}
                    Err(at) => next = Some(next.map_or(at, |n| n.min(at))),
                }
                mark = Some(w.mark());
            }
        } else {
            watches.remove(&s.id);
        }
        let trigger = if due(&s, &spec, ctx.now()) {
            Trigger::Due
        } else if let Some(still) = changed {
            Trigger::Changed { still }
        } else {
            continue;
        };
        let name = s.name.clone();
        let id = s.id;
        let cache = caches.entry(id).or_default();
        match sync_source(ctx, repos, s, &spec, cache, trigger).await {
            Ok(Some(_)) => {
                waiting.remove(&id);
                if let (Some(w), Some(mark)) = (watches.get_mut(&id), mark) {
                    w.synced(mark);
                }
            }
            Ok(None) => {
                // Settling: looked at again once still for DEBOUNCE;
                // waiting for files being written: shortly.
                let wait = match trigger {
                    Trigger::Changed { still } if still < DEBOUNCE => DEBOUNCE - still,
                    _ => WAIT_RETRY,
                };
                let at = Instant::now() + wait;
                waiting.insert(id, at);
                next = Some(next.map_or(at, |n| n.min(at)));
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

/// Reads the Source's tree at its current revision: the directory `root`
/// (its `spec.path`, resolved and allowed), or its git repository at
/// `reference` (its `spec.git.ref` when `None`; `diff source --revision`,
/// super::preview).
pub(super) async fn read_tree(
    repos: &Repos,
    s: &Source,
    spec: &SourceSpec,
    root: Option<&Path>,
    reference: Option<&str>,
) -> anyhow::Result<Tree> {
    if let Some(root) = root {
        let root = root.to_path_buf();
        return tokio::task::spawn_blocking(move || fetch::read_dir(&root)).await?;
    }
    let git = spec
        .git
        .as_ref()
        .ok_or_else(|| anyhow::anyhow!("neither spec.path nor spec.git"))?;
    let mirror = repos.mirror(s.id);
    let commit = mirror
        .fetch(&git.url, reference.unwrap_or(&git.reference))
        .await?;
    mirror.tree(&commit, &git.path, &|_| None).await
}

/// Why a Source is synced now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// Its watched directory changed (and nothing else made it due), and
    /// has been still for `still` since: the changed files alone may be
    /// applied ([`Plan::Changed`]) once the change completed its files
    /// ([`super::watch::SETTLE`]); a sync of the whole tree — which may
    /// prune — waits until the tree has been still for [`DEBOUNCE`] (a
    /// burst of changes, a file moved between files in two steps, is
    /// never pruned from half-way).
    Changed { still: Duration },
    /// The interval, a request, a new generation or a first look: a full
    /// sync, which also looks for drift in the whole inventory.
    Due,
}

/// Syncs one Source now: the whole sync — writes, inventory, prune,
/// status and events — commits in one transaction, or a failure status is
/// written and nothing else. `None`: nothing was done yet, the tree is
/// still settling (see [`Trigger::Changed`]), or a directory's files are
/// still being written ([`super::settle`]; the status says so).
pub async fn sync_source(
    ctx: &Ctx,
    repos: &Repos,
    s: Source,
    spec: &SourceSpec,
    cache: &mut SourceCache,
    trigger: Trigger,
) -> anyhow::Result<Option<Source>> {
    let started = Instant::now();
    let Some((s, result)) = sync_once(ctx, repos, s, spec, cache, trigger).await? else {
        return Ok(None);
    };
    ctx.metrics.source_synced(result, started);
    Ok(Some(s))
}

/// [`sync_source`], saying how it ended (a [`crate::metrics::SYNC_RESULTS`]).
async fn sync_once(
    ctx: &Ctx,
    repos: &Repos,
    s: Source,
    spec: &SourceSpec,
    cache: &mut SourceCache,
    trigger: Trigger,
) -> anyhow::Result<Option<(Source, &'static str)>> {
    let now = ctx.now();
    let root = match &spec.path {
        Some(p) => match repos.dirs.resolve(p) {
            Ok(root) => Some(root),
            Err(refused) => {
                cache.forget();
                let s = failed(ctx, s, None, Vec::new(), refused).await?;
                return Ok(Some((s, "failed")));
            }
        },
        None => None,
    };
    let tree = match read_tree(repos, &s, spec, root.as_deref(), None).await {
        Ok(t) => t,
        Err(e) => {
            cache.forget();
            return Ok(Some((
                failed(ctx, s, None, Vec::new(), format!("{e:#}")).await?,
                "failed",
            )));
        }
    };
    // A file still being written applies nothing (not even a parse
    // error): the sync waits for it.
    if let Some(root) = &root {
        if s.status.revision.as_deref() != Some(tree.revision.as_str()) {
            let r = root.clone();
            if let Err(why) = tokio::task::spawn_blocking(move || settle::before_apply(&r)).await? {
                return defer(ctx, s, &why).await;
            }
        }
    }
    // The variables, read as the tree is (a Secret changed since
    // the last sync parses the tree again, whole).
    let vars = match super::substitute::vars_of(ctx, spec).await? {
        None => None,
        Some(Ok(vars)) => Some(vars),
        Some(Err(why)) => {
            cache.forget();
            return Ok(Some((
                failed(ctx, s, None, Vec::new(), why).await?,
                "failed",
            )));
        }
    };
    let loaded = cache.load(&tree, vars.as_ref());
    let errors = loaded.errors();
    if !errors.is_empty() {
        cache.forget();
        return Ok(Some((
            invalid(ctx, s, tree.revision, errors).await?,
            "failed",
        )));
    }
    let mut tx = ctx.store.begin().await?;
    // The row as of this transaction (a request may have come since the
    // list was read).
    let s = tx.get::<Source>(s.id).await?.unwrap_or(s);
    let offline_after = ctx.thresholds.offline_after;
    if let Some(objects) = changed_objects(&s, &tree, &loaded, cache, trigger) {
        let wanted: std::collections::HashSet<&ObjectKey> = objects.iter().collect();
        let docs: Vec<&(Document, Value)> = loaded
            .documents()
            .filter(|(d, _)| wanted.contains(&key_of(&d.manifest)))
            .collect();
        let applied =
            apply_tree(tx.as_mut(), &s, spec, &docs, Prev::Part, now, offline_after).await;
        return match applied {
            Ok(applied) => {
                let runs = tx.owned_runs(s.id).await?;
                let health = health_of_runs(runs.iter().map(|(n, s)| (n.as_str(), *s)));
                let n = tx.count_source_objects(&[s.id]).await?;
                let n = n.get(&s.id).copied().unwrap_or(0) as usize;
                let written = Written {
                    counts: applied.counts,
                    healed: Vec::new(),
                    health,
                    inventory: n,
                    departed: applied.departed,
                };
                let s = commit_synced(ctx, tx, s, (&tree, &loaded), cache, written, now).await?;
                Ok(Some((s, "changed")))
            }
            Err(e) => {
                drop(tx);
                cache.forget();
                Ok(Some((refused(ctx, s, tree.revision, e).await?, "failed")))
            }
        };
    }
    if let Trigger::Changed { still } = trigger {
        if still < DEBOUNCE {
            return Ok(None);
        }
    }
    let owned = tx.owned_objects(s.id).await?;
    let drift = drift_of(&owned);
    let same = s.status.revision.as_deref() == Some(tree.revision.as_str())
        && s.meta.observed_generation >= s.meta.generation;
    if same && drift.is_empty() {
        let health = health_of(&owned);
        let n = owned.len();
        let generation = s.meta.generation;
        let outcome = Outcome::Synced {
            revision: tree.revision.clone(),
            counts: Default::default(),
            healed: Vec::new(),
            departed: None,
        };
        let s = sources::write_status(tx.as_mut(), s, outcome, health, n, now).await?;
        ctx.commit(tx).await?;
        cache.applied(&tree, &loaded, generation);
        return Ok(Some((s, "unchanged")));
    }
    cache.forget();
    if same && !spec.self_heal {
        let health = health_of(&owned);
        let n = owned.len();
        let s = sources::write_status(tx.as_mut(), s, Outcome::OutOfSync { drift }, health, n, now)
            .await?;
        ctx.commit(tx).await?;
        return Ok(Some((s, "out_of_sync")));
    }
    // Owned fields changed by another path are put back by this sync too
    // (a new revision or a new spec rewrites them): journaled as a heal
    // only when the Source asks for healing.
    let healed = if spec.self_heal { drift } else { Vec::new() };
    let docs: Vec<&(Document, Value)> = loaded.documents().collect();
    match apply_tree(
        tx.as_mut(),
        &s,
        spec,
        &docs,
        Prev::Whole(&owned),
        now,
        offline_after,
    )
    .await
    {
        Ok(applied) => {
            // Objects leave the inventory only by files that are settled
            // and read the same twice.
            if let (true, Some(root)) = (applied.left > 0, &root) {
                let (r, revision, window) =
                    (root.clone(), tree.revision.clone(), repos.dirs.settle);
                let settled = tokio::task::spawn_blocking(move || {
                    settle::before_prune(&r, &revision, window)
                })
                .await?;
                if let Err(why) = settled {
                    drop(tx);
                    return defer(ctx, s, &why).await;
                }
            }
            // The inventory's runs as this sync left them: no second read
            // of the whole inventory.
            let whole = applied.whole.expect("a whole tree's inventory");
            let written = Written {
                counts: applied.counts,
                healed,
                health: health_of_runs(whole.runs.iter().map(|(n, s)| (n.as_str(), *s))),
                inventory: whole.size,
                departed: applied.departed,
            };
            let s = commit_synced(ctx, tx, s, (&tree, &loaded), cache, written, now).await?;
            Ok(Some((s, "full")))
        }
        Err(e) => {
            drop(tx);
            Ok(Some((refused(ctx, s, tree.revision, e).await?, "failed")))
        }
    }
}

/// What a sync that applied a tree writes into the Source's status.
struct Written {
    counts: sources::Counts,
    healed: Vec<Drift>,
    health: Health,
    inventory: usize,
    /// What left the tree (sync/apply.rs `Applied::departed`).
    departed: Vec<pam_manifests::kinds::OwnedState>,
}

/// Writes the Synced status of an applied tree, commits the whole sync,
/// and remembers the tree as applied (the next watched change may apply
/// only what changes from it); wakes the claims (runs may be new).
async fn commit_synced(
    ctx: &Ctx,
    mut tx: Box<dyn pam_store::Tx>,
    s: Source,
    (tree, loaded): (&Tree, &Loaded),
    cache: &mut SourceCache,
    w: Written,
    now: DateTime<Utc>,
) -> anyhow::Result<Source> {
    let generation = s.meta.generation;
    let outcome = Outcome::Synced {
        revision: tree.revision.clone(),
        counts: w.counts,
        healed: w.healed,
        departed: Some(w.departed),
    };
    let s = sources::write_status(tx.as_mut(), s, outcome, w.health, w.inventory, now).await?;
    ctx.commit(tx).await?;
    cache.applied(tree, loaded, generation);
    ctx.wakeups.claimable.notify_waiters();
    Ok(s)
}

/// The objects to apply alone, when this sync may apply only what
/// changed (see [`SourceCache::plan`]): a watched change, to a Source
/// whose status says Synced at the revision this process last applied, at
/// the generation observed then. Drift is looked for by the full syncs
/// (the interval's, a request's); a changed object is written as
/// declared, putting back owned fields another path changed, as a full
/// sync does.
fn changed_objects(
    s: &Source,
    tree: &Tree,
    loaded: &Loaded,
    cache: &SourceCache,
    trigger: Trigger,
) -> Option<Vec<ObjectKey>> {
    if !matches!(trigger, Trigger::Changed { .. })
        || s.status.sync != SyncState::Synced
        || s.status.sync_requested_at.is_some()
        || s.meta.observed_generation < s.meta.generation
    {
        return None;
    }
    let revision = s.status.revision.as_deref()?;
    if revision == tree.revision {
        return None;
    }
    match cache.plan(tree, loaded, revision, s.meta.generation) {
        Plan::Changed { objects, .. } => Some(objects),
        Plan::Full => None,
    }
}
