//! Who may do what: the one decision, [`authorize`], that the
//! route table's permissions ([`crate::api::routes::route::Access`]), apply's
//! batches, the lists' filters and the event stream all ask.
//!
//! A token has a [`Role`] and, unless it is an admin, the projects it may
//! act in. The answer for something in a project the token may not see is
//! [`Decision::Hidden`] (the API answers it like a missing object: names
//! of other projects do not leak); a verb its role lacks on a project it
//! sees is [`Decision::Forbidden`].

pub use pam_store::Role;

/// What a request does (kubectl's verbs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    Get,
    List,
    Watch,
    Create,
    Update,
    Delete,
    Attach,
    Signal,
    Sync,
    Trigger,
}

impl Verb {
    pub const ALL: [Verb; 10] = [
        Verb::Get,
        Verb::List,
        Verb::Watch,
        Verb::Create,
        Verb::Update,
        Verb::Delete,
        Verb::Attach,
        Verb::Signal,
        Verb::Sync,
        Verb::Trigger,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Delete => "delete",
            Verb::Attach => "attach",
            Verb::Signal => "signal",
            Verb::Sync => "sync",
            Verb::Trigger => "trigger",
        }
    }

    pub fn parse(s: &str) -> Option<Verb> {
        Verb::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// get, list and watch: what a viewer may do.
    pub fn reads(self) -> bool {
        matches!(self, Verb::Get | Verb::List | Verb::Watch)
    }
}

/// The resources a permission names in a project: the project-scoped
/// kinds, the projects themselves (a Project object belongs to the project
/// it is), the event journal and apply's batches — what a custom Role's
/// rules may name (`pam_manifests::kinds::role`).
pub use pam_manifests::kinds::role::{is_project_resource, project_resources};

/// Cluster-wide resources only an admin may touch (hosts are read by
/// every role: scheduling is not understood without them), beside every
/// cluster-scoped kind but projects ([`admin_only`]).
pub const ADMIN_RESOURCES: &[&str] = &[
    "hosts",
    "tokens",
    "secretkeys",
    "sources",
    "webhooks",
    "webhookdeliveries",
    // `/metrics` when `[metrics] require_token`.
    "metrics",
];

/// The caller's own token (`whoami`, `auth can-i`): every operator-side
/// token may ask about itself.
pub const SELF: &str = "self";

/// Whether only an admin may touch `resource` (hosts' reads aside): the
/// cluster-wide resources and every cluster-scoped kind but projects — a
/// kind added to the registry needs no line here.
pub fn admin_only(resource: &str) -> bool {
    ADMIN_RESOURCES.contains(&resource)
        || pam_manifests::Kind::ALL
            .iter()
            .any(|k| !k.is_project_scoped() && k.plural() == resource && resource != "projects")
}

/// Whether a route may name `resource` (a test walks the route table).
pub fn known(resource: &str) -> bool {
    resource == SELF || is_project_resource(resource) || admin_only(resource)
}

/// A token's authority: its role and projects (empty: every project, for
/// an admin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub role: Role,
    pub projects: Vec<String>,
    /// Of `projects`, those only read in (an OIDC session whose groups map
    /// to operator in some projects and viewer in others: the union,
    /// [`crate::api::access::oidc`]); empty for every token.
    pub read_only: Vec<String>,
}

impl Grant {
    /// Whether the token sees `project` at all.
    /// (A custom role's projects are those any of its rules names.)
    pub fn sees(&self, project: &str) -> bool {
        match self.role {
            Role::Admin => true,
            Role::Worker | Role::Metrics => false,
            Role::Operator | Role::Viewer | Role::Custom(_) => {
                self.projects.iter().any(|p| p == project)
            }
        }
    }

    /// The projects lists are filtered to; None: every project.
    pub fn scope(&self) -> Option<&[String]> {
        (self.role != Role::Admin).then_some(self.projects.as_slice())
    }

