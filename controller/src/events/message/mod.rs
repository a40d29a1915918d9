//! Every journaled event as a sentence: a kubectl-style reason
//! (`HostLost`, `Synced`), a one-line message and the object it is about
//! (`run/fix-login`), rendered from its topic and payload in this one
//! place. The event JSON carries them next to the payload
//! ([`super::render::event_json`]), so `pamctl events`, `describe`, the
//! dashboard's activity page and a run's timeline all say the same thing.
//!
//! One match arm per topic: a topic added to [`topic::ALL`] without an arm
//! here falls to the generic rendering, which the tests refuse.

use serde_json::Value;

use super::topic;
use fields::{count, objects, qualified, short, Fields};

/// What an event says, for people.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// CamelCase, kubectl's habit: `Created`, `HostLost`, `Synced`.
    pub reason: String,
    /// One line, no JSON.
    pub message: String,
    /// `kind/name` of the object the event is about (`run/fix-login`,
    /// `host/alpha`), when the payload names it.
    pub object: Option<String>,
}

/// The reason, message and object of an event. A topic this renderer does
/// not know (an older or newer journal) still gets a line: its reason from
/// the topic, its message listing the payload's plain fields.
pub fn render(topic: &str, p: &Value) -> Rendered {
    known(topic, p).unwrap_or_else(|| Rendered {
        reason: pam_manifests::event_words::topic_reason(topic),
        message: pam_manifests::event_words::plain_fields(p),
        object: None,
    })
}

