//! The one prune: `pamctl apply --prune` and a Source's sync
//! both delete through [`prune_objects`], under one rule.
//!
//! # The rule
//! - Children go first: runs, then tasks deepest first, then a project's
//!   Schedules and Secrets, then Webhooks, Sources and Hosts, projects last.
//! - No hidden cascade: deleting a task or a project takes its subtree,
//!   runs, Secrets and Schedules with it (the foreign keys cascade), and a
//!   host cannot go while runs point at it. An object whose deletion would
//!   take (or is held by) anything that is not itself being pruned in the
//!   same call is kept and reported with what held it, never deleted.
//! - Each deleted object is reported once; its rule journals what the
//!   seed's journal has a topic for (`work_item.deleted`), and the callers
//!   journal the rest (a Source's `source.pruned` / `source.prune_skipped`).
//!
//! Apply's candidates ([`Writer::prune`]) are the objects of the input's
//! kinds — every kind — that match the selector (or applyset) and that the
//! input does not name; project-scoped kinds only in the projects the batch
//! names. An applyset also records the kinds and projects it
//! holds (`applysets`, as kubectl's ApplySet parent records its
//! group-kinds), and its prune covers them too, so the last Secret of a
//! set that left the input is pruned ([`Writer::prune_and_record`]).
//! Objects a Source owns are the Source's to prune, so apply keeps them.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use pam_manifests::kinds::Kind;
use pam_manifests::load::Document;
use pam_manifests::names::LabelSelector;
use pam_store::prelude::*;
use pam_store::{ApplySetRecord, Labels, Project, StoreResult};
use uuid::Uuid;

use super::writer::Writer;
use super::{Action, ApplyError, ApplyResult};
use crate::rules::kind::Stored;
use crate::rules::meta;

/// An object to delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Doomed {
    pub kind: Kind,
    pub id: Uuid,
    /// Project-scoped kinds: the project's slug.
    pub project: Option<String>,
    pub name: String,
}

/// What became of one [`Doomed`] object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Deleted.
    Pruned,
    /// Kept: deleting it would also delete (or is refused because of)
    /// these objects (`run r1`, `task build`), which are not being pruned.
    Held(Vec<String>),
    /// Already gone (deleted by someone else meanwhile).
    Gone,
}

/// Deletes `doomed` under the rule above; returns each object with its
/// outcome, in deletion order.
pub async fn prune_objects(
    tx: &mut dyn Tx,
    mut doomed: Vec<Doomed>,
    now: DateTime<Utc>,
) -> StoreResult<Vec<(Doomed, Outcome)>> {
    let pruning: HashSet<Uuid> = doomed.iter().map(|d| d.id).collect();
    // Tasks deepest first: read their paths once.
    let mut depth = std::collections::HashMap::new();
    for d in doomed.iter().filter(|d| d.kind == Kind::Task) {
        if let Some(w) = tx.get_work_item(d.id).await? {
            depth.insert(d.id, w.path.len());
        }
    }
    doomed.sort_by_key(|d| {
        (
            d.kind.info().prune_order,
            std::cmp::Reverse(depth.get(&d.id).copied().unwrap_or(0)),
        )
    });
    let mut out = Vec::with_capacity(doomed.len());
    for d in doomed {
        let outcome = prune_one(tx, &d, &pruning, now).await?;
        out.push((d, outcome));
    }
    Ok(out)
}

async fn prune_one(
    tx: &mut dyn Tx,
    d: &Doomed,
    pruning: &HashSet<Uuid>,
    now: DateTime<Utc>,
) -> StoreResult<Outcome> {
    crate::rules::each_kind::for_kind!(d.kind, K => prune_stored::<K>(tx, d.id, pruning, now).await)
}

