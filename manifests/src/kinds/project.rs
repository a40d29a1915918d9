//! The `Project` kind's spec and observed state.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Budget, Condition, Permissions, Repository, UsageFigures};
use crate::state::ProjectStatus;

/// Desired state of a project.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectSpec {
    /// Human-readable name (`projects.name`); the slug when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// Free text.
    #[serde(default)]
    pub description: String,
    /// An archived project accepts no new tasks or runs; runs in flight go
    /// on. Setting it back to false un-archives.
    #[serde(default)]
    pub archived: bool,
    /// What all the project's runs together may use: once
    /// reached, no new run is dispatched (condition `BudgetExceeded`) until
    /// the budget is raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// The git repository its runs' workspaces are worktrees of; a run with a
    /// workspace needs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<Repository>,
    /// The permissions of this project's runs whose run and task declare
    /// none, settled when each run is created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<Permissions>,
}

/// Observed state of a project.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedProject {
    /// The `projects.status` column.
    pub phase: ProjectStatus,
    /// The Source (GitOps) whose manifests declare this project, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Token usage and cost of every attempt of every run of the project;
    /// absent while none was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageFigures>,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
