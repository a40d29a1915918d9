//! The dispatch predicate (one home). Which host may receive new
//! runs, and which pending run a host's claim may take — in Rust (the
//! memory store's claim, the timeout's "an eligible host was seen") and,
//! beside it, in SQL (PostgreSQL's claim). The store conformance suite
//! runs both stores' claims through the same cases, so the two forms stay
//! one rule.
//!
//! A run is claimable by a host when it is pending, not asked to stop,
//! dispatchable (`dispatchable_since` set: its dependencies were done when
//! it was last gated), its target matches the host
//! ([`crate::Target::matches`]), none of its task's dependencies is undone,
//! no Secret it names is missing, its project is not over
//! budget and the host has its provider, at the version
//! `spec.providerVersion` asks for ([`host_has_provider`]), and
//! a run with a workspace goes to no host whose workspace volume is below
//! its worker's `min_free_bytes` ([`uses_workspace`]), and a
//! run with `permissions: full` only to a host that takes it
//! ([`asks_full`], [`allows_full`]). The host itself must be
//! [`host_eligible`]; capacity is the claim's `limit`.

use pam_manifests::state::{HostStatus, RunStatus};

use crate::{Host, Run};

impl crate::runs::PendingRun {
    /// `task_spec`: its task's spec (for the task's default workspace).
    pub fn of(r: &Run, task_spec: Option<&serde_json::Value>) -> Self {
        Self {
            id: r.id,
            project_id: r.project_id,
            provider: r.provider.clone(),
            provider_version: provider_version(r).map(str::to_string),
            target: r.target.clone(),
            stop_requested: r.stop_requested,
            dispatchable_since: r.dispatchable_since,
            dispatch_timeout_seconds: r.dispatch_timeout_seconds,
            eligible_host_seen: r.eligible_host_seen,
            uses_workspace: uses_workspace(r, task_spec),
            asks_full: asks_full(r),
            scheduled: crate::runs::scheduled_of(&r.meta),
        }
    }
}

/// A run's `spec.providerVersion`: the semver requirement a
/// host's reported version of its provider must meet.
pub fn provider_version(r: &Run) -> Option<&str> {
    r.meta.spec.get("providerVersion").and_then(|v| v.as_str())
}

/// [`RunStatus::is_live`] over `runs`: spawning or running, the
/// predicate of the `runs_live` partial index (migration 0002), which the
/// reads of live runs use.
pub const LIVE_SQL: &str = "status IN ('spawning', 'running')";

/// Whether `host` can start `provider` at a version meeting `req` (issue
/// 31). A host whose worker never reported capabilities (an older worker)
/// is taken to have every provider, as before capabilities existed, but
/// no known version: it meets no requirement.
pub fn host_has_provider(host: &Host, provider: &str, req: Option<&str>) -> bool {
    match (&host.capabilities, req) {
        (None, None) => true,
        (None, Some(_)) => false,
        (Some(caps), req) => caps.provider(provider).is_some_and(|p| {
            req.is_none_or(|req| pam_manifests::versions::satisfies(p.version.as_deref(), req))
        }),
    }
}

/// The key [`CLAIMABLE_SQL`] looks a (provider, requirement) pair up by in
/// `$7`, the pairs the host meets ([`requirements_met`]).
pub fn requirement_key(provider: &str, req: &str) -> String {
    format!("{provider} {req}")
}

/// Of the (provider, requirement) pairs pending runs ask for, the keys
/// ([`requirement_key`]) of those `host` meets: PostgreSQL cannot read a
/// semver requirement, so the claim decides them here, once per distinct
/// pair, by the same [`host_has_provider`].
pub fn requirements_met(host: &Host, pairs: &[(String, String)]) -> Vec<String> {
    pairs
        .iter()
        .filter(|(provider, req)| host_has_provider(host, provider, Some(req)))
        .map(|(provider, req)| requirement_key(provider, req))
        .collect()
}

/// `$6` of [`CLAIMABLE_SQL`]: the names of the providers the host has, as
/// a JSON array; `None` (SQL NULL) when it never reported any.
pub fn providers_json(host: &Host) -> Option<serde_json::Value> {
    host.capabilities.as_ref().map(|c| {
        serde_json::Value::Array(
            c.providers
                .iter()
                .map(|p| serde_json::Value::String(p.name.clone()))
                .collect(),
        )
    })
}

/// Whether run `r` works in a git workspace: its own
/// `spec.workspace`, or — a run that names no `cwd` — its task's
/// (`task_spec`). `rules::runs::workspace::order` resolves the workspace
/// itself by the same precedence; [`USES_WORKSPACE_SQL`] is the SQL form.
pub fn uses_workspace(r: &Run, task_spec: Option<&serde_json::Value>) -> bool {
    r.meta.spec.get("workspace").is_some()
        || (r.cwd.is_empty() && task_spec.is_some_and(|t| t.get("workspace").is_some()))
}

