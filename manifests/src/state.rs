//! The state machines of pam — work items, runs and hosts — and the one
//! function that moves them: [`transition`].
//!
//! This module is the *sole gate* (pam-data-model.txt, "Enforcement"): API
//! handlers, pamctl verbs, signal ingest and the reconcile loops all call
//! [`transition`] before they write a status, and the stores call it again in
//! their guarded updates, so no path can write an edge that is not drawn here.
//! Value legality is also checked by the database's CHECK constraints;
//! transition legality only here.
//!
//! # Work items
//!
//! ```mermaid
//! stateDiagram-v2
//!     [*] --> todo
//!     todo --> doing
//!     doing --> done
//!     todo --> done: complete without starting
//!     done --> doing: reopen
//!     doing --> todo
//!     todo --> cancelled
//!     doing --> cancelled
//!     done --> cancelled
//!     cancelled --> todo: reopen
//!     cancelled --> [*]
//! ```
//!
//! # Runs
//!
//! ```mermaid
//! stateDiagram-v2
//!     [*] --> pending
//!     pending --> spawning: spawn requested
//!     spawning --> running: process started
//!     running --> exited: clean exit
//!     running --> failed: error exit
//!     running --> stopped: user stopped
//!     spawning --> failed: spawn failed
//!     pending --> failed: dispatch timeout / no eligible host
//!     pending --> stopped: stopped before dispatch
//!     failed --> pending: automatic restart (bounded retries)
//!     exited --> [*]
//!     failed --> [*]
//!     stopped --> [*]
//! ```
//!
//! `pending → stopped` is pam's one addition to the seed's run graph: the
//! issue tracker's stop rule says "a pending run is stopped without
//! dispatch", and without the edge such a run could only wait for its
//! dispatch timeout. `failed → pending` is the only way back from `failed`.
//!
//! # Hosts
//!
//! ```mermaid
//! stateDiagram-v2
//!     [*] --> registered
//!     registered --> online: first registration / heartbeat
//!     online --> offline: heartbeat lost past the offline threshold
//!     offline --> online: heartbeat again
//!     registered --> disabled
//!     online --> disabled
//!     offline --> disabled
//!     disabled --> registered: enable (never seen)
//!     disabled --> online: enable (heartbeat current)
//!     disabled --> offline: enable (heartbeat stale)
//! ```
//!
//! The seed names the host states (registered, online, offline, disabled)
//! and what drives them (heartbeats, the 90 s threshold, the operator's
//! disable) but draws no graph; the edges above are the ones those rules
//! imply.

use std::fmt;
use std::str::FromStr;

/// A status enum whose legal edges are drawn in this module.
pub trait StateMachine: Copy + Eq + fmt::Debug + 'static {
    /// The machine's name in error messages ("run", "work item", "host").
    const MACHINE: &'static str;
    /// Every state, in declaration order.
    const ALL: &'static [Self];
    /// The value stored in the database and shown in manifests.
    fn as_str(self) -> &'static str;
    /// Whether `self → to` is an edge of the machine. Use [`transition`].
    fn edge(self, to: Self) -> bool;
}

/// A refused state change: `from → to` is not an edge of `machine`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("illegal {machine} transition {from} → {to}{hint}")]
pub struct IllegalTransition {
    pub machine: &'static str,
    pub from: &'static str,
    pub to: &'static str,
    /// A short hint on how to get there legally, or empty.
    pub hint: &'static str,
}

/// The sole gate: returns `to` when `from → to` is a legal edge, and an
/// [`IllegalTransition`] otherwise. A self-transition (`from == to`) is not
/// an edge and is refused; callers that treat "already there" as success
/// check for equality first.
pub fn transition<S: StateMachine>(from: S, to: S) -> Result<S, IllegalTransition> {
    if from.edge(to) {
        Ok(to)
    } else {
        Err(IllegalTransition {
            machine: S::MACHINE,
            from: from.as_str(),
            to: to.as_str(),
            hint: hint(S::MACHINE, from.as_str(), to.as_str()),
        })
    }
}

