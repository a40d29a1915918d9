//! The `Role` kind: a custom role — rules of verbs × kinds ×
//! projects — that a token may be bound to beside the built-in roles
//! (admin, operator, viewer, worker, metrics). Cluster-scoped, stored
//! generically (no table of its own).
//!
//! What a rule may name is checked here ([`RoleSpec::problems`]); pamd
//! resolves a rule's `projectSelector` against the projects' labels each
//! time it builds a token's grant.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::names::{Labels, Name};

/// The verbs a rule may grant (kubectl's habit).
pub const VERBS: &[&str] = &[
    "get", "list", "watch", "create", "update", "delete", "attach", "signal", "sync", "trigger",
];

/// The resources a project-scoped permission names: the project-scoped
/// kinds, the projects themselves (a Project object belongs to the
/// project it is), the event journal and apply's batches. A custom
/// role's rules name these (or `*`, all of them); cluster-wide resources
/// (hosts, tokens, Sources, Webhooks, Roles, …) stay the admin's.
///
/// Read from the registry (a project-scoped kind added to it is
/// nameable with no line here): `projects`, each project-scoped kind's
/// plural, then [`JOURNAL_AND_BATCHES`].
pub fn project_resources() -> Vec<&'static str> {
    std::iter::once(super::Kind::Project.plural())
        .chain(
            super::Kind::ALL
                .into_iter()
                .filter(|k| k.is_project_scoped())
                .map(super::Kind::plural),
        )
        .chain(JOURNAL_AND_BATCHES.iter().copied())
        .collect()
}

/// The resources a permission names in a project beyond its kinds.
pub const JOURNAL_AND_BATCHES: &[&str] = &["events", "manifests"];

/// Whether a permission may name `resource` in a project.
pub fn is_project_resource(resource: &str) -> bool {
    resource == super::Kind::Project.plural()
        || JOURNAL_AND_BATCHES.contains(&resource)
        || super::Kind::ALL
            .into_iter()
            .any(|k| k.is_project_scoped() && k.plural() == resource)
}

/// The built-in roles' names: a Role may not take one.
pub const BUILT_IN_ROLES: &[&str] = &["admin", "operator", "viewer", "worker", "metrics"];

/// Any verb, any kind.
pub const ANY: &str = "*";

/// Desired state of a Role.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleSpec {
    /// What a token bound to the role may do: the union of its rules.
    pub rules: Vec<RoleRule>,
}

/// One rule: these verbs on these kinds in these projects.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RoleRule {
    /// `get`, `list`, `watch`, `create`, `update`, `delete`, `attach`,
    /// `signal`, `sync`, `trigger`, or `*`.
    pub verbs: Vec<String>,
    /// Plural resource names (`runs`, `tasks`, `projects`, `secrets`,
    /// `schedules`, `events`, `manifests`), or `*`.
    pub kinds: Vec<String>,
    /// The projects, by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<Name>,
    /// The projects whose labels match (an empty `matchLabels`: every
    /// project), resolved when a request is authorized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_selector: Option<ProjectSelector>,
}

/// Projects by their labels.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectSelector {
    /// Every label here, with this value.
    #[serde(default)]
    pub match_labels: Labels,
}

impl ProjectSelector {
    /// Whether a project with `labels` matches.
    pub fn matches<'a>(&self, mut label: impl FnMut(&str) -> Option<&'a str>) -> bool {
        self.match_labels
            .iter()
            .all(|(k, v)| label(k.as_str()) == Some(v.as_str()))
    }
}

impl RoleRule {
    /// Whether the rule names `verb` (or `*`).
    pub fn has_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| v == verb || v == ANY)
    }

    /// Whether the rule names `resource` (or `*`).
    pub fn has_kind(&self, resource: &str) -> bool {
        self.kinds.iter().any(|k| k == resource || k == ANY)
    }
}

