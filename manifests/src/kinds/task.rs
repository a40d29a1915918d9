//! The `Task` kind: a work item (milestone, epic, task, subtask).

use super::*;

/// Desired state of a work item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskSpec {
    /// milestone | epic | task | subtask. Immutable.
    #[serde(rename = "type", default = "default_task_type")]
    pub type_: WorkItemKind,
    /// The work item's title.
    pub title: String,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// The parent's name, a Task in the same project; none for a root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<Name>,
    /// Tasks of the same project that must be `done` before a run of this
    /// task is dispatched. No cycles, not itself, not one of
    /// its own ancestors or descendants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<Name>,
    /// Desired workflow state; reached through legal transitions only.
    #[serde(default = "default_task_status")]
    pub status: WorkItemStatus,
    /// Who works on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignee: Option<String>,
    /// Order among siblings.
    #[serde(default)]
    pub sort_order: i32,
    /// The workspace of this task's runs that set neither `workspace`
    /// nor `cwd`, read when an attempt is handed to its worker.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Workspace>,
    /// The permissions of this task's runs that declare none (a run's
    /// own win whole), settled when each run is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
}

fn default_task_type() -> WorkItemKind {
    WorkItemKind::Task
}
fn default_task_status() -> WorkItemStatus {
    WorkItemStatus::Todo
}

/// Done/total of a work item's children (display only: a parent never
/// completes on its own).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Completion {
    /// Children that are done.
    pub done: u32,
    /// All children that are not cancelled.
    pub total: u32,
}

/// Observed state of a work item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedTask {
    /// The stored `work_items.status`.
    pub phase: WorkItemStatus,
    /// The materialized path (`work_items.path`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Children's completion ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion: Option<Completion>,
    /// The tasks of `spec.dependsOn` that are not `done` yet: while any is
    /// listed, runs of this task stay pending.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub blocked_by: Vec<Name>,
    /// The tasks whose `spec.dependsOn` names this one (what waits for it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<Name>,
    /// Token usage and cost of every attempt of the runs of this task and
    /// its subtasks; absent while none was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageFigures>,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