/// [`prune_one`] for a kind: kept when its deletion would take anything
/// not being pruned ([`Stored::held`]), else deleted through its rule.
async fn prune_stored<K: Stored>(
    tx: &mut dyn Tx,
    id: Uuid,
    pruning: &HashSet<Uuid>,
    now: DateTime<Utc>,
) -> StoreResult<Outcome> {
    let Some(o) = K::by_id(tx, id).await? else {
        return Ok(Outcome::Gone);
    };
    let held = o.held(tx, pruning).await?;
    if !held.is_empty() {
        return Ok(Outcome::Held(held));
    }
    Ok(if o.delete(tx, now).await? {
        Outcome::Pruned
    } else {
        Outcome::Gone
    })
}

/// One stored object of a kind, as prune selects it.
struct Listed {
    id: Uuid,
    name: String,
    labels: Labels,
}

/// The stored objects of `kind` — in `project` for project-scoped kinds.
async fn list_kind(
    tx: &mut dyn Tx,
    kind: Kind,
    project: Option<&Project>,
) -> StoreResult<Vec<Listed>> {
    async fn listed<K: Stored>(tx: &mut dyn Tx, p: Option<&Project>) -> StoreResult<Vec<Listed>> {
        Ok(K::all(tx, p)
            .await?
            .into_iter()
            .map(|o| Listed {
                id: o.id(),
                name: o.name().to_owned(),
                labels: o.meta().labels.clone(),
            })
            .collect())
    }
    crate::rules::each_kind::for_kind!(kind, K => listed::<K>(tx, project).await)
}

/// What apply's prune needs of the input, taken before the batch is
/// written (apply lets each document go once it is written):
/// its kinds, the objects it names, the projects it names.
pub(super) struct Named {
    kinds: Vec<Kind>,
    named: HashSet<(Kind, Option<String>, String)>,
    in_batch: HashSet<String>,
}

impl Named {
    /// Adds what an applyset's record says it holds: its prune covers
    /// kinds and projects that left the input.
    fn with_recorded(&mut self, r: &ApplySetRecord) {
        self.kinds
            .extend(r.kinds.iter().filter_map(|k| Kind::parse(k)));
        self.kinds.sort();
        self.kinds.dedup();
        self.in_batch.extend(r.projects.iter().cloned());
    }

    /// The input's kinds and projects alone (what an applyset holds after
    /// its prune, before [`Named::with_recorded`]).
    fn clone_scope(&self) -> Named {
        Named {
            kinds: self.kinds.clone(),
            named: HashSet::new(),
            in_batch: self.in_batch.clone(),
        }
    }

    /// The record of an applyset holding the input, and `kept`.
    fn record(&self, name: &str, kept: &[&ApplyResult]) -> ApplySetRecord {
        let mut kinds: Vec<String> = self
            .kinds
            .iter()
            .map(|k| k.as_str().to_string())
            .chain(kept.iter().map(|r| r.kind.to_string()))
            .collect();
        kinds.sort();
        kinds.dedup();
        let mut projects: Vec<String> = self
            .in_batch
            .iter()
            .cloned()
            .chain(kept.iter().filter_map(|r| r.project.clone()))
            .collect();
        projects.sort();
        projects.dedup();
        ApplySetRecord {
            name: name.to_string(),
            kinds,
            projects,
        }
    }

    pub(super) fn of(docs: &[Document]) -> Named {
        let mut kinds: Vec<Kind> = docs.iter().map(|d| d.manifest.kind()).collect();
        kinds.sort();
        kinds.dedup();
        let named = docs
            .iter()
            .map(|d| {
                (
                    d.manifest.kind(),
                    d.manifest.project().map(|p| p.to_string()),
                    d.manifest.name().to_string(),
                )
            })
            .collect();
        let in_batch = docs
            .iter()
            .filter_map(|d| match d.manifest.kind() {
                Kind::Project => Some(d.manifest.name().to_string()),
                _ => d.manifest.project().map(|p| p.to_string()),
            })
            .collect();
        Named {
            kinds,
            named,
            in_batch,
        }
    }
}

