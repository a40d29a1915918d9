//! The one prune (issue 29): `pamctl apply --prune` and a Source's sync
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
//! names (issue 14). Objects a Source owns are the Source's to prune, so
//! apply keeps them.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use pam_manifests::kinds::Kind;
use pam_manifests::load::Document;
use pam_manifests::names::LabelSelector;
use pam_store::prelude::*;
use pam_store::{Labels, Project, StoreResult};
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
    crate::rules::kind::for_kind!(d.kind, K => prune_stored::<K>(tx, d.id, pruning, now).await)
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
    crate::rules::kind::for_kind!(kind, K => listed::<K>(tx, project).await)
}

/// What apply's prune needs of the input, taken before the batch is
/// written (apply lets each document go once it is written, issue 30):
/// its kinds, the objects it names, the projects it names.
pub(super) struct Named {
    kinds: Vec<Kind>,
    named: HashSet<(Kind, Option<String>, String)>,
    in_batch: HashSet<String>,
}

impl Named {
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
