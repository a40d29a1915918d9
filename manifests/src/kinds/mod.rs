//! The manifest kinds — `Project` ([`project`]), `Task` ([`task`]), `Run`
//! ([`run`]), `Host` ([`host`]), `Source` ([`source`]), `Webhook`
//! ([`webhook`]), `Secret` ([`secret`]), `Schedule` ([`schedule`]) and
//! `Role` ([`role`]; stored generically, [`generic`]), each described once
//! in [`info`] — as they are read and printed: `{apiVersion, kind,
//! metadata, spec, status}`.
//!
//! Field names are camelCase; unknown fields are refused everywhere
//! (`deny_unknown_fields`). These types describe objects in both
//! directions:
//!
//! - **Input** (`pamctl apply`, through [`crate::load`]): `status` is
//!   refused, and so are the server-set metadata fields `uid`, `generation`
//!   and `creationTimestamp` — a manifest states what should exist, the
//!   server says what does. `resourceVersion` *is* accepted: it is the
//!   optimistic-concurrency token (a stale one is a 409 from the server).
//! - **Output** (`pamctl get -o yaml|json`): every field, `status` included.
//!
//! Defaults (a Task's `type: task`, `status: todo`; a Run's restart policy
//! `maxAttempts: 1, backoffSeconds: 10, backoffMaxSeconds: 300`; a Host's
//! `capacity: 4`) are applied on input and always printed on output.

use std::fmt;
use std::num::NonZeroU32;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::names::{Annotations, LabelKey, LabelValue, Labels, Name};
pub mod bounded;
pub mod columns;
pub mod info;
pub use info::{KindInfo, Scope};
mod secret;
pub use secret::{
    valid_secret_key, ObservedSecret, SecretKeyStatus, SecretSpec, SECRET_KEY_MAX_BYTES,
    SECRET_MAX_BYTES,
};
pub mod permissions;
pub use permissions::{
    EffectivePermissions, PermissionMode, Permissions, PermissionsFrom, PERMISSION_TOOLS_MAX,
};
pub mod role;
pub use role::{ObservedRole, ProjectSelector, RoleRule, RoleSpec};
mod schedule;
pub use schedule::{ConcurrencyPolicy, ObservedSchedule, ScheduleSpec, Timetable, SCHEDULE_LABEL};
mod source;
pub use source::{
    Drift, GitSource, HealthState, ObservedSource, OwnedState, SourceError, SourceSpec, SyncState,
    OBJECTS_SHOWN, VARS_ANNOTATION_PREFIX,
};
mod webhook;
pub use webhook::{ObservedWebhook, SecretKeyRef, WebhookSpec};
mod workspace;
pub use workspace::{
    ref_name_problem, FromAttempt, Keep, Repository, RepositorySecretRef, RunResult, Workspace,
    REF_MAX_BYTES,
};

use crate::state::{FailureReason, HostStatus, Platform, RunStatus, WorkItemKind, WorkItemStatus};

/// The one API version: `pam.dev/v1`.
pub const API_VERSION: &str = "pam.dev/v1";

/// `apiVersion`: only `pam.dev/v1` exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
pub enum ApiVersion {
    /// `pam.dev/v1`.
    #[default]
    #[serde(rename = "pam.dev/v1")]
    V1,
}

/// A manifest kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A project: the namespace of tasks and runs.
    Project,
    /// A work item: milestone, epic, task or subtask.
    Task,
    /// One execution of a provider CLI for a task, on some host.
    Run,
    /// A worker host.
    Host,
    /// A GitOps source of desired state (cluster-scoped).
    Source,
    /// An HTTP endpoint receiving signed event deliveries (cluster-scoped).
    Webhook,
    /// Named values of a project, encrypted at rest, for runs'
    /// environments.
    Secret,
    /// Runs of a project started on a cron timetable.
    Schedule,
    /// A custom role tokens are bound to (stored generically).
    Role,
}

impl Kind {
    /// Every kind, in apply order (projects before their tasks, tasks
    /// before their runs).
    pub const ALL: [Kind; 9] = [
        Kind::Project,
        Kind::Host,
        Kind::Secret,
        Kind::Task,
        Kind::Run,
        Kind::Schedule,
        Kind::Source,
        Kind::Webhook,
        Kind::Role,
    ];

