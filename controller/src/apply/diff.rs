//! What apply would change, per object: the stored desired state (`spec`,
//! `labels`, `annotations`) next to the declared one, and the action
//! (`create`, `update`, `unchanged`). Nothing is written.

use pam_manifests::kinds::Manifest;
use pam_store::prelude::*;
use pam_store::Meta;
use serde_json::{json, Value};

use super::{documents, ApplyError, ApplyRequest};
use crate::ctx::Ctx;
use crate::rules::meta::Desired;

fn desired_json(d: &Desired) -> Value {
    json!({ "spec": d.spec, "labels": d.labels, "annotations": d.annotations })
}

/// One item per document of the request, in input order.
pub async fn diff(ctx: &Ctx, req: &ApplyRequest) -> Result<Vec<Value>, ApplyError> {
    let docs = documents(req)?;
    // The same field limits as apply (no NUL, sizes, label counts): a diff
    // of a batch apply would refuse says so, with file and line.
    let errors: Vec<_> = docs
        .iter()
        .flat_map(pam_manifests::limits::check_document)
        .collect();
    if !errors.is_empty() {
        return Err(ApplyError::Invalid(errors));
    }
    let mut tx = ctx.store.begin().await?;
    let mut items = Vec::with_capacity(docs.len());
    for d in &docs {
        let m = &d.manifest;
        let desired = desired_json(&Desired::of(m));
        let live = live_meta(tx.as_mut(), m)
            .await?
            .map(|meta| desired_json(&Desired::stored(&meta)));
        let action = match &live {
            None => "create",
            Some(l) if *l == desired => "unchanged",
            Some(_) => "update",
        };
        items.push(json!({
            "kind": m.kind().as_str(), "project": m.project().map(|p| p.to_string()),
            "name": m.name().to_string(), "action": action, "live": live, "desired": desired,
        }));
    }
    Ok(items)
}

async fn live_meta(tx: &mut dyn Tx, m: &Manifest) -> Result<Option<Meta>, ApplyError> {
    Ok(match m {
        Manifest::Project(p) => tx
            .get_project_by_slug(p.metadata.name.as_str())
            .await?
            .map(|p| p.meta),
        Manifest::Host(h) => tx
            .get_host_by_name(h.metadata.name.as_str())
            .await?
            .map(|h| h.meta),
        Manifest::Source(s) => tx
            .get_source_by_name(s.metadata.name.as_str())
            .await?
            .map(|s| s.meta),
        Manifest::Task(t) => match tx.get_project_by_slug(t.metadata.project.as_str()).await? {
            None => None,
            Some(p) => tx
                .get_work_item_by_name(p.id, t.metadata.name.as_str())
                .await?
                .map(|w| w.meta),
        },
        Manifest::Run(r) => match tx.get_project_by_slug(r.metadata.project.as_str()).await? {
            None => None,
            Some(p) => tx
                .get_run_by_name(p.id, r.metadata.name.as_str())
                .await?
                .map(|r| r.meta),
        },
    })
}
