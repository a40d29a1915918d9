//! pam-store: everything pamd keeps, behind one [`Store`] with two
//! implementations — [`postgres::PgStore`] (production) and
//! [`memory::MemStore`] (fast unit tests of the loops). One behaviour suite,
//! [`conformance`], runs against both (River's driver test suite is the
//! model), so MemStore cannot drift from PostgreSQL.
//!
//! # Guarantees
//! - All access goes through a transaction ([`Store::begin`] → [`Tx`]);
//!   nothing is visible to others before [`Tx::commit`], and dropping a `Tx`
//!   without committing rolls it back.
//! - Status writes are guarded (`UPDATE … WHERE status = $expected`): zero
//!   rows is [`StoreError::Conflict`], or [`StoreError::NotFound`] when the
//!   row does not exist at all (every guarded write, spec or status). Before writing, every status change
//!   also passes the state-machine gate ([`pam_manifests::state::transition`]),
//!   so a store can never write an illegal edge ([`StoreError::Illegal`]).
//! - Spec writes are guarded by `resource_version`; a stale one is
//!   [`StoreError::Conflict`].
//! - Events appended in a transaction get sequence numbers in commit order:
//!   the first append of a transaction takes a transaction-scoped lock that
//!   is held until commit, so a reader that has seen seq N will never later
//!   see a newly committed seq < N. [`Tx::commit`] returns the appended
//!   events so the caller publishes them to subscribers only after commit.
//! - Every row write bumps that row's `resource_version` (spec writes, status
//!   writes, claims, progress); `generation` is the caller's to set.
//!
//! # Caveats
//! - After a failed `insert_*`, a Conflict or an Illegal, the transaction is
//!   still usable. After any other error, drop it and begin again:
//!   PostgreSQL aborts a transaction on a constraint error.

//!
//! # Layout
//! One module per aggregate — [`projects`], [`work_items`], [`runs`] (with
//! the one-shot signal markers), [`hosts`], [`events`] (the journal),
//! [`tokens`], [`sources`] (GitOps), [`secrets`] and [`schedules`] — each
//! holding its row types and its part of the transaction ([`WorkItemTx`],
//! [`RunTx`], [`HostTx`], [`EventTx`], [`TokenTx`]), and [`named`] the
//! calls every kind with a table of its own shares ([`NamedTx`]); [`Tx`] is
//! all of them plus commit. The two implementations follow the same split
//! ([`postgres`], [`memory`]). The conformance suite lives in this crate's
//! tests (`tests/conformance/`). [`db`] embeds the migrations; [`embedded`]
//! runs the private PostgreSQL cluster pamd uses by default. Nothing here
//! knows about HTTP, the loops or the event bus: this crate is the bottom
//! layer of pamd.

pub mod activity;
pub mod applysets;
pub mod attach;
pub mod charts;
pub mod db;
pub mod deps;
pub mod dispatch;
pub mod embedded;
pub mod events;
pub mod hosts;
pub mod idempotency;
pub mod leader;
pub mod managed;
pub mod memory;
pub mod named;
pub mod objects;
pub mod postgres;
pub mod projects;
pub mod results;
pub mod runs;
pub mod schedules;
pub mod secrets;
pub mod sources;
pub mod tokens;
pub mod usage;
pub mod webhooks;
pub mod work_items;

use std::collections::BTreeMap;

use async_trait::async_trait;
use pam_manifests::state::IllegalTransition;
use serde_json::Value;
use uuid::Uuid;

pub use activity::{ActivityAppend, RunActivityTx};
pub use applysets::{ApplySetRecord, ApplySetTx};
pub use attach::{AttachLease, AttachRefusal, AttachTx};
pub use charts::ChartTx;
pub use deps::{DependencyLink, DependencyTx, Gated};
pub use events::{Event, EventTx, JournalPage, Journaled, Position};
pub use hosts::{Host, HostTx};
pub use idempotency::{Claimed, IdempotencyClaim, IdempotencyTx};
pub use leader::{LeaderTx, Lease};
pub use managed::{ManagedEntry, ManagedFields, ManagedFieldsTx};
pub use named::{NamedKind, NamedTx};
pub use objects::{Object, ObjectTx};
pub use projects::Project;
pub use results::{RunResultRow, RunResultTx};
pub use runs::{
    Denials, Denied, PendingRun, Run, RunFilter, RunTx, RunUpdate, SignalMarker, Target,
    DENIALS_KEPT,
};
pub use schedules::{Schedule, ScheduleTx};
pub use secrets::{Secret, SecretTx, SecretWait};
pub use sources::{OwnedObject, Source, SourceObject, SourceStatus, SourceTx};
pub use tokens::{ApiToken, CustomRole, Permission, Role, TokenKind, TokenTx};
pub use usage::{RunUsage, Usage};
pub use webhooks::{Delivery, DeliveryFilter, DeliveryOutcome, DeliveryStatus, Webhook, WebhookTx};
pub use work_items::{WorkItem, WorkItemTx};