    /// This kind's description ([`info::KINDS`]).
    pub const fn info(self) -> &'static KindInfo {
        &info::KINDS[self as usize]
    }

    /// The kind as written in `kind:` (`"Task"`).
    pub const fn as_str(self) -> &'static str {
        self.info().name
    }

    /// Lower-case singular (`"task"`): file names, API paths.
    pub const fn singular(self) -> &'static str {
        self.info().singular
    }

    /// Lower-case plural (`"tasks"`).
    pub const fn plural(self) -> &'static str {
        self.info().plural
    }

    /// The short name pamctl accepts (`"tk"`).
    pub const fn short(self) -> &'static str {
        self.info().short
    }

    /// Whether objects of this kind live inside a project
    /// (`metadata.project` required) rather than globally.
    pub const fn is_project_scoped(self) -> bool {
        matches!(self.info().scope, Scope::Project)
    }

    /// Parses the exact `kind:` value (`"Task"`).
    pub fn parse(text: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == text)
    }

    /// Parses what pamctl accepts for a kind: the kind itself, singular,
    /// plural or short name, case-insensitively (`Task`, `task`, `tasks`,
    /// `tk`).
    pub fn parse_alias(text: &str) -> Option<Kind> {
        let lower = text.to_ascii_lowercase();
        Kind::ALL
            .into_iter()
            .find(|k| [k.singular(), k.plural(), k.short()].contains(&lower.as_str()))
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! kind_tag {
    ($tag:ident, $variant:ident) => {
        #[doc = concat!("The `kind:` of a ", stringify!($variant), ": always `", stringify!($variant), "`.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
        pub enum $tag {
            #[doc = concat!("`", stringify!($variant), "`.")]
            #[default]
            $variant,
        }
    };
}

macro_rules! object_meta {
    ($(#[$meta:meta])* $name:ident { $($project:tt)* }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            /// The object's name: a DNS label, unique per project for Tasks
            /// and Runs, globally for Projects (their slug) and Hosts.
            pub name: Name,
            $($project)*
            /// Labels, for selection (`-l`, `--prune -l`, Run targets).
            #[serde(default, skip_serializing_if = "Labels::is_empty")]
            pub labels: Labels,
            /// Free-form annotations (label-like keys).
            #[serde(default, skip_serializing_if = "Annotations::is_empty")]
            pub annotations: Annotations,
            /// Server-set: the object's UUID. Refused on input.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub uid: Option<uuid::Uuid>,
            /// Server-set: bumps on spec change only. Refused on input.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub generation: Option<i64>,
            /// Optimistic concurrency token: accepted on input; a stale one
            /// is refused by the server with a conflict.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub resource_version: Option<String>,
            /// Server-set: RFC 3339 creation time. Refused on input.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub creation_timestamp: Option<String>,
            /// Server-set, in a get of one object: which fields each
            /// manager set, and when (the newest entry is the
            /// object's last applier). Refused on input.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub managed_fields: Option<Vec<ManagedFieldsEntry>>,
        }
    };
}

/// One manager's fields of an object (`metadata.managedFields`), as
/// kubectl shows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ManagedFieldsEntry {
    /// `apply:TOKEN`, `label:TOKEN`, `annotate:TOKEN`, `edit:TOKEN` or
    /// `source:NAME`.
    pub manager: String,
    /// `Apply` (apply, a Source's sync) or `Update` (label, annotate,
    /// edit).
    pub operation: String,
    /// RFC 3339: when this manager last changed the object.
    pub time: String,
    /// The field paths it owns: `spec.title`, `metadata.labels.tier`, …
    pub fields: Vec<String>,
}

object_meta! {
    /// Metadata of a global object (Project, Host).
    ObjectMeta {}
}

object_meta! {
    /// Metadata of an object that lives in a project (Task, Run).
    ProjectObjectMeta {
        /// The project (its name, the slug) the object belongs to.
        pub project: Name,
    }
}

/// The metadata fields the server sets; refused on input.
pub const SERVER_SET_METADATA: [&str; 4] =
    ["uid", "generation", "creationTimestamp", "managedFields"];

/// A condition, as in Kubernetes: the latest observation of one aspect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Condition {
    /// What the condition is about (`Ready`, `Dispatched`, …).
    #[serde(rename = "type")]
    pub type_: String,
    /// Whether it holds.
    pub status: ConditionStatus,
    /// A CamelCase machine-readable reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// RFC 3339 time of the last change of `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
}

/// A condition's truth value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConditionStatus {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known yet.
    Unknown,
}

fn is_false(b: &bool) -> bool {
    !*b
}

// ---------------------------------------------------------------- Project

mod project;
pub use project::*;

// ---------------------------------------------------------------- Task

mod task;
pub use task::*;

// ---------------------------------------------------------------- Run

mod run;
pub use run::*;
mod usage;
pub use usage::*;

// ---------------------------------------------------------------- Host

mod host;
pub use host::*;

// ---------------------------------------------------------------- objects

