//! The rules: every change to a stored object, in exactly one function.
//!
//! One module per aggregate — [`projects`], [`work_items`], [`runs`],
//! [`hosts`], [`tokens`], [`sources`], [`webhooks`], [`secrets`], [`schedules`],
//! [`leases`] (attach) — plus [`meta`], the one home of the generation
//! rule. A rule function takes the transaction and the injected time, calls
//! the state-machine gate (`pam_manifests::state`, the sole gate), writes
//! columns and spec together with generation, observedGeneration and
//! conditions, and appends its event — all or nothing, in the caller's
//! transaction. Apply, the HTTP handlers (and so the dashboard), signal
//! ingest and the loops call these functions; none of them patches a row,
//! a spec or the journal by hand.
//!
//! # Guarantees
//! - A spec change from any path bumps `generation` exactly once, and
//!   `observedGeneration` and the `Applied` condition follow in the same
//!   write ([`meta::set_desired`]).
//! - Every status change passes the gate before it is written; the store
//!   guards it again (`WHERE status = $from`).
//! - A rule never commits: the caller commits through
//!   [`crate::ctx::Ctx::commit`], which publishes the events only after
//!   the commit.
//!
//! # Layer
//! Rules sit above the store and the journal (`events`) and below
//! everything that decides *when* a change happens (api, apply, reconcile).
//! They import nothing from those layers.

pub mod access;
pub mod each_kind;
pub mod hosts;
pub mod kind;
pub mod leases;
pub mod meta;
pub mod objects;
pub mod projects;
pub mod runs;
pub mod schedules;
pub mod secrets;
pub mod sources;
pub mod tokens;
pub mod webhooks;
pub mod work_items;

use pam_store::StoreError;

/// Why a rule refused a change of desired state.
#[derive(Debug, thiserror::Error)]
pub enum RuleError {
    /// The desired state asks for something this object cannot do, for
    /// these fields of its spec (`spec.parent`, `spec.status`, an immutable
    /// field): each `(path, message)`. Nothing was written for it; apply
    /// positions each at its field.
    #[error("{}", .0.iter().map(|(p, m)| format!("{p}: {m}")).collect::<Vec<_>>().join("; "))]
    Fields(Vec<(String, String)>),
    /// The store refused or failed (a conflict, a missing row, …).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl RuleError {
    fn field(path: &str, message: impl Into<String>) -> RuleError {
        RuleError::Fields(vec![(path.to_string(), message.into())])
    }
}

/// Refuses a change to an immutable field (a Run's task, provider, prompt,
/// cwd, command; a Task's type), naming each field with `message`.
fn check_immutable(
    kind: pam_manifests::Kind,
    stored: &serde_json::Value,
    desired: &serde_json::Value,
    message: &str,
) -> RuleResult<()> {
    let changed = pam_manifests::immutable_changes(kind, stored, desired);
    if changed.is_empty() {
        return Ok(());
    }
    Err(RuleError::Fields(
        changed
            .into_iter()
            .map(|f| (f.to_string(), message.to_string()))
            .collect(),
    ))
}

pub type RuleResult<T> = Result<T, RuleError>;
