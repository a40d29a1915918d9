//! The dispatch predicate (issue 29: one home). Which host may receive new
//! runs, and which pending run a host's claim may take — in Rust (the
//! memory store's claim, the timeout's "an eligible host was seen") and,
//! beside it, in SQL (PostgreSQL's claim). The store conformance suite
//! runs both stores' claims through the same cases, so the two forms stay
//! one rule.
//!
//! A run is claimable by a host when it is pending, not asked to stop,
//! dispatchable (`dispatchable_since` set: its dependencies were done when
//! it was last gated, issue 17), its target matches the host
//! ([`crate::Target::matches`]), none of its task's dependencies is undone,
//! no Secret it names is missing (issue 18) and its project is not over
//! budget (issue 21). The host itself must be [`host_eligible`]; capacity
//! is the claim's `limit`.

use pam_manifests::state::{HostStatus, RunStatus};

use crate::{Host, Run};

/// A host may receive new runs when it is online, not disabled and not
/// instance-suspect (OQ-14; pam-data-model.txt, "pending → failed").
pub fn host_eligible(h: &Host) -> bool {
    h.status == HostStatus::Online && !h.disabled && !h.instance_suspect
}

/// What a claim knows about a run beyond its row.
#[derive(Debug, Clone, Copy, Default)]
pub struct Waits {
    /// A dependency of its task is not done.
    pub blocked: bool,
    /// A Secret its environment names does not exist yet.
    pub secret_missing: bool,
    /// Its project's `BudgetExceeded` condition is True.
    pub over_budget: bool,
}

/// Whether `host`'s claim may take pending run `r` (the Rust form of
/// [`CLAIMABLE_SQL`]).
pub fn run_claimable(r: &Run, host: &Host, waits: Waits) -> bool {
    r.status == RunStatus::Pending
        && !r.stop_requested
        && r.dispatchable_since.is_some()
        && r.target.matches(host)
        && !waits.blocked
        && !waits.secret_missing
        && !waits.over_budget
}

/// [`run_claimable`] as a `WHERE` clause over `runs`: `$2` is the host's
/// name, `$3` its labels ([`Host::labels`]) as JSON; `{blocked}` is
/// replaced by the store's "task has an undone dependency" test of
/// `runs.task_id`. The project's budget is the condition
/// [`pam_manifests::conditions::BUDGET_EXCEEDED`].
pub const CLAIMABLE_SQL: &str = "status = 'pending' AND dispatchable_since IS NOT NULL \
    AND NOT stop_requested \
    AND (target = '{}'::jsonb OR target->>'host' = $2 \
         OR (target ? 'selector' AND $3::jsonb @> (target->'selector'))) \
    AND NOT {blocked} \
    AND NOT EXISTS (SELECT 1 FROM run_secret_waits w WHERE w.run_id = runs.id) \
    AND NOT EXISTS (SELECT 1 FROM projects p WHERE p.id = runs.project_id \
        AND p.conditions @> '[{\"type\":\"BudgetExceeded\",\"status\":\"True\"}]')";

#[cfg(test)]
mod tests {
    #[test]
    fn the_sql_names_the_budget_condition_of_the_vocabulary() {
        assert!(super::CLAIMABLE_SQL.contains(&format!(
            "\"type\":\"{}\"",
            pam_manifests::conditions::BUDGET_EXCEEDED
        )));
    }
}
