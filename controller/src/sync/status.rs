//! The statuses of a sync that applied nothing: failed (a refused path,
//! an unreadable or invalid tree, a refused apply) or deferred (files
//! still being written) — each written in its own transaction.

use pam_manifests::kinds::HealthState;
use pam_store::Source;

use super::apply::{source_error, SyncError};
use super::health::health_of;
use crate::ctx::Ctx;
use crate::rules::sources::{self, Health, Outcome};

/// A sync deferred for files still being written: nothing applied, the
/// status says what it waits for (rules::sources::waiting); tried again
/// after [`super::runner::WAIT_RETRY`].
pub(super) async fn defer(
    ctx: &Ctx,
    s: Source,
    why: &str,
) -> anyhow::Result<Option<(Source, &'static str)>> {
    tracing::info!(source = %s.name, why, "sync deferred: waiting for files to settle");
    let mut tx = ctx.store.begin().await?;
    let s = tx.get::<Source>(s.id).await?.unwrap_or(s);
    sources::waiting(tx.as_mut(), s, why, ctx.now()).await?;
    ctx.commit(tx).await?;
    Ok(None)
}

/// A sync that applied nothing: its status, from its error.
pub(super) async fn refused(
    ctx: &Ctx,
    s: Source,
    revision: String,
    e: SyncError,
) -> anyhow::Result<Source> {
    match e {
        SyncError::Invalid(errors) => invalid(ctx, s, revision, errors).await,
        SyncError::Other(m) => failed(ctx, s, Some(revision), Vec::new(), m).await,
    }
}

/// A tree with problems: Failed, naming each (file, line, field).
pub(super) async fn invalid(
    ctx: &Ctx,
    s: Source,
    revision: String,
    errors: Vec<pam_manifests::ManifestError>,
) -> anyhow::Result<Source> {
    let list: Vec<_> = errors.iter().map(source_error).collect();
    let message = match errors.len() {
        1 => errors[0].to_string(),
        n => format!("{} (and {} more problem(s))", errors[0], n - 1),
    };
    failed(ctx, s, Some(revision), list, message).await
}

/// Writes a failed sync's status (in its own transaction: the sync's was
/// rolled back); the last good revision and the objects stay.
pub(super) async fn failed(
    ctx: &Ctx,
    s: Source,
    attempted: Option<String>,
    errors: Vec<pam_manifests::kinds::SourceError>,
    message: String,
) -> anyhow::Result<Source> {
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    let s = tx.get::<Source>(s.id).await?.unwrap_or(s);
    let owned = tx.owned_objects(s.id).await?;
    // Nothing applied yet: no health to roll up (not "Healthy").
    let health = if s.status.revision.is_none() {
        Health {
            status: HealthState::Unknown,
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