    /// The projects a list of `resource` (by any of `verbs`) is filtered
    /// to; None: every project. For a built-in role, [`Grant::scope`]; for
    /// a custom one, the projects of the rules giving one of the verbs on
    /// the resource — a rule about tasks in a project does not show its
    /// runs or events.
    pub fn scope_for(&self, verbs: &[Verb], resource: &str) -> Option<Vec<String>> {
        let Role::Custom(c) = &self.role else {
            return self.scope().map(<[String]>::to_vec);
        };
        let mut out: Vec<String> = c
            .rules
            .iter()
            .filter(|r| verbs.iter().any(|v| r.allows(v.as_str(), resource, None)))
            .flat_map(|r| r.projects.iter().cloned())
            .collect();
        out.sort();
        out.dedup();
        Some(out)
    }

    fn may(&self, verb: Verb, resource: &str, project: Option<&str>) -> bool {
        match &self.role {
            Role::Admin | Role::Operator => true,
            Role::Viewer => verb.reads(),
            Role::Worker | Role::Metrics => false,
            // One of its rules gives the verb on the resource (in the
            // project; without one, in some project: the caller filters).
            Role::Custom(c) => c
                .rules
                .iter()
                .any(|r| r.allows(verb.as_str(), resource, project)),
        }
    }
}

/// [`authorize`]'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// The role lacks the verb (403).
    Forbidden,
    /// The project is not the token's: answered as if it did not exist
    /// (404, or left out of a list).
    Hidden,
}