/// [`uses_workspace`] over `runs`.
pub const USES_WORKSPACE_SQL: &str = "(runs.spec ? 'workspace' OR (runs.cwd = '' AND EXISTS     (SELECT 1 FROM work_items t WHERE t.id = runs.task_id AND t.spec ? 'workspace')))";

/// Whether `host` reported its workspace volume below its worker's
/// `[workspaces] min_free_bytes`: it takes no run with a
/// workspace. `$8` of [`CLAIMABLE_SQL`].
pub fn workspace_low(host: &Host) -> bool {
    host.capabilities
        .as_ref()
        .is_some_and(|c| c.workspace_low())
}

/// Whether run `r` asks for `permissions: full` (settled when it was
/// created); [`ASKS_FULL_SQL`] is the SQL form.
pub fn asks_full(r: &Run) -> bool {
    r.permissions
        .as_ref()
        .is_some_and(|p| p.permissions.mode == pam_manifests::kinds::PermissionMode::Full)
}

/// [`asks_full`] over `runs`.
pub const ASKS_FULL_SQL: &str = "(runs.permissions->>'mode' = 'full')";

/// Whether `host` takes runs with `permissions: full`
/// ([`pam_manifests::protocol::Capabilities::allows_full_permissions`]); a
/// host that never reported capabilities does not. `$9` of
/// [`CLAIMABLE_SQL`].
pub fn allows_full(host: &Host) -> bool {
    host.capabilities
        .as_ref()
        .is_some_and(|c| c.allows_full_permissions())
}

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
    /// It works in a workspace ([`uses_workspace`]).
    pub uses_workspace: bool,
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
        && host_has_provider(host, &r.provider, provider_version(r))
        && !(waits.uses_workspace && workspace_low(host))
        && (!asks_full(r) || allows_full(host))
}

/// [`run_claimable`] as a `WHERE` clause over `runs`: `$2` is the host's
/// name, `$3` its labels ([`Host::labels`]) as JSON, `$6` its providers
/// ([`providers_json`]), `$7` the requirements it meets
/// ([`requirements_met`]), `$8` whether its workspace volume is low
/// ([`workspace_low`]), `$9` whether it takes `permissions: full`
/// ([`allows_full`]); `{blocked}` is
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
        AND p.conditions @> '[{\"type\":\"BudgetExceeded\",\"status\":\"True\"}]') \
    AND (CASE WHEN runs.spec ? 'providerVersion' \
         THEN $7::jsonb ? (runs.provider || ' ' || (runs.spec->>'providerVersion')) \
         ELSE ($6::jsonb IS NULL OR $6::jsonb ? runs.provider) END) \
    AND NOT ($8::boolean AND {uses_workspace}) \
    AND ($9::boolean OR runs.permissions IS NULL OR runs.permissions->>'mode' <> 'full')";

/// The distinct (provider, requirement) pairs of pending runs that carry
/// a `spec.providerVersion`: what [`requirements_met`] decides for a claim.
pub const PENDING_REQUIREMENTS_SQL: &str = "SELECT DISTINCT provider, spec->>'providerVersion' \
    FROM runs WHERE status = 'pending' AND spec ? 'providerVersion'";

#[cfg(test)]
mod tests {
    #[test]
    fn live_is_one_rule_in_rust_and_sql() {
        use pam_manifests::state::RunStatus;
        let said: Vec<&str> = RunStatus::VALUES
            .iter()
            .filter(|s| s.is_live())
            .map(|s| s.as_str())
            .collect();
        assert_eq!(said, ["spawning", "running"]);
        assert_eq!(
            RunStatus::LIVE.map(RunStatus::as_str),
            ["spawning", "running"]
        );
        assert_eq!(super::LIVE_SQL, "status IN ('spawning', 'running')");
    }

    #[test]
    fn the_claim_sql_and_its_pending_read_say_full_alike() {
        assert!(super::CLAIMABLE_SQL.contains("runs.permissions->>'mode' <> 'full'"));
        assert_eq!(super::ASKS_FULL_SQL, "(runs.permissions->>'mode' = 'full')");
    }

    #[test]
    fn the_claim_sql_has_the_workspace_test() {
        assert!(super::CLAIMABLE_SQL.contains("{uses_workspace}"));
    }

    #[test]
    fn the_sql_names_the_budget_condition_of_the_vocabulary() {
        assert!(super::CLAIMABLE_SQL.contains(&format!(
            "\"type\":\"{}\"",
            pam_manifests::conditions::BUDGET_EXCEEDED
        )));
    }
}