impl Writer<'_> {
    /// Prunes by `prune`'s selector (when there is one) and writes the
    /// applyset's record (when there is one). An applyset's prune covers
    /// the kinds and projects its record holds besides the input's; its
    /// new record is the input's, plus those of what was kept (held, or a
    /// Source's). Without a prune nothing left the set: the record only
    /// grows.
    pub(super) async fn prune_and_record(
        &mut self,
        mut input: Named,
        prune: super::Prune<'_>,
    ) -> Result<(), ApplyError> {
        let recorded = match prune.applyset {
            Some(name) => self.tx.applyset(name).await?,
            None => None,
        };
        let Some(name) = prune.applyset else {
            if let Some(sel) = prune.selector {
                self.prune(input, sel).await?;
            }
            return Ok(());
        };
        let record = match prune.selector {
            Some(sel) => {
                let fresh = input.clone_scope();
                if let Some(r) = &recorded {
                    input.with_recorded(r);
                }
                let from = self.results.len();
                self.prune(input, sel).await?;
                let kept: Vec<&ApplyResult> = self.results[from..]
                    .iter()
                    .filter(|r| r.action == Action::Kept)
                    .collect();
                fresh.record(name, &kept)
            }
            None => {
                if let Some(r) = &recorded {
                    input.with_recorded(r);
                }
                input.record(name, &[])
            }
        };
        if recorded.as_ref() != Some(&record) {
            self.tx.put_applyset(&record, self.now).await?;
        }
        Ok(())
    }

    /// Deletes the objects of the input's kinds (and projects) that match
    /// the selector and are not in the input, through [`prune_objects`].
    pub(super) async fn prune(
        &mut self,
        input: Named,
        sel: &LabelSelector,
    ) -> Result<(), ApplyError> {
        let Named {
            kinds,
            named,
            in_batch,
        } = input;
        let batch_projects: Vec<Project> = self
            .tx
            .list::<Project>(())
            .await?
            .into_iter()
            .filter(|p| in_batch.contains(&p.slug))
            .collect();
        let mut doomed = Vec::new();
        for kind in kinds {
            let scopes: Vec<Option<&Project>> = if kind.is_project_scoped() {
                batch_projects.iter().map(Some).collect()
            } else {
                vec![None]
            };
            for scope in scopes {
                let slug = scope.map(|p| p.slug.clone());
                for o in list_kind(self.tx, kind, scope).await? {
                    if sel.matches(&meta::manifest_labels(&o.labels))
                        && !named.contains(&(kind, slug.clone(), o.name.clone()))
                    {
                        doomed.push(Doomed {
                            kind,
                            id: o.id,
                            project: slug.clone(),
                            name: o.name,
                        });
                    }
                }
            }
        }
        // What a Source owns is the Source's to prune (its sync does).
        let ids: Vec<(String, Uuid)> = doomed
            .iter()
            .map(|d| (d.kind.as_str().to_string(), d.id))
            .collect();
        let owned: HashSet<Uuid> = self
            .tx
            .owners_of(&ids)
            .await?
            .into_iter()
            .map(|o| o.object_id)
            .collect();
        let (kept, doomed): (Vec<Doomed>, Vec<Doomed>) =
            doomed.into_iter().partition(|d| owned.contains(&d.id));
        for d in kept {
            self.pruned(
                &d,
                Action::Kept,
                Some("not pruned: a GitOps Source owns it (its sync prunes it)".to_string()),
            );
        }
        for (d, outcome) in prune_objects(self.tx, doomed, self.now).await? {
            match outcome {
                Outcome::Pruned => self.pruned(&d, Action::Pruned, None),
                Outcome::Held(by) => self.pruned(
                    &d,
                    Action::Kept,
                    Some(format!(
                        "not pruned: deleting it would take {} with it, which this apply does not prune",
                        by.join(", ")
                    )),
                ),
                Outcome::Gone => {}
            }
        }
        Ok(())
    }

    fn pruned(&mut self, d: &Doomed, action: Action, message: Option<String>) {
        self.results.push(ApplyResult {
            kind: d.kind.as_str(),
            project: d.project.clone(),
            name: d.name.clone(),
            action,
            generation: None,
            message,
        });
    }
}
