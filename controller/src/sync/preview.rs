//! `pamctl diff source NAME [--revision REF]` (Argo CD's app
//! diff): what the Source's next sync — or a sync of `REF` — would change,
//! by the sync's own code in a transaction that is rolled back. The tree is
//! read as a sync reads it (the directory, or the git mirror fetched at
//! the ref), substituted and validated, and applied against the stored
//! state and inventory; nothing is written, journaled or pruned.

use pam_manifests::kinds::SourceSpec;
use pam_manifests::load::Document;
use pam_store::Source;
use serde_json::Value;

use super::apply::{apply_tree, Prev, SyncError};
use super::cache::SourceCache;
use super::fetch::Repos;
use crate::apply::ApplyResult;
use crate::ctx::Ctx;

/// What the preview found.
pub enum Preview {
    /// The revision and the changes it would make (none: in sync).
    Changes {
        revision: String,
        changes: Vec<ApplyResult>,
    },
    /// The revision cannot be read, or its tree is invalid: what a sync
    /// would fail with (`source_error` lines for an invalid tree).
    Refused(String),
}

/// Previews a sync of `s` at `revision` (its spec's ref when `None`).
pub async fn preview(
    ctx: &Ctx,
    repos: &Repos,
    s: &Source,
    spec: &SourceSpec,
    revision: Option<&str>,
) -> anyhow::Result<Preview> {
    let root = match &spec.path {
        Some(_) if revision.is_some() => {
            return Ok(Preview::Refused(
                "a directory Source has no revisions to choose from: leave --revision out".into(),
            ))
        }
        Some(p) => match repos.dirs.resolve(p) {
            Ok(root) => Some(root),
            Err(refused) => return Ok(Preview::Refused(refused)),
        },
        None => None,
    };
    let tree = match super::runner::read_tree(repos, s, spec, root.as_deref(), revision).await {
        Ok(t) => t,
        Err(e) => return Ok(Preview::Refused(format!("{e:#}"))),
    };
    let vars = match super::substitute::vars_of(ctx, spec).await? {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(why)) => return Ok(Preview::Refused(why)),
    };
    // Parsed as a sync parses it (a cache of its own, dropped after).
    let loaded = SourceCache::default().load(&tree, vars.as_ref());
    let problems = loaded.errors();
    if !problems.is_empty() {
        return Ok(Preview::Refused(lines(&problems)));
    }
    // Applied as a sync would, then rolled back: the transaction is
    // dropped, never committed.
    let mut tx = ctx.store.begin().await?;
    let owned = tx.owned_objects(s.id).await?;
    let refs: Vec<&(Document, Value)> = loaded.documents().collect();
    let applied = apply_tree(
        tx.as_mut(),
        s,
        spec,
        &refs,
        Prev::Whole(&owned),
        ctx.now(),
        ctx.thresholds.offline_after,
    )
    .await;
    drop(tx);
    match applied {
        Ok(a) => Ok(Preview::Changes {
            revision: tree.revision,
            changes: a.changes,
        }),
        Err(SyncError::Invalid(errors)) => Ok(Preview::Refused(lines(&errors))),
        Err(SyncError::Other(why)) => Ok(Preview::Refused(why)),
    }
}

/// Problems one per line, as the Source's status says them.
fn lines(errors: &[pam_manifests::ManifestError]) -> String {
    errors
        .iter()
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