/// Every store trait, for `use pam_store::prelude::*`: calling a method of
/// a `dyn Tx` needs the aggregate trait that declares it in scope.
pub mod prelude {
    pub use crate::{
        AttachTx, ChartTx, DependencyTx, EventTx, HostTx, IdempotencyTx, LeaderTx, ManagedFieldsTx,
        ObjectTx, RunActivityTx, RunResultTx, RunTx, ScheduleTx, SecretTx, SourceTx, Store,
        TokenTx, Tx, WebhookTx, WorkItemTx,
    };
}

pub type Labels = BTreeMap<String, String>;

/// What can go wrong in a store call. Every variant says when it happens.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A guarded update matched no row: the status, attempt or resource
    /// version was not what the caller expected (someone else changed it
    /// first). A row that is gone is [`StoreError::NotFound`] instead.
    #[error("conflict: {0}")]
    Conflict(String),
    /// An insert collided with a unique key (name, slug, session name…).
    /// The string names the constraint or the key.
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// The row the call names does not exist, or an insert references a
    /// row that does not (foreign key).
    #[error("not found: {0}")]
    NotFound(String),
    /// The state-machine gate refused the transition.
    #[error(transparent)]
    Illegal(#[from] IllegalTransition),
    /// A structural rule was broken (cross-project parent, a cycle, a CHECK
    /// constraint, deleting a host that runs still reference, …).
    #[error("invalid: {0}")]
    Invalid(String),
    /// A fenced transaction's leader lease moved on: another process
    /// leads now, and this one must write nothing.
    #[error("fenced: {0}")]
    Fenced(String),
    /// The database cannot serve now, and trying again later may work:
    /// it does not answer (down, unreachable, no connection free within
    /// the pool's acquire timeout), or a wait was cut short — a lock not
    /// granted within `lock_timeout` (another session holds it, perhaps a
    /// stopped process), a statement past `statement_timeout`, a session
    /// ended idle in its transaction. Nothing was committed.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The database failed otherwise. Not the caller's fault.
    #[error("database error: {0}")]
    Database(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

/// Metadata shared by the four declarative kinds.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// The applied spec as JSON (last-applied, used for diffs and
    /// idempotency).
    pub spec: Value,
    pub labels: Labels,
    pub annotations: Labels,
    /// Bumps on spec change only.
    pub generation: i64,
    /// Bumps on every write; optimistic concurrency token. Set by the store.
    pub resource_version: i64,
    pub observed_generation: i64,
    /// `[{type, status, reason, message, lastTransitionTime}]`.
    pub conditions: Value,
}

impl Default for Meta {
    fn default() -> Self {
        Meta {
            spec: Value::Object(Default::default()),
            labels: Labels::new(),
            annotations: Labels::new(),
            generation: 1,
            resource_version: 1,
            observed_generation: 0,
            conditions: Value::Array(vec![]),
        }
    }
}

/// First 8 lowercase hex characters of a UUID (path segments, sessions).
pub fn short_id(id: Uuid) -> String {
    id.simple().to_string()[..8].to_string()
}

/// The storage backend.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// Starts a transaction. Every read and write happens in one.
    async fn begin(&self) -> StoreResult<Box<dyn Tx>>;

    /// Starts a transaction on connections kept for liveness (heartbeats, the
    /// re-check of held tokens), which the pool's other work cannot take: under
    /// load a host is not declared offline, nor a token's check lapse, for want
    /// of a connection. Use for small, short transactions only.
    async fn begin_priority(&self) -> StoreResult<Box<dyn Tx>> {
        self.begin().await
    }

    /// Whether the store can serve: the database answers and every
    /// migration this build knows is applied (`/readyz`). The reason when
    /// not.
    async fn ready(&self) -> Result<(), String>;

    /// A wake-up each time another process may have committed events
    /// (PostgreSQL: `LISTEN pam_events`, notified by every journaling
    /// commit; a reconnect wakes too, since notifications may have been
    /// missed while it lasted). `None`: no other process shares this store
    /// (MemStore). The journal stays the truth: a wake-up says "read
    /// after what you have", never what to read.
    async fn journal_wakeups(&self) -> StoreResult<Option<tokio::sync::mpsc::Receiver<()>>> {
        Ok(None)
    }

    /// One page of the journal after `after` for a follower
    /// ([`EventTx::journal_after`] and [`EventTx::journal_held`] in one
    /// read; PostgreSQL: one statement, no transaction around it).
    async fn read_journal(&self, after: Position, limit: i64) -> StoreResult<JournalPage> {
        let mut tx = self.begin().await?;
        let events = tx.journal_after(after, limit).await?;
        let held = tx.journal_held().await?;
        Ok(JournalPage { events, held })
    }

    /// Waits until every transaction in flight when called has ended, at
    /// most `limit`: then [`EventTx::journal_after`] reaches every event
    /// committed before the call (a client that wrote and then reads the
    /// journal finds its write). Past `limit` it returns anyway: what is
    /// read is still in order, only not yet complete. Nothing to wait for
    /// in memory.
    async fn journal_barrier(&self, limit: std::time::Duration) -> StoreResult<()> {
        let _ = limit;
        Ok(())
    }

    /// Refreshes the query planner's statistics of the run queue
    /// (PostgreSQL: `ANALYZE runs`). A bulk of new pending runs makes the
    /// claim's plan from stale statistics walk and sort every pending run
    /// (30× slower at 10,000) until autovacuum analyzes; pamd
    /// calls this after a batch that created many. Nothing to do in memory.
    async fn refresh_statistics(&self) -> StoreResult<()> {
        Ok(())
    }

    /// The tokens with these fingerprints (those found, in no order) as
    /// one statement outside a transaction: every API request looks its
    /// bearer token up, a transaction around that read cost two more
    /// round trips (`BEGIN`, `ROLLBACK`) per request, and the
    /// requests waiting together are looked up together (pamd's
    /// `crate::batch::read` in pamd) — in PostgreSQL on the connections kept for
    /// [`Store::begin_priority`]. Not while the caller holds a transaction:
    /// MemStore's transactions take turns.
    async fn tokens_by_fingerprints(&self, fps: &[String]) -> StoreResult<Vec<ApiToken>> {
        let mut tx = self.begin().await?;
        let mut found = Vec::with_capacity(fps.len());
        for fp in fps {
            found.extend(tx.get_token_by_fingerprint(fp).await?);
        }
        Ok(found)
    }

    /// The token with fingerprint `fp` ([`Store::tokens_by_fingerprints`]).
    async fn token_by_fingerprint(&self, fp: &str) -> StoreResult<Option<ApiToken>> {
        Ok(self
            .tokens_by_fingerprints(&[fp.to_string()])
            .await?
            .into_iter()
            .next())
    }
}

