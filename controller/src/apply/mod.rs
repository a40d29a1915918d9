//! Declarative apply: a batch of manifests is validated whole, then written
//! in one transaction — or, on any error, not at all.
//!
//! # Guarantees
//! - Idempotent: an object whose spec, labels and annotations equal what is
//!   stored is `unchanged` — no write, no new generation, no event.
//! - `metadata.generation` bumps on spec change only; `resourceVersion` on
//!   every write; a stale `resourceVersion` in the input is a conflict
//!   naming the object.
//! - Immutable fields (a Run's task, provider, prompt, cwd; a Task's type)
//!   refuse changes, naming the field.
//! - A Task's `spec.status` is applied when it changed from the last applied
//!   spec, through the state-machine gate; cancelling cascades `cancelled`
//!   to non-done descendants (their specs untouched); a parent never
//!   auto-completes. A changed parent reparents the subtree in this
//!   transaction and journals `work_item.reparented` once.
//! - Dry run executes everything and rolls back.
//! - Prune deletes only objects matching the selector or applyset, of the
//!   kinds present in the input, that the input does not name; never
//!   without a selector.

mod diff;
mod documents;
pub mod existing;
pub mod managed;
pub mod ownership;
pub mod prune;
mod scope;
pub mod stored;
pub mod webhooks;
mod writer;

pub use diff::diff;
pub use documents::documents;

use pam_manifests::kinds::{Kind, Manifest};
use pam_manifests::load::Document;
use pam_manifests::names::LabelSelector;
use pam_manifests::validate;
use pam_manifests::ManifestError;
use pam_store::StoreError;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ctx::Ctx;
use documents::parents_first;
use writer::Writer;

/// The label apply writes when `applyset` is given.
pub const APPLYSET_LABEL: &str = "applyset.pam.dev/name";

#[derive(Debug, Clone, Default, Deserialize, schemars::JsonSchema)]
// A field the request leaves out takes its `Default`.
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ApplyRequest {
    pub files: Vec<FileIn>,
    pub objects: Vec<Value>,
    pub dry_run: bool,
    pub prune: bool,
    pub selector: Option<String>,
    pub applyset: Option<String>,
    /// Take fields other managers own — a Source, another token's apply
    /// or label (`--force-conflicts`; the API's `?forceConflicts=true`),
    /// like server-side apply ([`managed`]).
    #[serde(skip)]
    pub force_conflicts: bool,
    /// Who writes ([`managed`]): the API sets it from the request's token
    /// and `?fieldManager=`; None: pamd's own (`apply:pamd`).
    #[serde(skip)]
    pub manager: Option<managed::Manager>,
    /// The caller's token's role and projects, set by the API
    /// from the request's token; None: unchecked (pamd's own batches).
    #[serde(skip)]
    pub grant: Option<crate::rules::access::Grant>,
}

#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
pub struct FileIn {
    pub name: String,
    /// Shared with the documents parsed from it, which keep the text for
    /// positioning later errors (one copy of a big request, not two).
    #[serde(deserialize_with = "shared_text")]
    #[schemars(with = "String", description = "The file's YAML.")]
    pub content: std::sync::Arc<str>,
}

