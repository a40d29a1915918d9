//! One description per Kind, as kube-rs has `Resource`: its
//! names, scope, journal topics and how the one prune treats it. Generic
//! code reads a kind's facts here ([`Kind::info`]) instead of matching on
//! the kind itself; a new kind is one more row (the compiler asks for it:
//! the table is indexed by the enum).

use super::columns::{col, wide, Cell::*, Column, Derived::*};
use super::Kind;
use crate::state::{HostStatus, ProjectStatus, RunStatus, WorkItemStatus};

/// Where objects of a kind live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Global: `metadata.name` is unique in the whole pamd (Projects,
    /// Hosts, Sources, Webhooks).
    Cluster,
    /// Inside a project: `metadata.project` required, the name unique in
    /// it (Tasks, Runs, Secrets, Schedules).
    Project,
}

/// The facts of one kind.
#[derive(Debug)]
pub struct KindInfo {
    pub kind: Kind,
    /// As written in `kind:` (`"Task"`).
    pub name: &'static str,
    /// Lower-case singular (`"task"`): file names, API paths.
    pub singular: &'static str,
    /// Lower-case plural (`"tasks"`): API collections, `pamctl get`.
    pub plural: &'static str,
    /// The short name pamctl accepts (`"tk"`).
    pub short: &'static str,
    pub scope: Scope,
    /// The family of journal topics about objects of this kind (`run.`):
    /// what `describe` shows and `get -w` watches.
    pub topics: &'static str,
    /// When the one prune deletes it, lowest first: children before what
    /// their deletion cascades from (runs, tasks, a project's Schedules and
    /// Secrets, Webhooks, Sources, Hosts, projects last).
    pub prune_order: u8,
    /// The phases (`status.phase`) its objects go through; none for a
    /// kind that has conditions only (`pamctl wait --for=phase=`,
    /// completion).
    pub phases: &'static [&'static str],
    /// Where its printed object keeps the usage roll-up it is ranked by
    /// (`pamctl top`, the TOKENS/COST columns), when it has one.
    pub usage: Option<&'static str>,
    /// The columns `pamctl get` prints after NAME (`wide` ones with
    /// `-o wide`), in order.
    pub columns: &'static [Column],
    /// Whether its objects live in the one generic table (`objects`) instead of
    /// a table of their own: metadata, a spec and a status, served by pamd with
    /// no per-kind code (its manifest type implements [`super::Generic`]).
    pub generic: bool,
}

/// Every kind's `kind:` name, in the enum's order.
pub const NAMES: [&str; KINDS.len()] = {
    let mut out = [""; KINDS.len()];
    let mut i = 0;
    while i < KINDS.len() {
        out[i] = KINDS[i].name;
        i += 1;
    }
    out
};

