//! One expected sentence per topic pam journals, from payloads built by
//! the real builders ([`super::super::payload`]) with the keys each rule
//! adds. A topic in [`topic::ALL`] without a row here, or without an arm in
//! [`super::known`], fails.

use chrono::{DateTime, TimeZone, Utc};
use pam_manifests::state::{
    FailureReason, HostStatus, Platform, ProjectStatus, RunStatus, WorkItemKind, WorkItemStatus,
};
use pam_store::{Host, Meta, Project, Run, Schedule, Source, WorkItem};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{known, render, Rendered};
use crate::events::{payload, topic};

fn at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 3, 1, 12, 3, 4).unwrap()
}

fn project() -> Project {
    Project {
        id: Uuid::from_u128(1),
        name: "Web shop".into(),
        slug: "web".into(),
        description: String::new(),
        status: ProjectStatus::Active,
        meta: Meta::default(),
        created_at: at(),
        updated_at: at(),
    }
}

fn task(status: WorkItemStatus) -> WorkItem {
    WorkItem {
        id: Uuid::from_u128(2),
        project_id: Uuid::from_u128(1),
        parent_id: None,
        name: "cart".into(),
        kind: WorkItemKind::Task,
        title: "Cart".into(),
        description: String::new(),
        status,
        assignee: None,
        path: "rel1/cart".into(),
        sort_order: 0,
        meta: Meta::default(),
        created_at: at(),
        updated_at: at(),
    }
}

fn run(status: RunStatus, attempt: i32) -> Run {
    let id = Uuid::from_u128(3);
    Run {
        host_id: Some(Uuid::from_u128(4)),
        provider: "claude".into(),
        prompt: "fix it".into(),
        cwd: "/tmp".into(),
        status,
        attempt,
        max_attempts: 3,
        backoff_seconds: 10,
        backoff_max_seconds: 300,
        ..Run::first_attempt(
            id,
            (Uuid::from_u128(1), Uuid::from_u128(2)),
            "fix-login",
            at(),
        )
    }
}

fn host() -> Host {
    Host {
        id: Uuid::from_u128(4),
        status: HostStatus::Online,
        instance_id: Some(Uuid::from_u128(0xaaaa_bbbb << 96)),
        last_seen_at: Some(at()),
        capacity: 2,
        ..Host::new("alpha".into(), Platform::Linux, at())
    }
}

fn source() -> Source {
    Source {
        id: Uuid::from_u128(5),
        name: "gitops".into(),
        meta: Meta::default(),
        status: Default::default(),
        created_at: at(),
        updated_at: at(),
    }
}

fn schedule() -> Schedule {
    Schedule {
        id: Uuid::from_u128(6),
        project_id: Uuid::from_u128(1),
        name: "nightly".into(),
        meta: Meta::default(),
        last_schedule_time: None,
        created_at: at(),
        updated_at: at(),
    }
}

