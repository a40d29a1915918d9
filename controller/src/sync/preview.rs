//! `pamctl diff source NAME [--revision REF]` (issue 35, Argo CD's app
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
use super::fetch::{self, Repos};
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
    let tree = match (&spec.path, &spec.git) {
        (Some(p), _) => {
            if revision.is_some() {
                return Ok(Preview::Refused(
                    "a directory Source has no revisions to choose from: leave --revision out"
                        .into(),
                ));
            }
            let root = match repos.dirs.resolve(p) {
                Ok(root) => root,
                Err(refused) => return Ok(Preview::Refused(refused)),
            };
            match tokio::task::spawn_blocking(move || fetch::read_dir(&root)).await? {
                Ok(t) => t,
                Err(e) => return Ok(Preview::Refused(format!("{e:#}"))),
            }
        }
        (None, Some(git)) => {
            let mirror = repos.mirror(s.id);
            let reference = revision.unwrap_or(&git.reference);
            let read = async {
                let commit = mirror.fetch(&git.url, reference).await?;
                mirror.tree(&commit, &git.path, &|_| None).await
            };
            match read.await {
                Ok(t) => t,
                Err(e) => return Ok(Preview::Refused(format!("{e:#}"))),
            }
        }
        (None, None) => return Ok(Preview::Refused("neither spec.path nor spec.git".into())),
    };
    let vars = match super::substitute::vars_of(ctx, spec).await? {
        None => None,
        Some(Ok(v)) => Some(v),
        Some(Err(why)) => return Ok(Preview::Refused(why)),
    };
    let mut docs: Vec<(Document, Value)> = Vec::new();
    let mut problems = Vec::new();
    for f in &tree.files {
        let parsed = match &vars {
            Some(v) => {
                pam_manifests::load::parse_documents_and_values_substituted(&f.path, &f.content, v)
            }
            None => pam_manifests::load::parse_documents_and_values(&f.path, &f.content),
        };
        match parsed {
            Ok(d) => docs.extend(d),
            Err(e) => problems.extend(e),
        }
    }
    if !problems.is_empty() {
        return Ok(Preview::Refused(lines(&problems)));
    }
    // Applied as a sync would, then rolled back: the transaction is
    // dropped, never committed.
    let mut tx = ctx.store.begin().await?;
    let owned = tx.owned_objects(s.id).await?;
    let refs: Vec<&(Document, Value)> = docs.iter().collect();
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