/// The rendering of a topic pam journals; `None` for any other.
pub fn known(t: &str, p: &Value) -> Option<Rendered> {
    let f = Fields(p);
    let run = || format!("run {}", f.s("name").unwrap_or("?"));
    let task = || {
        format!(
            "{} {}",
            f.s("kind").unwrap_or("task"),
            f.s("name").unwrap_or("?")
        )
    };
    let host = || format!("host {}", f.s("host").unwrap_or("?"));
    let source = || format!("source {}", f.s("source").unwrap_or("?"));
    let schedule = || format!("schedule {}", f.s("schedule").unwrap_or("?"));
    let project = || format!("project {}", f.s("project").unwrap_or("?"));
    let (reason, message, object): (String, String, Option<String>) = match t {
        topic::PROJECT_CREATED => (
            "Created".into(),
            format!("{} created{}", project(), f.quoted_title("name")),
            f.obj("project", "project"),
        ),
        topic::PROJECT_UPDATED => (
            "Updated".into(),
            format!("{} updated", project()),
            f.obj("project", "project"),
        ),
        topic::PROJECT_ARCHIVED => (
            "Archived".into(),
            format!("{} archived", project()),
            f.obj("project", "project"),
        ),
        topic::WORK_ITEM_CREATED => (
            "Created".into(),
            format!(
                "{} created in project {} ({})",
                task(),
                f.s("project").unwrap_or("?"),
                f.s("status").unwrap_or("?")
            ),
            f.obj("task", "name"),
        ),
        topic::WORK_ITEM_UPDATED => (
            "Updated".into(),
            format!("{} updated ({})", task(), f.s("status").unwrap_or("?")),
            f.obj("task", "name"),
        ),
        topic::WORK_ITEM_STATUS_CHANGED => (
            "StatusChanged".into(),
            format!(
                "{} moved from {} to {}{}",
                task(),
                f.s("from").unwrap_or("?"),
                f.s("status").unwrap_or("?"),
                if f.has("cascade_from") {
                    " (cancelled with an ancestor)"
                } else {
                    ""
                }
            ),
            f.obj("task", "name"),
        ),
        topic::WORK_ITEM_REPARENTED => (
            "Reparented".into(),
            format!(
                "{} moved from {} to {}",
                task(),
                f.s("old_path").unwrap_or("?"),
                f.s("path").unwrap_or("?")
            ),
            f.obj("task", "name"),
        ),
        topic::WORK_ITEM_DELETED => (
            "Deleted".into(),
            format!("{} deleted", task()),
            f.obj("task", "name"),
        ),
        topic::RUN_CREATED => (
            "Created".into(),
            format!(
                "{} created for task {} (provider {})",
                run(),
                f.s("task").unwrap_or("?"),
                f.s("provider").unwrap_or("?")
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_SPAWNING => (
            "Scheduled".into(),
            format!(
                "{} dispatched to host {} as session {}{}",
                run(),
                f.s("host").unwrap_or("?"),
                f.s("session_name").unwrap_or("?"),
                f.attempt()
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_STARTED => (
            "Started".into(),
            format!("{} started{}", run(), f.attempt()),
            f.obj("run", "name"),
        ),
        topic::RUN_FINISHED => {
            let code = f.n("exit_code");
            // A provider that reported failure ends failed with exit 0.
            let ok = code == Some(0) && f.s("status") != Some("failed");
            let denied = f.n("permission_denials").filter(|n| *n > 0);
            let then = match f.s("status") {
                Some("exited") | None => String::new(),
                Some(s) => format!(", {s}"),
            };
            let why = f.s("message").map_or(String::new(), |m| format!(": {m}"));
            let refused = denied.map_or(String::new(), |n| {
                format!(
                    "; its agent was refused {n} tool call{} by the run's permissions",
                    if n == 1 { "" } else { "s" }
                )
            });
            // A stop someone asked for is no error, whatever the code.
            let reason = match (f.s("status"), ok, denied) {
                (Some("stopped"), _, _) => "Stopped",
                (_, _, Some(_)) => "PermissionDenied",
                (_, true, None) => "Completed",
                (_, false, None) => "Error",
            };
            (
                reason.into(),
                format!(
                    "{} exited with code {}{then}{why}{refused}{}",
                    run(),
                    code.map_or("?".into(), |c| c.to_string()),
                    f.attempt()
                ),
                f.obj("run", "name"),
            )
        }
        topic::RUN_PERMISSION_DENIED => {
            let calls: Vec<String> = p["denied"]
                .as_array()
                .map(|d| {
                    d.iter()
                        .map(|c| {
                            let tool = c["tool"].as_str().unwrap_or("?");
                            match c["target"].as_str() {
                                Some(t) => format!("{tool} {t}"),
                                None => tool.to_string(),
                            }
                        })
                        .collect()
                })
                .unwrap_or_default();
            (
                "PermissionDenied".into(),
                format!(
                    "{}'s agent was refused {} by the run's permissions{}",
                    run(),
                    calls.join("; "),
                    f.attempt()
                ),
                f.obj("run", "name"),
            )
        }
        topic::RUN_FAILED => {
            // `cause` is why this attempt failed; `failure_reason` may say
            // more (restart_exhausted: no attempt left after it).
            let cause = f.s("cause").or(f.s("failure_reason"));
            let why = f
                .s("message")
                .map(str::to_string)
                .unwrap_or_else(|| failure_words(cause, &f));
            let last = match (cause, f.s("failure_reason")) {
                (Some(c), Some(r)) if c != r => format!("; {}", r.replace('_', " ")),
                _ => String::new(),
            };
            let attempt = f.failed_attempt(cause);
            (
                cause.map_or("Failed".into(), pam_manifests::event_words::camel),
                format!("{}: {why}{last}{attempt}", cause.unwrap_or("failed")),
                f.obj("run", "name"),
            )
        }
        topic::RUN_RESULT_RECORDED => (
            "ResultRecorded".into(),
            format!(
                "{} left branch {}: {} commits, {} files changed, +{} -{}{}",
                run(),
                f.s("branch").unwrap_or("?"),
                f.n("commits").unwrap_or(0),
                f.n("files_changed").unwrap_or(0),
                f.n("insertions").unwrap_or(0),
                f.n("deletions").unwrap_or(0),
                f.attempt()
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_STOPPED => (
            "Stopped".into(),
            match f.n("exit_code") {
                Some(c) => format!("{} stopped (exit code {c}){}", run(), f.attempt()),
                None => format!("{} stopped before it was dispatched", run()),
            },
            f.obj("run", "name"),
        ),
        topic::RUN_STOP_REQUESTED => (
            "StopRequested".into(),
            format!("{} asked to stop{}", run(), f.attempt()),
            f.obj("run", "name"),
        ),
        topic::RUN_SIGNAL_RECEIVED => (
            "Signalled".into(),
            format!(
                "signal {} sent to {}{}",
                f.s("signal").unwrap_or("?"),
                run(),
                f.attempt()
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_OUTPUT_APPENDED => (
            "Output".into(),
            format!(
                "{} output: {} lines, {} bytes{}",
                run(),
                f.n("lines").unwrap_or(0),
                f.n("bytes").unwrap_or(0),
                f.attempt()
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_LEASE_ACQUIRED => (
            "Attached".into(),
            format!(
                "{} attached to {}{}",
                f.s("holder").unwrap_or("?"),
                run(),
                f.attempt()
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_LEASE_RELEASED => (
            "Detached".into(),
            format!(
                "{}'s attach lease on {} {}",
                f.s("holder").unwrap_or("?"),
                run(),
                match f.s("reason") {
                    Some("expired") => "expired",
                    Some("revoked") => "ended: its token was revoked",
                    _ => "released",
                }
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_ORPHAN_DETECTED => (
            "OrphanDetected".into(),
            format!(
                "{} runs tmux session {} that no live run owns{}",
                host(),
                f.s("session_name").unwrap_or("?"),
                match (f.s("run"), f.n("attempt")) {
                    (Some(r), Some(a)) => format!(" (run {r}, attempt {a})"),
                    (None, Some(a)) => format!(" (a run's attempt {a})"),
                    _ => String::new(),
                }
            ),
            f.obj("host", "host"),
        ),
        topic::RUN_INTEGRITY_ANOMALY => (
            "IntegrityAnomaly".into(),
            f.s("message").map_or_else(
                || format!("{} points at a {}", run(), f.s("task_kind").unwrap_or("?")),
                str::to_string,
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_REQUEUED => (
            "Requeued".into(),
            format!(
                "{} requeued{}{}",
                run(),
                match f.s("previous_failure_reason") {
                    Some(r) => format!(" after {r}"),
                    None => match f.n("previous_exit_code") {
                        Some(c) => format!(" after exit code {c}"),
                        None => String::new(),
                    },
                },
                f.attempt()
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_BLOCKED => (
            "Blocked".into(),
            format!("{} waits: a task its task depends on is not done", run()),
            f.obj("run", "name"),
        ),
        topic::RUN_UNBLOCKED => (
            "Unblocked".into(),
            format!(
                "{} may be dispatched: every task its task depends on is done",
                run()
            ),
            f.obj("run", "name"),
        ),
        topic::RUN_BUDGET_EXCEEDED => (
            "BudgetExceeded".into(),
            format!(
                "{} is being stopped: {}",
                run(),
                f.s("message").unwrap_or("it reached its budget")
            ),
            f.obj("run", "name"),
        ),
        topic::WORKER_REGISTERED => (
            "Online".into(),
            format!(
                "{} is online (was {})",
                host(),
                f.s("from").unwrap_or("unknown")
            ),
            f.obj("host", "host"),
        ),
        topic::WORKER_OFFLINE => (
            "Offline".into(),
            match f.s("last_seen_at") {
                Some(at) => format!("{} stopped heartbeating (last seen {at})", host()),
                None => format!("{} went offline", host()),
            },
            f.obj("host", "host"),
        ),
        topic::WORKER_INSTANCE_SUSPECT => (
            "InstanceSuspect".into(),
            format!(
                "{}: a second worker instance {} presents its token (pinned: {})",
                host(),
                short(f.s("presented_instance_id")),
                short(f.s("pinned_instance_id"))
            ),
            f.obj("host", "host"),
        ),
        topic::WORKER_INSTANCE_REINSTALLED => (
            "InstanceReinstalled".into(),
            format!(
                "{} was reinstalled: new worker instance {}",
                host(),
                short(f.s("instance_id"))
            ),
            f.obj("host", "host"),
        ),
        topic::SOURCE_SYNCED => (
            "Synced".into(),
            format!(
                "{} applied revision {}: {} created, {} configured, {} pruned ({} objects)",
                source(),
                f.s("revision").unwrap_or("?"),
                f.n("created").unwrap_or(0),
                f.n("configured").unwrap_or(0),
                f.n("pruned").unwrap_or(0),
                f.n("inventory").unwrap_or(0)
            ),
            f.obj("source", "source"),
        ),
        topic::SOURCE_SYNC_FAILED => (
            "SyncFailed".into(),
            format!(
                "{} failed to sync{}: {}",
                source(),
                f.s("revision")
                    .map_or(String::new(), |r| format!(" revision {r}")),
                f.s("message").unwrap_or("?")
            ),
            f.obj("source", "source"),
        ),
        topic::SOURCE_DRIFT_DETECTED => (
            "DriftDetected".into(),
            format!(
                "{}: {} changed by another path ({})",
                source(),
                count(f.list("objects").len(), "object"),
                objects(f.list("objects"))
            ),
            f.obj("source", "source"),
        ),
        topic::SOURCE_HEALED => (
            "Healed".into(),
            format!(
                "{} put back {} to revision {} ({})",
                source(),
                count(f.list("objects").len(), "object"),
                f.s("revision").unwrap_or("?"),
                objects(f.list("objects"))
            ),
            f.obj("source", "source"),
        ),
        topic::SOURCE_PRUNED => (
            "Pruned".into(),
            format!(
                "{} deleted {} {}: it left the tree",
                source(),
                f.s("kind").unwrap_or("?"),
                qualified(f.s("project"), f.s("name"))
            ),
            f.obj("source", "source"),
        ),
        topic::SOURCE_PRUNE_SKIPPED => {
            let held: Vec<&str> = f.list("held").iter().filter_map(Value::as_str).collect();
            let n = f.n("held_count").unwrap_or(held.len() as i64);
            (
                "PruneSkipped".into(),
                format!(
                    "{} kept {} {}: deleting it would also delete {} it does not prune ({})",
                    source(),
                    f.s("kind").unwrap_or("?"),
                    qualified(f.s("project"), f.s("name")),
                    count(n as usize, "object"),
                    held.join(", ")
                ),
                f.obj("source", "source"),
            )
        }
        topic::SCHEDULE_RUN_CREATED => (
            "RunCreated".into(),
            format!(
                "{} created run {} for its {} tick",
                schedule(),
                f.s("run").unwrap_or("?"),
                f.s("scheduled_at").unwrap_or("?")
            ),
            f.obj("schedule", "schedule"),
        ),
        topic::SCHEDULE_TICK_SKIPPED => (
            "TickSkipped".into(),
            format!(
                "{} skipped its {} tick: {}",
                schedule(),
                f.s("scheduled_at").unwrap_or("?"),
                f.s("reason").unwrap_or("?")
            ),
            f.obj("schedule", "schedule"),
        ),
        topic::SCHEDULE_TICK_MISSED => (
            "TickMissed".into(),
            format!(
                "{} missed its {} tick: past its {}s starting deadline ({} missed)",
                schedule(),
                f.s("scheduled_at").unwrap_or("?"),
                f.n("starting_deadline_seconds").unwrap_or(0),
                count(f.n("missed_ticks").unwrap_or(1) as usize, "tick")
            ),
            f.obj("schedule", "schedule"),
        ),
        _ => return None,
    };
    Some(Rendered {
        reason,
        message,
        object,
    })
}

/// A run failure in words when the payload has no message of its own.
fn failure_words(cause: Option<&str>, f: &Fields) -> String {
    match cause {
        Some("host_lost") => "its host stopped heartbeating".into(),
        Some("session_lost") => "its tmux session disappeared without an exit".into(),
        Some("spawn_failed") => "its session could not be started".into(),
        Some("restart_exhausted") => "no attempts left".into(),
        Some("dispatch_timeout") => "no host claimed it within its dispatch timeout".into(),
        Some("no_eligible_host") => "no eligible host matched its target in time".into(),
        Some("dependency_cancelled") => "a task it depends on was cancelled".into(),
        Some("budget_exceeded") => "it reached its budget".into(),
        Some("provider_failed") => "the provider reported failure".into(),
        Some(other) => other.replace('_', " "),
        None => match f.n("exit_code") {
            Some(c) => format!("exit code {c}"),
            None => "failed".into(),
        },
    }
}

mod fields;
#[cfg(test)]
mod tests;