/// A realistic payload of each topic: the builder plus what its rule
/// merges in (rules/*.rs, reconcile/ingest/).
fn payload_of(t: &str) -> Value {
    let with = |mut p: Value, extra: Value| {
        p.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        p
    };
    let todo = || payload::work_item(&task(WorkItemStatus::Todo), "web");
    let running = || run(RunStatus::Running, 2);
    let drift = json!([{"kind": "Task", "project": "web", "name": "cart", "fields": ["spec.title"]},
                       {"kind": "Run", "project": "web", "name": "fix-login", "fields": ["metadata.labels.team"]}]);
    let tick = "2026-03-01T02:00:00Z";
    match t {
        topic::PROJECT_CREATED | topic::PROJECT_UPDATED | topic::PROJECT_ARCHIVED => {
            payload::project(&project())
        }
        topic::WORK_ITEM_CREATED | topic::WORK_ITEM_UPDATED | topic::WORK_ITEM_DELETED => todo(),
        topic::WORK_ITEM_STATUS_CHANGED => with(
            payload::work_item(&task(WorkItemStatus::Doing), "web"),
            json!({"from": "todo"}),
        ),
        topic::WORK_ITEM_REPARENTED => with(
            todo(),
            json!({"old_parent_id": null, "old_path": "cart", "path": "rel1/cart"}),
        ),
        topic::RUN_CREATED => payload::run(
            &run(RunStatus::Pending, 1),
            json!({"project": "web", "task": "cart", "provider": "claude"}),
        ),
        topic::RUN_SPAWNING => {
            let r = run(RunStatus::Spawning, 2);
            payload::run(&r, json!({"host": "alpha", "session_name": r.session_name}))
        }
        topic::RUN_STARTED => payload::run(&running(), json!({})),
        topic::RUN_FINISHED => payload::run(&run(RunStatus::Exited, 2), json!({"exit_code": 0})),
        topic::RUN_FAILED => {
            let mut r = run(RunStatus::Failed, 2);
            r.failure_reason = Some(FailureReason::HostLost);
            payload::run(
                &r,
                json!({"from": "running", "failure_reason": "host_lost", "cause": "host_lost",
                       "message": "host alpha stopped heartbeating at 12:03:04Z"}),
            )
        }
        topic::RUN_STOPPED => payload::run(&run(RunStatus::Stopped, 1), json!({"exit_code": 143})),
        topic::RUN_STOP_REQUESTED => payload::run(&run(RunStatus::Running, 2), json!({})),
        topic::RUN_SIGNAL_RECEIVED => payload::run(&running(), json!({"signal": "SIGINT"})),
        topic::RUN_OUTPUT_APPENDED => payload::run(&running(), json!({"lines": 12, "bytes": 345})),
        topic::RUN_LEASE_ACQUIRED => payload::run(
            &running(),
            json!({"lease_id": Uuid::from_u128(7), "holder": "ana"}),
        ),
        topic::RUN_LEASE_RELEASED => payload::run(
            &running(),
            json!({"lease_id": Uuid::from_u128(7), "holder": "ana", "reason": "expired"}),
        ),
        topic::RUN_ORPHAN_DETECTED => payload::host(
            &host(),
            json!({"run_id": Uuid::from_u128(3), "attempt": 1, "run": "fix-login",
                   "session_name": "pam-00000000"}),
        ),
        topic::RUN_INTEGRITY_ANOMALY => payload::run(
            &run(RunStatus::Pending, 1),
            json!({"task_kind": "epic",
                   "message": "run points at epic \"checkout\"; runs may only execute tasks and subtasks"}),
        ),
        topic::RUN_REQUEUED => payload::run(
            &run(RunStatus::Pending, 3),
            json!({"pending_since": tick, "previous_attempt": 2,
                   "previous_failure_reason": "host_lost", "previous_exit_code": null}),
        ),
        topic::RUN_BLOCKED => payload::run(&run(RunStatus::Pending, 1), json!({})),
        topic::RUN_UNBLOCKED => payload::run(
            &run(RunStatus::Pending, 1),
            json!({"dispatchable_since": tick}),
        ),
        topic::RUN_BUDGET_EXCEEDED => payload::run(
            &running(),
            json!({"message": "cost $2.04 reached the budget of $2", "budget": {"maxCostUsd": 2},
                   "input_tokens": 1000, "cached_input_tokens": 0, "output_tokens": 500,
                   "cost_usd": 2.04}),
        ),
        topic::RUN_RESULT_RECORDED => payload::run(
            &run(RunStatus::Exited, 2),
            json!({"branch": "pam/cart/fix-login-a2", "base_commit": "4f2a9c1", "head_commit": "9e1b2c3",
                   "commits": 1, "files_changed": 2, "insertions": 10, "deletions": 3,
                   "patch_truncated": false}),
        ),
        topic::RUN_PERMISSION_DENIED => payload::run(
            &run(RunStatus::Running, 1),
            json!({"count": 2, "denied": [{"tool": "Write", "target": "hello.txt"},
                                          {"tool": "Bash", "target": "rm -rf build"}]}),
        ),
        topic::WORKER_REGISTERED => payload::host(
            &host(),
            json!({"instance_id": host().instance_id, "from": "offline"}),
        ),
        topic::WORKER_OFFLINE => {
            payload::host(&host(), json!({"last_seen_at": host().last_seen_at}))
        }
        topic::WORKER_INSTANCE_SUSPECT => payload::host(
            &host(),
            json!({"pinned_instance_id": host().instance_id,
                   "presented_instance_id": Uuid::from_u128(0xcccc_dddd << 96)}),
        ),
        topic::WORKER_INSTANCE_REINSTALLED => payload::host(
            &host(),
            json!({"instance_id": Uuid::from_u128(0xcccc_dddd << 96)}),
        ),
        topic::SOURCE_SYNCED => payload::source(
            &source(),
            json!({"revision": "4f2a9c1", "created": 2, "configured": 1, "pruned": 0,
                   "inventory": 7}),
        ),
        topic::SOURCE_SYNC_FAILED => payload::source(
            &source(),
            json!({"revision": "4f2a9c1", "message": "tasks.yaml:3: spec.title: required",
                   "errors": [{"file": "tasks.yaml", "line": 3, "message": "spec.title: required"}]}),
        ),
        topic::SOURCE_DRIFT_DETECTED => payload::source(&source(), json!({"objects": drift})),
        topic::SOURCE_HEALED => {
            payload::source(&source(), json!({"revision": "4f2a9c1", "objects": drift}))
        }
        topic::SOURCE_PRUNED => payload::source(
            &source(),
            json!({"kind": "Task", "project": "web", "name": "old-cart"}),
        ),
        topic::SOURCE_PRUNE_SKIPPED => payload::source(
            &source(),
            json!({"kind": "Task", "project": "web", "name": "epic-1", "held": ["cart", "pay"],
                   "held_count": 2,
                   "reason": "deleting it would also delete objects this Source does not prune"}),
        ),
        topic::SCHEDULE_RUN_CREATED => payload::schedule(
            &schedule(),
            "web",
            json!({"scheduled_at": tick, "run": "nightly-1772330400",
                   "run_id": Uuid::from_u128(8)}),
        ),
        topic::SCHEDULE_TICK_SKIPPED => payload::schedule(
            &schedule(),
            "web",
            json!({"scheduled_at": tick,
                   "reason": "concurrencyPolicy Forbid: run nightly-1772326800 is still active"}),
        ),
        topic::SCHEDULE_TICK_MISSED => payload::schedule(
            &schedule(),
            "web",
            json!({"scheduled_at": tick, "missed_ticks": 3, "starting_deadline_seconds": 60}),
        ),
        other => panic!("no realistic payload for {other}: add one here"),
    }
}