/// Every kind's facts, in the enum's order (see [`Kind::info`]).
pub const KINDS: [KindInfo; 9] = [
    KindInfo {
        kind: Kind::Project,
        name: "Project",
        singular: "project",
        plural: "projects",
        short: "proj",
        scope: Scope::Cluster,
        topics: "project.",
        prune_order: 7,
        phases: ProjectStatus::NAMES,
        usage: Some("/status/usage"),
        columns: &[
            col("STATUS", Text("/status/phase")),
            col("AGE", Age),
            wide("TOKENS", Computed(Tokens)),
            wide("COST", Computed(Cost)),
        ],
        generic: false,
    },
    KindInfo {
        kind: Kind::Task,
        name: "Task",
        singular: "task",
        plural: "tasks",
        short: "tk",
        scope: Scope::Project,
        topics: "work_item.",
        prune_order: 1,
        phases: WorkItemStatus::NAMES,
        usage: Some("/status/usage"),
        columns: &[
            col("TYPE", Text("/spec/type")),
            col("STATUS", Computed(TaskStatus)),
            col("PARENT", Text("/spec/parent")),
            col("AGE", Age),
            wide("PATH", Text("/status/path")),
            wide("COMPLETION", Computed(Completion)),
            wide("ASSIGNEE", Text("/spec/assignee")),
            wide("TOKENS", Computed(Tokens)),
            wide("COST", Computed(Cost)),
            wide("BLOCKED-BY", Computed(BlockedBy)),
        ],
        generic: false,
    },
    KindInfo {
        kind: Kind::Run,
        name: "Run",
        singular: "run",
        plural: "runs",
        short: "rn",
        scope: Scope::Project,
        topics: "run.",
        prune_order: 0,
        phases: RunStatus::NAMES,
        usage: Some("/status/usage/total"),
        columns: &[
            col("PHASE", Text("/status/phase")),
            col("ATTEMPT", Text("/status/attempt")),
            col("HOST", Text("/status/host")),
            col("PROVIDER", Text("/spec/provider")),
            col("REASON", Computed(RunReason)),
            col("AGE", Age),
            wide("SESSION", Text("/status/sessionName")),
            wide("EXIT", Text("/status/exitCode")),
            wide("MESSAGE", Computed(RunMessage)),
            wide("LAST ACTIVITY", Computed(LastActivity)),
            wide("TASK", Text("/spec/task")),
            wide("TOKENS", Computed(Tokens)),
            wide("COST", Computed(Cost)),
        ],
        generic: false,
    },
    KindInfo {
        kind: Kind::Host,
        name: "Host",
        singular: "host",
        plural: "hosts",
        short: "ho",
        scope: Scope::Cluster,
        topics: "worker.",
        prune_order: 6,
        phases: HostStatus::NAMES,
        usage: None,
        columns: &[
            col("PHASE", Text("/status/phase")),
            col("RUNNING", Count("/status/runningRuns")),
            col("CAPACITY", Text("/spec/capacity")),
            col("LAST-SEEN", Since("/status/lastSeenAt")),
            wide("SUSPECT", Flag("/status/instanceSuspect")),
            wide("PLATFORM", Text("/spec/platform")),
            wide("PROVIDERS", Computed(Providers)),
            wide("FREE", Computed(Free)),
        ],
        generic: false,
    },
    KindInfo {
        kind: Kind::Source,
        name: "Source",
        singular: "source",
        plural: "sources",
        short: "src",
        scope: Scope::Cluster,
        topics: "source.",
        prune_order: 5,
        phases: &[],
        usage: None,
        // Flux's `get sources` columns.
        columns: &[
            col("SUSPENDED", Flag("/spec/suspend")),
            col("REVISION", ShortRev("/status/revision")),
            col("ATTEMPTED", ShortRev("/status/attemptedRevision")),
            col("SYNC", Text("/status/sync")),
            col("HEALTH", Text("/status/health")),
            col("AGE", Age),
            wide("INVENTORY", Text("/status/inventory")),
            wide("LAST-SYNCED", Since("/status/lastSyncedAt")),
            wide("MESSAGE", Text("/status/syncMessage")),
        ],
        generic: false,
    },
    KindInfo {
        kind: Kind::Webhook,
        name: "Webhook",
        singular: "webhook",
        plural: "webhooks",
        short: "wh",
        scope: Scope::Cluster,
        // No topic is about a Webhook (its deliveries are listed by
        // `pamctl get webhookdeliveries`).
        topics: "webhook.",
        prune_order: 4,
        phases: &[],
        usage: None,
        columns: &[
            col("URL", Text("/spec/url")),
            col("TOPICS", Join("/spec/topics")),
            col("PENDING", Text("/status/pending")),
            col("FAILED", Text("/status/failed")),
            col("AGE", Age),
            wide("PROJECTS", Join("/spec/projects")),
        ],
        generic: false,
    },
    KindInfo {
        kind: Kind::Secret,
        name: "Secret",
        singular: "secret",
        plural: "secrets",
        short: "sec",
        scope: Scope::Project,
        topics: "secret.",
        prune_order: 3,
        phases: &[],
        usage: None,
        // Keys only: a Secret's values never reach pamctl.
        columns: &[
            col("KEYS", Computed(SecretKeys)),
            col("AGE", Age),
            wide("SIZE", Computed(SecretSize)),
            wide("KEY-ID", Text("/status/keyId")),
        ],
        generic: false,
    },
    KindInfo {
        kind: Kind::Schedule,
        name: "Schedule",
        singular: "schedule",
        plural: "schedules",
        short: "sch",
        scope: Scope::Project,
        topics: "schedule.",
        prune_order: 2,
        phases: &[],
        usage: None,
        columns: &[
            col("SCHEDULE", Text("/spec/schedule")),
            col("SUSPEND", Flag("/spec/suspend")),
            col("ACTIVE", Len("/status/active")),
            col("LAST", Text("/status/lastScheduleTime")),
            col("NEXT", Text("/status/nextScheduleTime")),
            col("AGE", Age),
            wide("TIMEZONE", Text("/spec/timeZone")),
            wide("POLICY", Text("/spec/concurrencyPolicy")),
            wide("LAST-RESULT", Text("/status/lastResult")),
        ],
        generic: false,
    },
    KindInfo {
        kind: Kind::Role,
        name: "Role",
        singular: "role",
        plural: "roles",
        short: "ro",
        scope: Scope::Cluster,
        // A Role's changes journal nothing (as a Webhook's): its record is
        // the object and its managed fields.
        topics: "role.",
        prune_order: 8,
        phases: &[],
        usage: None,
        columns: &[col("RULES", Len("/spec/rules")), col("AGE", Age)],
        generic: true,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_the_enums_order_and_covers_every_kind() {
        for (i, info) in KINDS.iter().enumerate() {
            assert_eq!(info.kind as usize, i, "{}", info.name);
            assert!(Kind::ALL.contains(&info.kind));
        }
        assert_eq!(KINDS.len(), Kind::ALL.len());
        let mut orders: Vec<u8> = KINDS.iter().map(|k| k.prune_order).collect();
        orders.sort();
        orders.dedup();
        assert_eq!(orders.len(), KINDS.len(), "one prune order per kind");
        // Names, plurals and short names never collide (pamctl parses
        // any of them).
        let mut aliases: Vec<&str> = KINDS
            .iter()
            .flat_map(|k| [k.singular, k.plural, k.short])
            .collect();
        aliases.sort();
        let n = aliases.len();
        aliases.dedup();
        assert_eq!(aliases.len(), n);
    }
}