/// The one decision: may `grant` do `verb` to `resource` (in `project`,
/// where the request names one)? Without a project (a list of every
/// project, the event stream, a batch) the verb is checked here and the
/// caller filters or checks each project.
pub fn authorize(grant: &Grant, verb: Verb, resource: &str, project: Option<&str>) -> Decision {
    if grant.role == Role::Worker {
        return Decision::Forbidden;
    }
    if resource == SELF || grant.role == Role::Admin {
        return Decision::Allow;
    }
    // A scraper's token: /metrics and nothing else.
    if grant.role == Role::Metrics {
        return if resource == "metrics" && verb == Verb::Get {
            Decision::Allow
        } else {
            Decision::Forbidden
        };
    }
    if admin_only(resource) {
        return if resource == "hosts" && verb.reads() {
            Decision::Allow
        } else {
            Decision::Forbidden
        };
    }
    if project.is_some_and(|p| !grant.sees(p)) {
        return Decision::Hidden;
    }
    if project.is_some_and(|p| grant.read_only.iter().any(|r| r == p)) && !verb.reads() {
        return Decision::Forbidden;
    }
    if grant.may(verb, resource, project) {
        Decision::Allow
    } else {
        Decision::Forbidden
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grant(role: Role, projects: &[&str]) -> Grant {
        Grant {
            role,
            projects: projects.iter().map(|p| p.to_string()).collect(),
            read_only: Vec::new(),
        }
    }

    #[test]
    fn roles_verbs_and_projects() {
        use Decision::*;
        let admin = grant(Role::Admin, &[]);
        let op = grant(Role::Operator, &["web"]);
        let viewer = grant(Role::Viewer, &["web"]);
        let worker = grant(Role::Worker, &[]);
        let metrics = grant(Role::Metrics, &[]);
        for v in Verb::ALL {
            assert_eq!(authorize(&admin, v, "runs", Some("api")), Allow);
            assert_eq!(authorize(&admin, v, "tokens", None), Allow);
            assert_eq!(authorize(&op, v, "runs", Some("web")), Allow);
            assert_eq!(authorize(&op, v, "runs", Some("api")), Hidden);
            assert_eq!(authorize(&viewer, v, "runs", Some("api")), Hidden);
            let read = if v.reads() { Allow } else { Forbidden };
            assert_eq!(authorize(&viewer, v, "runs", Some("web")), read);
            assert_eq!(authorize(&viewer, v, "hosts", None), read);
            assert_eq!(authorize(&op, v, "hosts", None), read);
            assert_eq!(authorize(&op, v, "tokens", None), Forbidden);
            assert_eq!(authorize(&viewer, v, "sources", None), Forbidden);
            assert_eq!(authorize(&worker, v, "runs", Some("web")), Forbidden);
            assert_eq!(authorize(&viewer, v, SELF, None), Allow);
            let scrape = if v == Verb::Get { Allow } else { Forbidden };
            assert_eq!(authorize(&metrics, v, "metrics", None), scrape);
            assert_eq!(authorize(&admin, v, "metrics", None), Allow);
            assert_eq!(authorize(&op, v, "metrics", None), Forbidden);
            assert_eq!(authorize(&metrics, v, "runs", Some("web")), Forbidden);
            assert_eq!(authorize(&metrics, v, "hosts", None), Forbidden);
            // A session's union: operator in web, viewer in docs.
            let mixed = Grant {
                read_only: vec!["docs".into()],
                ..grant(Role::Operator, &["web", "docs"])
            };
            assert_eq!(authorize(&mixed, v, "runs", Some("web")), Allow);
            assert_eq!(authorize(&mixed, v, "runs", Some("docs")), read);
            assert_eq!(authorize(&mixed, v, "runs", Some("api")), Hidden);
        }
    }

    /// A custom role: a verb one of its rules gives, on its
    /// resource, in its projects; 403 for another verb or resource in a
    /// project it sees, 404 for a project none names; lists filtered per
    /// resource; cluster-wide resources the admin's.
    #[test]
    fn a_custom_role_allows_what_its_rules_give() {
        use pam_store::{CustomRole, Permission};
        use Decision::*;
        let rule = |verbs: &[&str], resources: &[&str], projects: &[&str]| Permission {
            verbs: verbs.iter().map(|s| s.to_string()).collect(),
            resources: resources.iter().map(|s| s.to_string()).collect(),
            projects: projects.iter().map(|s| s.to_string()).collect(),
        };
        let custom = Grant {
            role: Role::Custom(std::sync::Arc::new(CustomRole {
                name: "run-reader".into(),
                rules: vec![
                    rule(&["get", "list"], &["runs"], &["web"]),
                    rule(&["*"], &["tasks"], &["docs"]),
                ],
            })),
            projects: vec!["docs".into(), "web".into()],
            read_only: Vec::new(),
        };
        for (verb, resource, project, decision) in [
            (Verb::Get, "runs", Some("web"), Allow),
            (Verb::List, "runs", None, Allow),
            (Verb::Delete, "runs", Some("web"), Forbidden),
            (Verb::Get, "tasks", Some("web"), Forbidden),
            (Verb::Get, "runs", Some("docs"), Forbidden),
            (Verb::Delete, "tasks", Some("docs"), Allow),
            (Verb::Get, "runs", Some("api"), Hidden),
            (Verb::Watch, "events", None, Forbidden),
            (Verb::Get, "roles", None, Forbidden),
            (Verb::Get, "tokens", None, Forbidden),
            (Verb::List, "hosts", None, Allow),
            (Verb::Get, SELF, None, Allow),
        ] {
            assert_eq!(
                authorize(&custom, verb, resource, project),
                decision,
                "{verb:?} {resource} in {project:?}"
            );
        }
        let runs = custom.scope_for(&[Verb::List], "runs");
        assert_eq!(runs, Some(vec!["web".to_string()]));
        let events = custom.scope_for(&[Verb::List, Verb::Watch], "events");
        assert_eq!(events, Some(Vec::new()));
        // A Role that is gone: no rules, no rights.
        let gone = Grant {
            role: Role::named("deleted"),
            projects: Vec::new(),
            read_only: Vec::new(),
        };
        for v in Verb::ALL {
            assert_eq!(authorize(&gone, v, "runs", Some("web")), Hidden);
            assert_eq!(authorize(&gone, v, "runs", None), Forbidden);
            assert_eq!(authorize(&gone, v, SELF, None), Allow);
        }
    }

    /// A Role's rules are checked against the verbs and resources this
    /// module decides on (`pam_manifests::kinds::role`).
    #[test]
    fn role_verbs_are_the_verbs() {
        let verbs: Vec<&str> = Verb::ALL.iter().map(|v| v.as_str()).collect();
        assert_eq!(verbs, pam_manifests::kinds::role::VERBS);
        for r in pam_manifests::kinds::role::BUILT_IN_ROLES {
            assert!(Role::parse(r).is_some(), "{r}");
        }
        assert_eq!(
            pam_manifests::kinds::role::BUILT_IN_ROLES.len(),
            Role::ALL.len()
        );
    }
}
