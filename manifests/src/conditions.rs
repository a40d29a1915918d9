//! The condition types objects carry in `status.conditions` — the one
//! vocabulary: rules set them, the stores read some of them
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
/// A Source whose `spec.suspend` is true: no syncs, no pushes
/// taken; its objects stay.
pub const SUSPENDED: &str = "Suspended";
/// A project or run: its budget is spent; the project's pending runs are
/// not dispatched.
pub const BUDGET_EXCEEDED: &str = "BudgetExceeded";
/// A run: its task waits for dependencies.
pub const BLOCKED: &str = "Blocked";
/// A run: it points at a milestone or epic (journaled, not repaired).
pub const INTEGRITY_ANOMALY: &str = "IntegrityAnomaly";
/// A run: its agent was refused tool calls by the run's permissions; the
/// message names the tools and what they would have acted on. A run
/// with it never reads as a plain success.
pub const PERMISSION_DENIED: &str = "PermissionDenied";
/// A run: a Secret its environment names does not exist yet.
pub const SECRET_MISSING: &str = "SecretMissing";
/// A pending run: why it has not been placed on a host yet.
/// `False` while it waits, with one of the `SCHEDULED_*` reasons below and
/// a message counted over the hosts (`0/5 hosts can run it: 2 lack
/// provider claude, 1 cordoned`); the one place these reasons are named.
pub const SCHEDULED: &str = "Scheduled";
/// [`SCHEDULED`]: no host can run it now (the message counts why per host).
pub const SCHEDULED_UNSCHEDULABLE: &str = "Unschedulable";
/// [`SCHEDULED`]: some host can run it; it waits for that host's claim.
pub const SCHEDULED_WAITING_FOR_CLAIM: &str = "WaitingForClaim";
/// [`SCHEDULED`]: its task waits for dependencies ([`BLOCKED`]).
pub const SCHEDULED_BLOCKED_BY_DEPENDENCIES: &str = "BlockedByDependencies";
/// [`SCHEDULED`]: a Secret it names is missing ([`SECRET_MISSING`]).
pub const SCHEDULED_SECRET_MISSING: &str = "SecretMissing";
/// [`SCHEDULED`]: its project is over budget ([`BUDGET_EXCEEDED`]).
pub const SCHEDULED_BUDGET_EXCEEDED: &str = "BudgetExceeded";
