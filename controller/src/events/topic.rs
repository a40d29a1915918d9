//! Event topics — exactly the seed's list (pam-data-model.txt, "Event
//! Topics"), plus two it implies but does not name:
//! `run.integrity_anomaly` for the seed's own rule that a run pointing at
//! a milestone or epic is "a data-integrity anomaly to journal", and
//! `run.requeued` for the restart requeue (failed → pending), so the
//! journal shows every status change of a run. `run.unblocked` and
//! `run.blocked` say when a pending run's task dependencies
//! are all done, or one was reopened (`rules::runs::gate`).
//! `run.budget_exceeded` says a run reached its budget and is
//! being stopped; `run.result_recorded` that an attempt's
//! workspace result was stored; `run.permission_denied` that a run's
//! agent was refused tool calls. The `source.*` topics are
//! GitOps' (docs/gitops.md): a Source's syncs, failures, drift, heals and
//! prunes. The `schedule.*` topics say what a Schedule's tick
//! did: created its run, skipped it (Forbid, a missing task) or missed it
//! (past `startingDeadlineSeconds`).

pub const PROJECT_CREATED: &str = "project.created";
pub const PROJECT_UPDATED: &str = "project.updated";
pub const PROJECT_ARCHIVED: &str = "project.archived";
pub const WORK_ITEM_CREATED: &str = "work_item.created";
pub const WORK_ITEM_UPDATED: &str = "work_item.updated";
pub const WORK_ITEM_STATUS_CHANGED: &str = "work_item.status_changed";
pub const WORK_ITEM_REPARENTED: &str = "work_item.reparented";
pub const WORK_ITEM_DELETED: &str = "work_item.deleted";
pub const RUN_CREATED: &str = "run.created";
pub const RUN_SPAWNING: &str = "run.spawning";
pub const RUN_STARTED: &str = "run.started";
pub const RUN_FINISHED: &str = "run.finished";
pub const RUN_FAILED: &str = "run.failed";
pub const RUN_STOPPED: &str = "run.stopped";
/// A stop was asked for (`pamctl stop`, a schedule's `Replace`): `run.stopped`
/// follows when it takes effect. Journaled so that every replica's
/// watch streams tell the run's worker at once.
pub const RUN_STOP_REQUESTED: &str = "run.stop_requested";
pub const RUN_SIGNAL_RECEIVED: &str = "run.signal_received";
pub const RUN_OUTPUT_APPENDED: &str = "run.output_appended";
pub const RUN_LEASE_ACQUIRED: &str = "run.lease_acquired";
pub const RUN_LEASE_RELEASED: &str = "run.lease_released";
pub const RUN_ORPHAN_DETECTED: &str = "run.orphan_detected";
pub const RUN_INTEGRITY_ANOMALY: &str = "run.integrity_anomaly";
pub const RUN_REQUEUED: &str = "run.requeued";
pub const RUN_BLOCKED: &str = "run.blocked";
pub const RUN_UNBLOCKED: &str = "run.unblocked";
/// A live run reached its `spec.budget` and is being stopped; the
/// payload carries the figures and the budget.
pub const RUN_BUDGET_EXCEEDED: &str = "run.budget_exceeded";
/// An attempt's workspace result was stored (branch, commits,
/// diff stats; the patch is read from the result route, not the journal).
pub const RUN_RESULT_RECORDED: &str = "run.result_recorded";
/// A run's agent was refused tool calls by its permissions: the payload
/// names them (`denied`: `[{tool, target}]`) and counts them; the run's
/// `PermissionDenied` condition sums the attempt's.
pub const RUN_PERMISSION_DENIED: &str = "run.permission_denied";
pub const WORKER_REGISTERED: &str = "worker.registered";
pub const WORKER_OFFLINE: &str = "worker.offline";
pub const WORKER_INSTANCE_SUSPECT: &str = "worker.instance_suspect";
pub const WORKER_INSTANCE_REINSTALLED: &str = "worker.instance_reinstalled";
pub const SOURCE_SYNCED: &str = "source.synced";
pub const SOURCE_SYNC_FAILED: &str = "source.sync_failed";
pub const SOURCE_DRIFT_DETECTED: &str = "source.drift_detected";
pub const SOURCE_HEALED: &str = "source.healed";
pub const SOURCE_PRUNED: &str = "source.pruned";
pub const SOURCE_PRUNE_SKIPPED: &str = "source.prune_skipped";
pub const SCHEDULE_RUN_CREATED: &str = "schedule.run_created";
pub const SCHEDULE_TICK_SKIPPED: &str = "schedule.tick_skipped";
pub const SCHEDULE_TICK_MISSED: &str = "schedule.tick_missed";

/// Every topic pam journals (a Webhook's `spec.topics` must match one).
pub const ALL: &[&str] = &[
    PROJECT_CREATED,
    PROJECT_UPDATED,
    PROJECT_ARCHIVED,
    WORK_ITEM_CREATED,
    WORK_ITEM_UPDATED,
    WORK_ITEM_STATUS_CHANGED,
    WORK_ITEM_REPARENTED,
    WORK_ITEM_DELETED,
    RUN_CREATED,
    RUN_SPAWNING,
    RUN_STARTED,
    RUN_FINISHED,
    RUN_FAILED,
    RUN_STOPPED,
    RUN_STOP_REQUESTED,
    RUN_SIGNAL_RECEIVED,
    RUN_OUTPUT_APPENDED,
    RUN_LEASE_ACQUIRED,
    RUN_LEASE_RELEASED,
    RUN_ORPHAN_DETECTED,
    RUN_INTEGRITY_ANOMALY,
    RUN_REQUEUED,
    RUN_BLOCKED,
    RUN_UNBLOCKED,
    RUN_BUDGET_EXCEEDED,
    RUN_RESULT_RECORDED,
    RUN_PERMISSION_DENIED,
    WORKER_REGISTERED,
    WORKER_OFFLINE,
    WORKER_INSTANCE_SUSPECT,
    WORKER_INSTANCE_REINSTALLED,
    SOURCE_SYNCED,
    SOURCE_SYNC_FAILED,
    SOURCE_DRIFT_DETECTED,
    SOURCE_HEALED,
    SOURCE_PRUNED,
    SOURCE_PRUNE_SKIPPED,
    SCHEDULE_RUN_CREATED,
    SCHEDULE_TICK_SKIPPED,
    SCHEDULE_TICK_MISSED,
];