/// One transaction over every aggregate. `now` arguments come from the
/// caller's injected clock; stores never read the wall clock.
#[async_trait]
pub trait Tx:
    NamedTx<Project>
    + NamedTx<Host>
    + NamedTx<Source>
    + NamedTx<Webhook>
    + NamedTx<Secret>
    + NamedTx<Schedule>
    + NamedTx<Object>
    + AttachTx
    + ChartTx
    + WorkItemTx
    + RunTx
    + RunResultTx
    + RunActivityTx
    + ApplySetTx
    + DependencyTx
    + HostTx
    + EventTx
    + TokenTx
    + SourceTx
    + WebhookTx
    + IdempotencyTx
    + SecretTx
    + ScheduleTx
    + LeaderTx
    + ManagedFieldsTx
    + ObjectTx
    + Send
{
    /// Commits, returning the events appended in this transaction (in seq
    /// order) so the caller can publish them now that they are durable.
    async fn commit(self: Box<Self>) -> StoreResult<Journaled>;

    /// Whether this transaction appended events (so its commit must be
    /// ordered with the other journaling commits before publishing).
    /// Conservative default: yes.
    fn has_events(&self) -> bool {
        true
    }

    /// The events appended so far in this transaction, in seq order (the
    /// webhook fan-out reads them before commit).
    fn pending_events(&self) -> &Journaled;
}
