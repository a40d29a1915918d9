//! One description per Kind (issue 29), as kube-rs has `Resource`: its
//! names, scope, journal topics and how the one prune treats it. Generic
//! code reads a kind's facts here ([`Kind::info`]) instead of matching on
//! the kind itself; a new kind is one more row (the compiler asks for it:
//! the table is indexed by the enum).

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
pub const KINDS: [KindInfo; 8] = [
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