macro_rules! object {
    ($(#[$meta:meta])* $name:ident, $tag:ident, $metaty:ident, $spec:ident, $status:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(rename_all = "camelCase", deny_unknown_fields)]
        pub struct $name {
            /// Always `pam.dev/v1`.
            pub api_version: ApiVersion,
            #[doc = concat!("Always `", stringify!($name), "`.")]
            pub kind: $tag,
            /// Identity and labels.
            pub metadata: $metaty,
            /// Desired state, operator-owned.
            pub spec: $spec,
            /// Observed state, controller-owned: printed, never read from a
            /// manifest. Boxed: a manifest being applied has none, and
            /// apply holds every manifest of a batch.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status: Option<Box<$status>>,
        }

        kind_tag!($tag, $name);

        impl From<$name> for Manifest {
            fn from(o: $name) -> Manifest {
                Manifest::$name(Box::new(o))
            }
        }

        impl $name {
            /// A new object with no status and no server-set metadata.
            pub fn new(metadata: $metaty, spec: $spec) -> Self {
                $name {
                    api_version: ApiVersion::V1,
                    kind: $tag::default(),
                    metadata,
                    spec,
                    status: None,
                }
            }
        }
    };
}

object!(
    /// A project: the namespace of tasks and runs.
    Project, ProjectKind, ObjectMeta, ProjectSpec, ObservedProject
);
object!(
    /// A work item (milestone, epic, task, subtask).
    Task, TaskKind, ProjectObjectMeta, TaskSpec, ObservedTask
);
object!(
    /// A run of a provider CLI for a task.
    Run, RunKind, ProjectObjectMeta, RunSpec, ObservedRun
);
object!(
    /// A worker host.
    Host, HostKind, ObjectMeta, HostSpec, ObservedHost
);
object!(
    /// A GitOps Source.
    Source, SourceKind, ObjectMeta, SourceSpec, ObservedSource
);
object!(
    /// A Webhook.
    Webhook, WebhookKind, ObjectMeta, WebhookSpec, ObservedWebhook
);
object!(
    /// A Secret: values of a project, write-only.
    Secret, SecretKind, ProjectObjectMeta, SecretSpec, ObservedSecret
);
object!(
    /// A Schedule: runs on a cron timetable.
    Schedule, ScheduleKind, ProjectObjectMeta, ScheduleSpec, ObservedSchedule
);
object!(
    /// A Role: a custom role tokens are bound to.
    Role, RoleKind, ObjectMeta, RoleSpec, ObservedRole
);

/// Any manifest. Serializes as the object itself (its `kind` field says
/// which); deserializes by dispatching on `kind`. Each kind is boxed: an
/// inline enum is as big as its biggest kind (a Schedule, ~500 bytes),
/// and apply holds a batch's documents in vectors (per file, then
/// joined) while it validates them whole.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Manifest {
    /// `kind: Project`.
    Project(Box<Project>),
    /// `kind: Task`.
    Task(Box<Task>),
    /// `kind: Run`.
    Run(Box<Run>),
    /// `kind: Host`.
    Host(Box<Host>),
    /// `kind: Source`.
    Source(Box<Source>),
    /// `kind: Webhook`.
    Webhook(Box<Webhook>),
    /// `kind: Secret`.
    Secret(Box<Secret>),
    /// `kind: Schedule`.
    Schedule(Box<Schedule>),
    /// `kind: Role`.
    Role(Box<Role>),
}

/// `for_manifest!(kind, T => expr)`: `expr` with `T` the manifest type of
/// `kind` (a [`Kind`] value) — the one match from kinds to their types,
/// for typing, schemas and parsing.
macro_rules! for_manifest {
    ($kind:expr, $t:ident => $body:expr) => {
        $crate::kinds::for_manifest!(@types $kind, $t, $body;
            Project, Task, Run, Host, Source, Webhook, Secret, Schedule, Role)
    };
    (@types $kind:expr, $t:ident, $body:expr; $($variant:ident),+) => {
        match $kind {
            $($crate::kinds::Kind::$variant => {
                type $t = $crate::kinds::$variant;
                $body
            })+
        }
    };
}
pub(crate) use for_manifest;

/// `each!(m, o => expr)`: `expr` for the object inside whichever
/// [`Manifest`] variant `m` is — the one match over the variants that the
/// metadata accessors share.
macro_rules! each {
    ($m:expr, $o:ident => $body:expr) => {
        each!(@variants $m, $o, $body;
            Project, Task, Run, Host, Source, Webhook, Secret, Schedule, Role)
    };
    (@variants $m:expr, $o:ident, $body:expr; $($variant:ident),+) => {
        match $m {
            $(Manifest::$variant($o) => $body,)+
        }
    };
}

impl Manifest {
    /// The object's kind.
    pub fn kind(&self) -> Kind {
        match self {
            Manifest::Project(_) => Kind::Project,
            Manifest::Task(_) => Kind::Task,
            Manifest::Run(_) => Kind::Run,
            Manifest::Host(_) => Kind::Host,
            Manifest::Source(_) => Kind::Source,
            Manifest::Webhook(_) => Kind::Webhook,
            Manifest::Secret(_) => Kind::Secret,
            Manifest::Schedule(_) => Kind::Schedule,
            Manifest::Role(_) => Kind::Role,
        }
    }