fn shared_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<std::sync::Arc<str>, D::Error> {
    String::deserialize(d).map(Into::into)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Created,
    Configured,
    Unchanged,
    Pruned,
    /// Matched the prune but was kept: `message` says what held it
    /// ([`prune`]'s rule: no hidden cascade).
    Kept,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct ApplyResult {
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    pub name: String,
    pub action: Action,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    /// Why (a kept object).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The batch is invalid; every problem, positioned.
    #[error("{} invalid document(s)", .0.len())]
    Invalid(Vec<ManifestError>),
    /// A request-level problem (prune without selector, bad selector).
    #[error("{0}")]
    BadRequest(String),
    /// A stale resourceVersion or a lost race, naming the object; or a
    /// change to fields a Source owns without `forceConflicts`, naming the
    /// Source and the fields.
    #[error("{0}")]
    Conflict(String),
    /// The batch would change fields other managers own (another token's
    /// apply or label, a Source) to other values, without
    /// `forceConflicts`: every object, field and manager ([`managed`]).
    #[error("{0}")]
    FieldConflict(String),
    /// The caller's token may not write every object of the batch
    /// ([`scope`]); names no project.
    #[error("{0}")]
    Forbidden(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a written batch did.
pub struct Written {
    pub results: Vec<ApplyResult>,
    /// The object of each of the first `ids.len()` results (the written
    /// documents'; prune's come after).
    pub ids: Vec<uuid::Uuid>,
    /// How many runs it created (the claim long-polls are woken; a bulk
    /// refreshes the planner's statistics).
    pub new_runs: usize,
    /// Whether one of them targets a host or a selector.
    pub new_targeted: bool,
}

/// Applies a request: parse, validate whole, write in one transaction (or
/// roll back on dry run), publish events after commit.
pub async fn apply(ctx: &Ctx, req: &ApplyRequest) -> Result<Vec<ApplyResult>, ApplyError> {
    let prune_selector = prune_selector(req)?;
    let docs = labelled_documents(req)?;
    scope::documents(
        req.grant.as_ref(),
        crate::rules::access::Verb::Update,
        &docs,
    )?;
    let mut tx = ctx.store.begin().await?;
    let hooks = webhooks::check(tx.as_mut(), &docs, ctx.webhooks.keys.as_ref()).await?;
    if !hooks.is_empty() {
        return Err(ApplyError::Invalid(hooks));
    }
    let now = ctx.now();
    let (docs, existing, plan) = merged(tx.as_mut(), req, docs, now).await?;
    let written = write_loaded(
        tx.as_mut(),
        Some(&ctx.secrets),
        now,
        ctx.thresholds.offline_after,
        docs,
        Prune {
            selector: prune_selector.as_ref(),
            applyset: req.applyset.as_deref(),
        },
        existing,
    )
    .await?;
    plan.record(tx.as_mut(), &written.results, &written.ids, now)
        .await?;
    // Prune may have found objects of projects the token may not touch
    // (the transaction is dropped: nothing is written).
    scope::results(req.grant.as_ref(), &written.results)?;
    if !req.force_conflicts {
        ownership::refuse_owned_changes(tx.as_mut(), &written.results).await?;
    }
    if req.dry_run {
        drop(tx);
    } else {
        ctx.commit(tx).await?;
        ctx.runs_claimable(written.new_runs, written.new_targeted);
        if written.results.iter().any(|r| {
            r.kind == Kind::Host.as_str()
                && matches!(r.action, Action::Created | Action::Configured)
        }) {
            ctx.host_may_take_runs();
        }
        ctx.created_runs(written.new_runs);
        ctx.wakeups.loops.notify_one();
    }
    Ok(written.results)
}

/// The request's documents merged with the fields other managers own
/// ([`managed`]: refused on a conflict unless `forceConflicts`), with the
/// stored state they can touch, read once, and the plan to record.
pub(crate) async fn merged(
    tx: &mut dyn pam_store::Tx,
    req: &ApplyRequest,
    docs: Vec<Document>,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(Vec<Document>, existing::Existing, managed::Plan), ApplyError> {
    let manifests: Vec<&Manifest> = docs.iter().map(|d| &d.manifest).collect();
    let existing = existing::load_existing(tx, &manifests).await?;
    let keys: Vec<stored::ObjectKey> = manifests.iter().map(|m| stored::key_of(m)).collect();
    let stored = existing::stored_any(tx, &existing, &keys).await?;
    let manager = req.manager.clone().unwrap_or_else(managed::Manager::pamd);
    let named = docs.iter().map(managed::named).collect();
    let plan = managed::plan(
        tx,
        &stored,
        &docs,
        named,
        &manager,
        req.force_conflicts,
        now,
    )
    .await?;
    let docs = plan.merge(&stored, docs)?;
    Ok((docs, existing, plan))
}

/// How a write prunes: what `selector` selects (none: no prune), and
/// the applyset whose record says which kinds and projects it holds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prune<'a> {
    pub selector: Option<&'a LabelSelector>,
    pub applyset: Option<&'a str>,
}

/// Validates `docs` whole against the stored state they can touch and
/// writes them through the rules in `tx`, pruning by `prune` when given;
/// the caller commits (or drops `tx` to roll back). `existing` is the
/// stored state already read ([`existing::load_existing`], of these
/// documents or of documents naming the same objects: the sync loop, in
/// its own transaction with the Source's merged documents, reads it once
/// for its merge and its write).
pub async fn write_loaded(
    tx: &mut dyn pam_store::Tx,
    ring: Option<&crate::rules::secrets::Keyring>,
    now: chrono::DateTime<chrono::Utc>,
    offline_after: std::time::Duration,
    docs: Vec<Document>,
    prune: Prune<'_>,
    existing: existing::Existing,
) -> Result<Written, ApplyError> {
    let errors = validate::validate_batch(&docs, &existing.state);
    if !errors.is_empty() {
        return Err(ApplyError::Invalid(errors));
    }
    let named =
        (prune.selector.is_some() || prune.applyset.is_some()).then(|| prune::Named::of(&docs));
    let mut w = Writer::new(tx, ring, now, offline_after, existing.items);
    w.results.reserve_exact(docs.len());
    // Each document is let go once written: a big batch's typed
    // manifests are gone by the time its journal and results are whole.
    let mut docs: Vec<Option<Document>> = docs.into_iter().map(Some).collect();
    use pam_manifests::validate::wave::wave_of;
    for kind in Kind::ALL {
        let mut of_kind: Vec<usize> = (0..docs.len())
            .filter(|&i| docs[i].as_ref().is_some_and(|d| d.manifest.kind() == kind))
            .collect();
        // Within a kind, by `pam.dev/sync-wave` (stable: the
        // input order within a wave); a task's parent still comes first.
        of_kind.sort_by_key(|&i| docs[i].as_ref().map_or(0, |d| wave_of(&d.manifest)));
        let ordered = if kind == Kind::Task {
            parents_first(&docs, of_kind)
        } else {
            of_kind
        };
        for i in ordered {
            if let Some(d) = docs[i].take() {
                w.apply_one(&d).await?;
            }
        }
        w.flush_new_items().await?;
        if kind == Kind::Task {
            w.write_dependencies().await?;
        }
    }
    drop(docs);
    if !w.errors.is_empty() {
        return Err(ApplyError::Invalid(w.errors));
    }
    if let Some(named) = named {
        w.prune_and_record(named, prune).await?;
    }
    Ok(Written {
        ids: w.ids,
        results: w.results,
        new_runs: w.new_runs,
        new_targeted: w.new_targeted,
    })
}

/// The request's documents, each labelled with the applyset when one is
/// given (what apply writes, and so what diff compares).
pub(crate) fn labelled_documents(req: &ApplyRequest) -> Result<Vec<Document>, ApplyError> {
    let mut docs = documents(req)?;
    if let Some(set) = &req.applyset {
        let key = pam_manifests::LabelKey::parse(APPLYSET_LABEL).expect("valid key");
        let value = pam_manifests::LabelValue::parse(set)
            .map_err(|e| ApplyError::BadRequest(format!("applyset: {e}")))?;
        for d in &mut docs {
            d.manifest.labels_mut().insert(key.clone(), value.clone());
        }
    }
    Ok(docs)
}

/// The selector prune uses: `-l`, or the applyset label. Never none.
fn prune_selector(req: &ApplyRequest) -> Result<Option<LabelSelector>, ApplyError> {
    if !req.prune {
        return Ok(None);
    }
    let text = match (&req.selector, &req.applyset) {
        (Some(s), None) if !s.trim().is_empty() => s.clone(),
        (None, Some(set)) => format!("{APPLYSET_LABEL}={set}"),
        (Some(_), Some(_)) => {
            return Err(ApplyError::BadRequest(
                "prune takes a selector or an applyset, not both".into(),
            ))
        }
        _ => {
            return Err(ApplyError::BadRequest(
                "prune needs a selector (-l) or an applyset: pam never prunes everything".into(),
            ))
        }
    };
    LabelSelector::parse(&text)
        .map(Some)
        .map_err(|e| ApplyError::BadRequest(format!("selector {text:?}: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prune_needs_a_selector() {
        let req = ApplyRequest {
            prune: true,
            ..Default::default()
        };
        assert!(
            matches!(prune_selector(&req), Err(ApplyError::BadRequest(m)) if m.contains("never prunes"))
        );
        let req = ApplyRequest {
            prune: true,
            applyset: Some("web".into()),
            ..Default::default()
        };
        let sel = prune_selector(&req).unwrap().unwrap();
        let mut l = pam_store::Labels::new();
        l.insert(APPLYSET_LABEL.into(), "web".into());
        assert!(sel.matches(&crate::rules::meta::manifest_labels(&l)));
    }

    #[test]
    fn bad_objects_are_positioned_errors() {
        let req = ApplyRequest {
            objects: vec![
                json!({"apiVersion": "pam.dev/v1", "kind": "Project", "metadata": {"name": "x"}, "spec": {}, "status": {}}),
            ],
            ..Default::default()
        };
        let Err(ApplyError::Invalid(errs)) = documents(&req) else {
            panic!("expected invalid")
        };
        assert_eq!(errs[0].path, "status");
    }
}