/// (topic, reason, object, message) for every topic in [`topic::ALL`].
const EXPECTED: &[(&str, &str, &str, &str)] = &[
    ("project.created", "Created", "project/web", "project web created (\"Web shop\")"),
    ("project.updated", "Updated", "project/web", "project web updated"),
    ("project.archived", "Archived", "project/web", "project web archived"),
    ("work_item.created", "Created", "task/cart", "task cart created in project web (todo)"),
    ("work_item.updated", "Updated", "task/cart", "task cart updated (todo)"),
    ("work_item.status_changed", "StatusChanged", "task/cart", "task cart moved from todo to doing"),
    ("work_item.reparented", "Reparented", "task/cart", "task cart moved from cart to rel1/cart"),
    ("work_item.deleted", "Deleted", "task/cart", "task cart deleted"),
    ("run.created", "Created", "run/fix-login", "run fix-login created for task cart (provider claude)"),
    ("run.spawning", "Scheduled", "run/fix-login", "run fix-login dispatched to host alpha as session pam-00000000 (attempt 2 of 3)"),
    ("run.started", "Started", "run/fix-login", "run fix-login started (attempt 2 of 3)"),
    ("run.finished", "Completed", "run/fix-login", "run fix-login exited with code 0 (attempt 2 of 3)"),
    ("run.failed", "HostLost", "run/fix-login", "host_lost: host alpha stopped heartbeating at 12:03:04Z (attempt 2 of 3)"),
    ("run.stopped", "Stopped", "run/fix-login", "run fix-login stopped (exit code 143) (attempt 1 of 3)"),
    ("run.stop_requested", "StopRequested", "run/fix-login", "run fix-login asked to stop (attempt 2 of 3)"),
    ("run.signal_received", "Signalled", "run/fix-login", "signal SIGINT sent to run fix-login (attempt 2 of 3)"),
    ("run.output_appended", "Output", "run/fix-login", "run fix-login output: 12 lines, 345 bytes (attempt 2 of 3)"),
    ("run.lease_acquired", "Attached", "run/fix-login", "ana attached to run fix-login (attempt 2 of 3)"),
    ("run.lease_released", "Detached", "run/fix-login", "ana's attach lease on run fix-login expired"),
    ("run.orphan_detected", "OrphanDetected", "host/alpha", "host alpha runs tmux session pam-00000000 that no live run owns (run fix-login, attempt 1)"),
    ("run.integrity_anomaly", "IntegrityAnomaly", "run/fix-login", "run points at epic \"checkout\"; runs may only execute tasks and subtasks"),
    ("run.requeued", "Requeued", "run/fix-login", "run fix-login requeued after host_lost (attempt 3 of 3)"),
    ("run.blocked", "Blocked", "run/fix-login", "run fix-login waits: a task its task depends on is not done"),
    ("run.unblocked", "Unblocked", "run/fix-login", "run fix-login may be dispatched: every task its task depends on is done"),
    ("run.budget_exceeded", "BudgetExceeded", "run/fix-login", "run fix-login is being stopped: cost $2.04 reached the budget of $2"),
    ("run.result_recorded", "ResultRecorded", "run/fix-login", "run fix-login left branch pam/cart/fix-login-a2: 1 commits, 2 files changed, +10 -3 (attempt 2 of 3)"),
    ("run.permission_denied", "PermissionDenied", "run/fix-login", "run fix-login's agent was refused Write hello.txt; Bash rm -rf build by the run's permissions (attempt 1 of 3)"),
    ("worker.registered", "Online", "host/alpha", "host alpha is online (was offline)"),
    ("worker.offline", "Offline", "host/alpha", "host alpha stopped heartbeating (last seen 2026-03-01T12:03:04Z)"),
    ("worker.instance_suspect", "InstanceSuspect", "host/alpha", "host alpha: a second worker instance ccccdddd presents its token (pinned: aaaabbbb)"),
    ("worker.instance_reinstalled", "InstanceReinstalled", "host/alpha", "host alpha was reinstalled: new worker instance ccccdddd"),
    ("source.synced", "Synced", "source/gitops", "source gitops applied revision 4f2a9c1: 2 created, 1 configured, 0 pruned (7 objects)"),
    ("source.sync_failed", "SyncFailed", "source/gitops", "source gitops failed to sync revision 4f2a9c1: tasks.yaml:3: spec.title: required"),
    ("source.drift_detected", "DriftDetected", "source/gitops", "source gitops: 2 objects changed by another path (Task web/cart, Run web/fix-login)"),
    ("source.healed", "Healed", "source/gitops", "source gitops put back 2 objects to revision 4f2a9c1 (Task web/cart, Run web/fix-login)"),
    ("source.pruned", "Pruned", "source/gitops", "source gitops deleted Task web/old-cart: it left the tree"),
    ("source.prune_skipped", "PruneSkipped", "source/gitops", "source gitops kept Task web/epic-1: deleting it would also delete 2 objects it does not prune (cart, pay)"),
    ("schedule.run_created", "RunCreated", "schedule/nightly", "schedule nightly created run nightly-1772330400 for its 2026-03-01T02:00:00Z tick"),
    ("schedule.tick_skipped", "TickSkipped", "schedule/nightly", "schedule nightly skipped its 2026-03-01T02:00:00Z tick: concurrencyPolicy Forbid: run nightly-1772326800 is still active"),
    ("schedule.tick_missed", "TickMissed", "schedule/nightly", "schedule nightly missed its 2026-03-01T02:00:00Z tick: past its 60s starting deadline (3 ticks missed)"),
];