    /// `metadata.name`.
    pub fn name(&self) -> &Name {
        each!(self, o => &o.metadata.name)
    }

    /// `metadata.project` for Tasks and Runs.
    pub fn project(&self) -> Option<&Name> {
        match self {
            Manifest::Task(o) => Some(&o.metadata.project),
            Manifest::Run(o) => Some(&o.metadata.project),
            Manifest::Secret(o) => Some(&o.metadata.project),
            Manifest::Schedule(o) => Some(&o.metadata.project),
            Manifest::Project(_)
            | Manifest::Host(_)
            | Manifest::Source(_)
            | Manifest::Webhook(_)
            | Manifest::Role(_) => None,
        }
    }

    /// `metadata.labels`.
    pub fn labels(&self) -> &Labels {
        each!(self, o => &o.metadata.labels)
    }

    /// `metadata.labels`, to change (apply's `--applyset` label).
    pub fn labels_mut(&mut self) -> &mut Labels {
        each!(self, o => &mut o.metadata.labels)
    }

    /// `metadata.annotations`.
    pub fn annotations(&self) -> &Annotations {
        each!(self, o => &o.metadata.annotations)
    }

    /// `metadata.resourceVersion`, when the manifest asks for optimistic
    /// concurrency.
    pub fn resource_version(&self) -> Option<&str> {
        each!(self, o => o.metadata.resource_version.as_deref())
    }

    /// Whether a `status` block is present.
    pub fn has_status(&self) -> bool {
        each!(self, o => o.status.is_some())
    }

    /// The whole object as JSON (`apiVersion`, `kind`, `metadata`,
    /// `spec`), as [`Manifest::from_json`] reads it back.
    pub fn to_json(&self) -> serde_json::Value {
        each!(self, o => serde_json::to_value(o)).expect("manifests serialize to JSON")
    }

    /// The spec as JSON (what the server stores in the `spec` column).
    pub fn spec_json(&self) -> serde_json::Value {
        let v = match self {
            Manifest::Project(o) => serde_json::to_value(&o.spec),
            Manifest::Task(o) => serde_json::to_value(&o.spec),
            Manifest::Run(o) => serde_json::to_value(&o.spec),
            Manifest::Host(o) => serde_json::to_value(&o.spec),
            Manifest::Source(o) => serde_json::to_value(&o.spec),
            Manifest::Webhook(o) => serde_json::to_value(&o.spec),
            Manifest::Schedule(o) => serde_json::to_value(&o.spec),
            Manifest::Role(o) => serde_json::to_value(&o.spec),
            // Never the values: the server stores a Secret's keys, sizes
            // and digests in their place (controller rules::secrets).
            Manifest::Secret(o) => Ok(serde_json::json!({
                "keys": o.spec.data.keys().chain(o.spec.string_data.keys()).collect::<std::collections::BTreeSet<_>>(),
            })),
        };
        v.expect("specs serialize to JSON")
    }

    /// Per-document rules of a generically stored kind that typing cannot
    /// express, `(field path, message)`: checked on load like every
    /// kind's (the one arm a generic kind adds here).
    pub fn generic_problems(&self) -> Vec<(String, String)> {
        match self {
            Manifest::Role(o) => {
                let mut out: Vec<_> = role::name_problem(&o.metadata.name).into_iter().collect();
                out.extend(o.spec.problems());
                out
            }
            _ => Vec::new(),
        }
    }

    /// Parses an object from JSON as printed by the server (status
    /// allowed), dispatching on `kind`. A value nested deeper than
    /// [`crate::limits::NESTING_MAX_DEPTH`] is refused before serde walks
    /// it.
    pub fn from_json(value: serde_json::Value) -> Result<Manifest, serde_json::Error> {
        use serde::de::Error;
        if crate::limits::too_deep(&value) {
            return Err(serde_json::Error::custom(crate::limits::too_deep_message()));
        }
        let kind = value
            .get("kind")
            .and_then(|k| k.as_str())
            .ok_or_else(|| serde_json::Error::missing_field("kind"))?;
        match Kind::parse(kind) {
            Some(k) => {
                for_manifest!(k, T => serde_json::from_value::<T>(value).map(Manifest::from))
            }
            None => Err(serde_json::Error::unknown_variant(kind, &info::NAMES)),
        }
    }
}

impl<'de> Deserialize<'de> for Manifest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Manifest::from_json(value).map_err(serde::de::Error::custom)
    }
}

mod generic;
pub use generic::Generic;

#[cfg(test)]
mod tests;