impl RoleSpec {
    /// Per-document rules typing cannot express: `(field path, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        if self.rules.is_empty() {
            out.push((
                "spec.rules".to_string(),
                "empty, expected at least one rule of verbs, kinds and projects".to_string(),
            ));
        }
        for (i, r) in self.rules.iter().enumerate() {
            let at = format!("spec.rules[{i}]");
            if r.verbs.is_empty() {
                out.push((
                    format!("{at}.verbs"),
                    format!("empty, expected some of {}, or *", VERBS.join(", ")),
                ));
            }
            for (j, v) in r.verbs.iter().enumerate() {
                if v != ANY && !VERBS.contains(&v.as_str()) {
                    out.push((
                        format!("{at}.verbs[{j}]"),
                        format!(
                            "{v:?} is not a verb, expected one of {}, or *",
                            VERBS.join(", ")
                        ),
                    ));
                }
            }
            if r.kinds.is_empty() {
                out.push((
                    format!("{at}.kinds"),
                    format!(
                        "empty, expected some of {}, or *",
                        project_resources().join(", ")
                    ),
                ));
            }
            for (j, k) in r.kinds.iter().enumerate() {
                if k != ANY && !is_project_resource(k) {
                    out.push((
                        format!("{at}.kinds[{j}]"),
                        format!(
                            "{k:?} is not a resource a Role grants, expected one of {} (plural), or * (cluster-wide ones are the admin role's)",
                            project_resources().join(", ")
                        ),
                    ));
                }
            }
            if r.projects.is_empty() && r.project_selector.is_none() {
                out.push((
                    at.clone(),
                    "names no project, expected projects (names) or projectSelector (matchLabels; {} for every project)".to_string(),
                ));
            }
        }
        out
    }
}

/// Observed state of a Role.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedRole {
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A Role's name may not be a built-in role's: `(field path, message)`.
pub fn name_problem(name: &Name) -> Option<(String, String)> {
    BUILT_IN_ROLES.contains(&name.as_str()).then(|| {
        (
            "metadata.name".to_string(),
            format!(
                "{:?} is a built-in role, expected another name (built-in: {})",
                name.as_str(),
                BUILT_IN_ROLES.join(", ")
            ),
        )
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_project_resources_come_from_the_registry() {
        assert_eq!(
            super::project_resources(),
            [
                "projects",
                "secrets",
                "tasks",
                "runs",
                "schedules",
                "events",
                "manifests"
            ]
        );
        assert!(super::is_project_resource("runs"));
        assert!(!super::is_project_resource("hosts"));
        assert!(!super::is_project_resource("roles"));
    }

    use super::*;

    fn spec(rules: serde_json::Value) -> RoleSpec {
        serde_json::from_value(serde_json::json!({ "rules": rules })).unwrap()
    }

    #[test]
    fn problems_name_the_field() {
        let ok = spec(serde_json::json!([
            {"verbs": ["get", "list"], "kinds": ["runs", "tasks"], "projects": ["web"]},
            {"verbs": ["*"], "kinds": ["*"], "projectSelector": {"matchLabels": {"team": "a"}}},
        ]));
        assert!(ok.problems().is_empty(), "{:?}", ok.problems());
        let bad = spec(serde_json::json!([
            {"verbs": ["get", "frob"], "kinds": ["runs", "taks", "tokens"], "projects": ["web"]},
            {"verbs": [], "kinds": ["runs"]},
        ]));
        let fields: Vec<String> = bad.problems().into_iter().map(|p| p.0).collect();
        assert_eq!(
            fields,
            [
                "spec.rules[0].verbs[1]",
                "spec.rules[0].kinds[1]",
                "spec.rules[0].kinds[2]",
                "spec.rules[1].verbs",
                "spec.rules[1]"
            ]
        );
        assert!(spec(serde_json::json!([])).problems()[0].0 == "spec.rules");
        assert!(name_problem(&Name::parse("viewer").unwrap()).is_some());
        assert!(name_problem(&Name::parse("reader").unwrap()).is_none());
    }

    #[test]
    fn selector_matches_labels() {
        let s: ProjectSelector =
            serde_json::from_value(serde_json::json!({"matchLabels": {"team": "a"}})).unwrap();
        assert!(s.matches(|k| (k == "team").then_some("a")));
        assert!(!s.matches(|k| (k == "team").then_some("b")));
        assert!(!s.matches(|_| None));
        assert!(ProjectSelector::default().matches(|_| None));
    }
}
