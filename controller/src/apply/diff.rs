//! What apply would change, per object: the stored desired state (`spec`,
//! `labels`, `annotations`) next to the declared one, and the action
//! (`create`, `update`, `unchanged`); with `prune` (and `selector` or
//! `applyset`), also what apply would prune (`prune`, with `live` and no
//! `desired`), found by running that very apply as a dry run (one home for
//! the prune rule). Nothing is written.

use pam_manifests::kinds::Manifest;
use pam_store::prelude::*;
use pam_store::{Meta, Project, Secret};
use serde_json::{json, Value};

use super::{labelled_documents, ApplyError, ApplyRequest};
use crate::ctx::Ctx;
use crate::rules::meta::Desired;
use crate::rules::secrets;

fn desired_json(d: &Desired) -> Value {
    json!({ "spec": d.spec, "labels": d.labels, "annotations": d.annotations })
}

/// One item per document of the request, in input order.
pub async fn diff(ctx: &Ctx, req: &ApplyRequest) -> Result<Vec<Value>, ApplyError> {
    let docs = labelled_documents(req)?;
    super::scope::documents(req.grant.as_ref(), crate::rules::access::Verb::Get, &docs)?;
    // The same field limits as apply (no NUL, sizes, label counts): a diff
    // of a batch apply would refuse says so, with file and line.
    let errors: Vec<_> = docs
        .iter()
        .flat_map(pam_manifests::validate::limits::check_document)
        .collect();
    if !errors.is_empty() {
        return Err(ApplyError::Invalid(errors));
    }
    let mut tx = ctx.store.begin().await?;
    // What apply would write: the documents merged with the fields other
    // managers own (managed fields), a conflict refused as apply
    // refuses it. Nothing is recorded: the transaction is dropped.
    let (docs, _, _) = super::merged(tx.as_mut(), req, docs, ctx.now()).await?;
    let mut items = Vec::with_capacity(docs.len());
    for d in &docs {
        let m = &d.manifest;
        let desired = match m {
            Manifest::Secret(s) => desired_json(&secret_desired(tx.as_mut(), s, m).await?),
            _ => desired_json(&Desired::of(m)),
        };
        let live = live_meta(tx.as_mut(), m)
            .await?
            .map(|meta| desired_json(&Desired::stored(&meta)));
        let action = match &live {
            None => "create",
            Some(l) if *l == desired => "unchanged",
            Some(_) => "update",
        };
        let mut item = json!({
            "kind": m.kind().as_str(), "project": m.project().map(|p| p.to_string()),
            "name": m.name().to_string(), "action": action, "live": live, "desired": desired,
        });
        if let Manifest::Secret(_) = m {
            item["secretChanges"] = secret_changes(live.as_ref(), &desired);
        }
        items.push(item);
    }
    drop(tx);
    if req.prune {
        items.extend(prune_items(ctx, req).await?);
    }
    Ok(items)
}

/// What `apply --prune` of this request would delete: the apply itself,
/// as a dry run (rolled back). Fields a Source owns do not stop a diff.
async fn prune_items(ctx: &Ctx, req: &ApplyRequest) -> Result<Vec<Value>, ApplyError> {
    let dry = ApplyRequest {
        dry_run: true,
        force_conflicts: true,
        ..req.clone()
    };
    let results = super::apply(ctx, &dry).await?;
    let mut tx = ctx.store.begin().await?;
    let mut items = Vec::new();
    for r in results.iter().filter(|r| r.action == super::Action::Pruned) {
        let Some(kind) = pam_manifests::Kind::parse(r.kind) else {
            continue;
        };
        let live = live_of(tx.as_mut(), kind, r.project.as_deref(), &r.name)
            .await?
            .map(|meta| desired_json(&Desired::stored(&meta)));
        items.push(json!({
            "kind": r.kind, "project": r.project, "name": r.name,
            "action": "prune", "live": live, "desired": null,
        }));
    }
    Ok(items)
}

/// Per key of a Secret, what apply would do to its value — `added`,
/// `removed`, `value changed` — from the sizes and digests alone.
fn secret_changes(live: Option<&Value>, desired: &Value) -> Value {
    let keys = |v: Option<&Value>| {
        v.and_then(|v| v.pointer("/spec/keys"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    let (old, new) = (keys(live), keys(Some(desired)));
    let mut out = Vec::new();
    for (k, v) in &new {
        match old.get(k) {
            None => out.push(json!({"key": k, "change": "added"})),
            Some(o) if o != v => out.push(json!({"key": k, "change": "value changed"})),
            Some(_) => {}
        }
    }
    for k in old.keys().filter(|k| !new.contains_key(*k)) {
        out.push(json!({"key": k, "change": "removed"}));
    }
    Value::Array(out)
}

/// A Secret's desired state as apply would store it: each
/// key's size and digest under the stored Secret's salt, so a changed
/// value shows as a changed digest and no value is ever in a diff. A new
/// Secret has no salt yet: sizes only.
async fn secret_desired(
    tx: &mut dyn Tx,
    s: &pam_manifests::kinds::Secret,
    m: &Manifest,
) -> Result<Desired, ApplyError> {
    let values = s.spec.values().unwrap_or_default();
    let d = secrets::SecretDesired::of(s, Desired::of(m), values);
    let stored = match tx
        .by_name::<Project>((), s.metadata.project.as_str())
        .await?
    {
        Some(p) => tx.by_name::<Secret>(p.id, s.metadata.name.as_str()).await?,
        None => None,
    };
    Ok(match stored {
        Some(row) => secrets::desired_on(&row, &d),
        None => {
            let keys: serde_json::Map<String, Value> = d
                .values
                .iter()
                .map(|(k, v)| (k.clone(), json!({ "size": v.len() })))
                .collect();
            Desired {
                spec: json!({ "keys": keys }),
                ..d.desired
            }
        }
    })
}

async fn live_meta(tx: &mut dyn Tx, m: &Manifest) -> Result<Option<Meta>, ApplyError> {
    live_of(
        tx,
        m.kind(),
        m.project().map(|p| p.as_str()),
        m.name().as_str(),
    )
    .await
}

/// The stored meta of one object, by kind, project and name.
async fn live_of(
    tx: &mut dyn Tx,
    kind: pam_manifests::Kind,
    project: Option<&str>,
    name: &str,
) -> Result<Option<Meta>, ApplyError> {
    Ok(super::stored::stored_one(tx, kind, project, name)
        .await?
        .map(|o| o.meta))
}