fn hint(machine: &str, from: &str, to: &str) -> &'static str {
    match (machine, from, to) {
        ("work item", "cancelled", "doing" | "done") => " (reopen it first: cancelled → todo)",
        ("run", "exited" | "stopped", _) => " (a finished run is terminal; create a new run)",
        ("run", "failed", _) => " (only the restart policy moves a failed run, back to pending)",
        _ => "",
    }
}

/// An unknown status string (from the database or a manifest).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}; expected one of: {expected}")]
pub struct UnknownValue {
    pub what: &'static str,
    pub value: String,
    pub expected: &'static str,
}

macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        $name:ident, $what:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(rename_all = "snake_case")]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant, )+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const VALUES: &'static [$name] = &[$($name::$variant),+];

            /// Every value as stored and shown, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($text),+];

            /// The value as stored and shown.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text,)+ }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, UnknownValue> {
                match s {
                    $($text => Ok($name::$variant),)+
                    _ => Err(UnknownValue {
                        what: $what,
                        value: s.to_string(),
                        expected: concat!($($text, " "),+),
                    }),
                }
            }
        }
    };
}

string_enum! {
    /// A work item's workflow state (`work_items.status`).
    WorkItemStatus, "work item status" {
        /// Not started.
        Todo = "todo",
        /// In progress.
        Doing = "doing",
        /// Complete. A parent never becomes done on its own when its
        /// children complete: roll-up is display only.
        Done = "done",
        /// Abandoned; cancelling a parent cascades to its non-done
        /// descendants.
        Cancelled = "cancelled",
    }
}

string_enum! {
    /// A run's lifecycle state (`runs.status`), the Run manifest's
    /// `status.phase`.
    RunStatus, "run status" {
        /// Waiting for a host to claim it; `pending_since` anchors the
        /// dispatch timeout (OQ-15).
        Pending = "pending",
        /// Claimed by a host; the tmux session is being created.
        Spawning = "spawning",
        /// The wrapper reported `started`.
        Running = "running",
        /// Terminal: the process exited with code 0.
        Exited = "exited",
        /// The process exited non-zero, failed to spawn, or the run was lost
        /// or never dispatched; `failure_reason` says which. The restart
        /// policy may requeue it (failed → pending).
        Failed = "failed",
        /// Terminal: stopped by an operator.
        Stopped = "stopped",
    }
}

string_enum! {
    /// A worker host's registry state (`hosts.status`).
    HostStatus, "host status" {
        /// Known (declared or token created), never seen.
        Registered = "registered",
        /// Heartbeat current.
        Online = "online",
        /// Heartbeat lost past the offline threshold (90 s by default).
        Offline = "offline",
        /// Excluded from dispatch by an operator.
        Disabled = "disabled",
    }
}

string_enum! {
    /// A work item's type (`work_items.kind`, the Task manifest's `spec.type`).
    WorkItemKind, "task type" {
        /// A top-level goal; runs may not point at it.
        Milestone = "milestone",
        /// A group of tasks; runs may not point at it.
        Epic = "epic",
        /// A unit of work a run can execute.
        Task = "task",
        /// A part of a task a run can execute.
        Subtask = "subtask",
    }
}

string_enum! {
    /// A project's lifecycle state (`projects.status`).
    ProjectStatus, "project status" {
        /// Fully mutable.
        Active = "active",
        /// Read-only for structure: no new tasks or runs; in-flight runs go on.
        Archived = "archived",
    }
}

string_enum! {
    /// A worker host's operating system (`hosts.platform`, ADR-011).
    Platform, "platform" {
        /// macOS.
        Macos = "macos",
        /// Linux.
        Linux = "linux",
    }
}

