//! Tokens' `lastUsedAt` written together.
//!
//! A token's use is written at most once a minute
//! ([`tokens::LAST_USED_GRANULARITY`]); at 10,000 watching workers that
//! is still 167 writes a second, each its own transaction. Uses are
//! gathered instead — off the request's path, as before — for up to
//! [`GATHER`] and written by one statement ([`tokens::touch`]), so the
//! fleet's tokens cost about one transaction a second.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tracing::Instrument;
use uuid::Uuid;

use crate::batch::{self, Group, Writer};
use crate::ctx::Ctx;
use crate::rules::tokens;

/// How long uses gather before they are written.
pub const GATHER: Duration = Duration::from_secs(1);

/// The uses waiting to be written, `(token, when)` (one per
/// [`crate::api::AppState`]).
pub type TokenUses = Group<(Uuid, DateTime<Utc>)>;

/// Notes that token `id` was used at `at`, for the next write.
pub fn record(ctx: &Ctx, uses: &Arc<TokenUses>, id: Uuid, at: DateTime<Utc>) {
    if uses.push((id, at)) {
        tokio::spawn(write(ctx.clone(), uses.clone()).in_current_span());
    }
}

/// Writes what gathered every [`GATHER`] until nothing is pending.
async fn write(ctx: Ctx, uses: Arc<TokenUses>) {
    let mut writer = Writer::new(uses.clone());
    loop {
        tokio::time::sleep(GATHER).await;
        let Some(gathered) = uses.next(&mut writer, batch::all) else {
            return;
        };
        // Each token's latest use.
        let mut latest: HashMap<Uuid, DateTime<Utc>> = HashMap::new();
        for (id, at) in gathered {
            let e = latest.entry(id).or_insert(at);
            *e = (*e).max(at);
        }
        let batch: Vec<(Uuid, DateTime<Utc>)> = latest.into_iter().collect();
        let written = async {
            let mut tx = ctx.store.begin().await?;
            tokens::touch(tx.as_mut(), &batch).await?;
            ctx.commit(tx).await
        };
        if let Err(e) = written.await {
            // A use is a hint, not an accepted write: the next
            // request of the token records it again.
            tracing::debug!(error = %e, tokens = batch.len(), "cannot record tokens' last use");
        }
    }
}