#[test]
fn every_topic_reads_as_a_sentence() {
    let mut wrong = Vec::new();
    for t in topic::ALL {
        let Some(&(_, reason, object, message)) = EXPECTED.iter().find(|e| e.0 == *t) else {
            wrong.push(format!("{t}: no expected sentence in EXPECTED"));
            continue;
        };
        let p = payload_of(t);
        let Some(got) = known(t, &p) else {
            wrong.push(format!("{t}: no arm in message::known"));
            continue;
        };
        let want = Rendered {
            reason: reason.into(),
            message: message.into(),
            object: Some(object.into()),
        };
        if got != want {
            wrong.push(format!("{t}:\n  got  {got:?}\n  want {want:?}"));
        }
        // No raw JSON in a message.
        if got.message.contains('{') || got.message.contains("\":") {
            wrong.push(format!("{t}: JSON in {:?}", got.message));
        }
    }
    for (t, ..) in EXPECTED {
        if !topic::ALL.contains(t) {
            wrong.push(format!("{t}: in EXPECTED but not in topic::ALL"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_failure_without_a_message_of_its_own_is_said_in_words() {
    let mut r = run(RunStatus::Failed, 3);
    r.failure_reason = Some(FailureReason::RestartExhausted);
    let p = payload::run(
        &r,
        json!({"from": "running", "failure_reason": "restart_exhausted", "cause": "host_lost"}),
    );
    let got = render(topic::RUN_FAILED, &p);
    assert_eq!(got.reason, "HostLost");
    assert_eq!(
        got.message,
        "host_lost: its host stopped heartbeating; restart exhausted (attempt 3 of 3)"
    );
    // A provider's failure hook: only the cause.
    let p = payload::run(
        &run(RunStatus::Running, 1),
        json!({"cause": "provider_failed"}),
    );
    assert_eq!(
        render(topic::RUN_FAILED, &p).message,
        "provider_failed: the provider reported failure (attempt 1 of 3)"
    );
    // A reason never restarted promises no more attempts.
    for reason in [
        "no_eligible_host",
        "dispatch_timeout",
        "dependency_cancelled",
    ] {
        let p = payload::run(
            &run(RunStatus::Pending, 1),
            json!({"from": "pending", "failure_reason": reason, "cause": reason}),
        );
        let m = render(topic::RUN_FAILED, &p).message;
        assert!(m.ends_with(" (attempt 1, not restarted)"), "{m}");
    }
}

#[test]
fn an_unknown_topic_and_an_older_payload_still_read_without_json() {
    let got = render(
        "thing.went_sideways",
        &json!({"name": "x", "n": 2, "nested": {"a": 1}, "thing_id": "u"}),
    );
    assert_eq!(got.reason, "WentSideways");
    assert_eq!(got.message, "n=2 name=x");
    assert_eq!(got.object, None);
    // A run event journaled before max_attempts was in the payload.
    let got = render(
        topic::RUN_STARTED,
        &json!({"run_id": "u", "attempt": 2, "name": "r1"}),
    );
    assert_eq!(got.message, "run r1 started (attempt 2)");
}

#[test]
fn a_finish_whose_agent_was_refused_or_whose_provider_failed_is_no_plain_completion() {
    let finished = |status, extra| payload::run(&run(status, 1), extra);
    let got = render(
        topic::RUN_FINISHED,
        &finished(
            RunStatus::Exited,
            json!({"exit_code": 0, "permission_denials": 1}),
        ),
    );
    assert_eq!(got.reason, "PermissionDenied");
    assert_eq!(
        got.message,
        "run fix-login exited with code 0; its agent was refused 1 tool call by the run's permissions (attempt 1 of 3)"
    );
    let got = render(
        topic::RUN_FINISHED,
        &finished(
            RunStatus::Failed,
            json!({"exit_code": 0, "message": "API Error: 500 Internal Server Error"}),
        ),
    );
    assert_eq!(got.reason, "Error");
    assert_eq!(
        got.message,
        "run fix-login exited with code 0, failed: API Error: 500 Internal Server Error (attempt 1 of 3)"
    );
    // A requested stop reads as Stopped, not as an error.
    let got = render(
        topic::RUN_FINISHED,
        &finished(RunStatus::Stopped, json!({"exit_code": 143})),
    );
    assert_eq!(got.reason, "Stopped");
    assert_eq!(
        got.message,
        "run fix-login exited with code 143, stopped (attempt 1 of 3)"
    );
    let p = payload::run(
        &run(RunStatus::Running, 1),
        json!({"cause": "provider_failed", "message": "API Error: 500 boom"}),
    );
    assert_eq!(
        render(topic::RUN_FAILED, &p).message,
        "provider_failed: API Error: 500 boom (attempt 1 of 3)"
    );
}