string_enum! {
    /// Why a run ended `failed` (`runs.failure_reason`): exactly the seed's
    /// six reasons. A non-zero exit or a provider hook reporting failure has
    /// no distinct reason (NULL); its exit code says it.
    FailureReason, "failure reason" {
        /// The host went offline while the run was spawning or running;
        /// requeue-eligible (OQ-12).
        HostLost = "host_lost",
        /// The worker found the run's tmux session gone without a `finished`.
        SessionLost = "session_lost",
        /// The session or the provider command could not be started.
        SpawnFailed = "spawn_failed",
        /// The restart policy ran out of attempts.
        RestartExhausted = "restart_exhausted",
        /// Nobody claimed the run within the dispatch timeout (OQ-15).
        DispatchTimeout = "dispatch_timeout",
        /// No online, enabled, non-suspect host ever matched the target
        /// before the dispatch timeout (OQ-15).
        NoEligibleHost = "no_eligible_host",
        /// A task the run's task depends on was cancelled while the run
        /// waited for it (a pam extension to the seed's list).
        DependencyCancelled = "dependency_cancelled",
        /// The run reached its `spec.budget` and was stopped (a
        /// pam extension to the seed's list).
        BudgetExceeded = "budget_exceeded",
    }
}

impl FailureReason {
    /// Whether the restart policy may requeue a run that failed for this
    /// reason (`None`: a non-zero exit). dispatch_timeout and
    /// no_eligible_host never restart (the run never ran), nor does
    /// dependency_cancelled (it would wait forever); restart_exhausted
    /// is itself the end; host_lost is requeue-eligible (OQ-12).
    pub fn restartable(reason: Option<FailureReason>) -> bool {
        !matches!(
            reason,
            Some(
                FailureReason::DispatchTimeout
                    | FailureReason::NoEligibleHost
                    | FailureReason::RestartExhausted
                    | FailureReason::DependencyCancelled
                    | FailureReason::BudgetExceeded
            )
        )
    }
}

impl StateMachine for WorkItemStatus {
    const MACHINE: &'static str = "work item";
    const ALL: &'static [Self] = WorkItemStatus::VALUES;
    fn as_str(self) -> &'static str {
        WorkItemStatus::as_str(self)
    }
    fn edge(self, to: Self) -> bool {
        use WorkItemStatus::*;
        matches!(
            (self, to),
            (Todo, Doing)
                | (Doing, Done)
                | (Todo, Done)
                | (Done, Doing)
                | (Doing, Todo)
                | (Todo, Cancelled)
                | (Doing, Cancelled)
                | (Done, Cancelled)
                | (Cancelled, Todo)
        )
    }
}

impl StateMachine for RunStatus {
    const MACHINE: &'static str = "run";
    const ALL: &'static [Self] = RunStatus::VALUES;
    fn as_str(self) -> &'static str {
        RunStatus::as_str(self)
    }
    fn edge(self, to: Self) -> bool {
        use RunStatus::*;
        matches!(
            (self, to),
            (Pending, Spawning)
                | (Spawning, Running)
                | (Running, Exited)
                | (Running, Failed)
                | (Running, Stopped)
                | (Spawning, Failed)
                | (Pending, Failed)
                | (Pending, Stopped)
                | (Failed, Pending)
        )
    }
}

impl RunStatus {
    /// Terminal states never change again. `failed` is not terminal while
    /// the restart policy may still requeue it.
    pub fn is_terminal(self) -> bool {
        matches!(self, RunStatus::Exited | RunStatus::Stopped)
    }

    /// A live run has a session on its host (spawning or running): it is
    /// in its host's desired set, takes one of its capacity, and only it
    /// takes a worker's reports. PostgreSQL's form is
    /// `pam_store::dispatch::LIVE_SQL` (and the `runs_live` index's
    /// predicate).
    pub fn is_live(self) -> bool {
        matches!(self, RunStatus::Spawning | RunStatus::Running)
    }

    /// Every live status ([`RunStatus::is_live`]).
    pub const LIVE: [RunStatus; 2] = [RunStatus::Spawning, RunStatus::Running];
}

