//! The condition types objects carry in `status.conditions` — the one
//! vocabulary (issue 29): rules set them, the stores read some of them
//! (PostgreSQL's dispatch filter, the memory store's), pamctl and the
//! dashboard show them. A condition's reason and message say why.

/// Every object: the spec of `metadata.generation` is accepted
/// (`observedGeneration` follows it).
pub const APPLIED: &str = "Applied";
/// A Source (Flux's kstatus): its revision is applied and in sync.
pub const READY: &str = "Ready";
/// A Source: a sync is under way, or waits (files settling).
pub const RECONCILING: &str = "Reconciling";
/// A Source: it cannot progress without a change (a bad revision, a
/// refused path).
pub const STALLED: &str = "Stalled";
/// A project or run: its budget is spent; the project's pending runs are
/// not dispatched (issue 21).
pub const BUDGET_EXCEEDED: &str = "BudgetExceeded";
/// A run: its task waits for dependencies (issue 17).
pub const BLOCKED: &str = "Blocked";
/// A run: it points at a milestone or epic (journaled, not repaired).
pub const INTEGRITY_ANOMALY: &str = "IntegrityAnomaly";
/// A run: a Secret its environment names does not exist yet (issue 18).
pub const SECRET_MISSING: &str = "SecretMissing";