impl StateMachine for HostStatus {
    const MACHINE: &'static str = "host";
    const ALL: &'static [Self] = HostStatus::VALUES;
    fn as_str(self) -> &'static str {
        HostStatus::as_str(self)
    }
    fn edge(self, to: Self) -> bool {
        use HostStatus::*;
        matches!(
            (self, to),
            (Registered, Online)
                | (Online, Offline)
                | (Offline, Online)
                | (Registered, Disabled)
                | (Online, Disabled)
                | (Offline, Disabled)
                | (Disabled, Registered)
                | (Disabled, Online)
                | (Disabled, Offline)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks that `legal` is exactly the machine's edge set: every listed
    /// edge passes the gate and every other (from, to) pair is refused.
    fn assert_exact_edges<S: StateMachine>(legal: &[(S, S)]) {
        for &from in S::ALL {
            for &to in S::ALL {
                let expected = legal.contains(&(from, to));
                let got = transition(from, to);
                assert_eq!(
                    got.is_ok(),
                    expected,
                    "{} {:?} → {:?}: expected {}",
                    S::MACHINE,
                    from,
                    to,
                    if expected { "legal" } else { "refused" }
                );
                if let Err(e) = got {
                    assert_eq!(e.from, from.as_str());
                    assert_eq!(e.to, to.as_str());
                }
            }
        }
    }

    #[test]
    fn work_item_edges_are_exactly_the_seeds() {
        use WorkItemStatus::*;
        assert_exact_edges(&[
            (Todo, Doing),
            (Doing, Done),
            (Todo, Done),
            (Done, Doing),
            (Doing, Todo),
            (Todo, Cancelled),
            (Doing, Cancelled),
            (Done, Cancelled),
            (Cancelled, Todo),
        ]);
    }

    #[test]
    fn run_edges_are_exactly_the_seeds_plus_pending_stop() {
        use RunStatus::*;
        assert_exact_edges(&[
            (Pending, Spawning),
            (Spawning, Running),
            (Running, Exited),
            (Running, Failed),
            (Running, Stopped),
            (Spawning, Failed),
            (Pending, Failed),
            (Pending, Stopped),
            (Failed, Pending),
        ]);
    }

    #[test]
    fn host_edges() {
        use HostStatus::*;
        assert_exact_edges(&[
            (Registered, Online),
            (Online, Offline),
            (Offline, Online),
            (Registered, Disabled),
            (Online, Disabled),
            (Offline, Disabled),
            (Disabled, Registered),
            (Disabled, Online),
            (Disabled, Offline),
        ]);
    }

    #[test]
    fn named_illegal_edges_are_refused_with_a_message() {
        use RunStatus::*;
        for (from, to) in [(Exited, Pending), (Stopped, Pending), (Pending, Running)] {
            let err = transition(from, to).unwrap_err();
            assert!(
                err.to_string().starts_with("illegal run transition"),
                "{err}"
            );
        }
        let err = transition(WorkItemStatus::Cancelled, WorkItemStatus::Done).unwrap_err();
        assert_eq!(
            err.to_string(),
            "illegal work item transition cancelled → done (reopen it first: cancelled → todo)"
        );
    }

    #[test]
    fn failed_pending_is_the_only_way_back_from_failed() {
        for &to in RunStatus::ALL {
            assert_eq!(
                transition(RunStatus::Failed, to).is_ok(),
                to == RunStatus::Pending,
                "failed → {to}"
            );
        }
    }

    #[test]
    fn strings_round_trip() {
        for &s in RunStatus::VALUES {
            assert_eq!(s.as_str().parse::<RunStatus>().unwrap(), s);
        }
        for &s in FailureReason::VALUES {
            assert_eq!(s.as_str().parse::<FailureReason>().unwrap(), s);
        }
        let err = "runnin".parse::<RunStatus>().unwrap_err();
        assert!(err.to_string().contains("expected one of"), "{err}");
    }
}
