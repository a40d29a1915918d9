//! API tokens: [`ApiToken`] rows (fingerprints only) and the [`TokenTx`]
//! calls.

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::StoreResult;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    Operator,
    Worker,
}

/// What a token may do: `admin` everything, `operator` read
/// and change its projects, `viewer` read its projects, `worker` the
/// worker endpoints for its host, `metrics` only `/metrics`; or what a
/// custom `Role` object's rules allow ([`Role::Custom`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Role {
    Admin,
    Operator,
    Viewer,
    Worker,
    Metrics,
    /// Bound to the `Role` object of this name. The store gives it
    /// without rules (the column holds the name only); pamd resolves them
    /// from the object when it authenticates the token.
    Custom(Arc<CustomRole>),
}

/// A custom role: its name and its rules as resolved (no rules: no
/// rights, e.g. while the Role object is missing).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CustomRole {
    pub name: String,
    pub rules: Vec<Permission>,
}

/// One resolved rule of a custom role: these verbs on these resources in
/// these projects (`*` in verbs or resources: any).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Permission {
    pub verbs: Vec<String>,
    pub resources: Vec<String>,
    /// Project slugs: named ones and those a selector matched.
    pub projects: Vec<String>,
}

impl Permission {
    /// Whether it allows `verb` on `resource` (in `project`; `None`: in
    /// some project).
    pub fn allows(&self, verb: &str, resource: &str, project: Option<&str>) -> bool {
        let any = |v: &[String], x: &str| v.iter().any(|s| s == x || s == "*");
        any(&self.verbs, verb)
            && any(&self.resources, resource)
            && project.map_or(!self.projects.is_empty(), |p| {
                self.projects.iter().any(|q| q == p)
            })
    }
}

impl Role {
    pub const ALL: [Role; 5] = [
        Role::Admin,
        Role::Operator,
        Role::Viewer,
        Role::Worker,
        Role::Metrics,
    ];

    /// Its name: a built-in one or the custom Role's.
    pub fn as_str(&self) -> &str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
            Role::Viewer => "viewer",
            Role::Worker => "worker",
            Role::Metrics => "metrics",
            Role::Custom(c) => &c.name,
        }
    }

    /// A built-in role by name.
    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// The role a token's `role` column names: a built-in one, else the
    /// custom Role of that name (its rules not resolved yet).
    pub fn named(s: &str) -> Role {
        Role::parse(s).unwrap_or_else(|| {
            Role::Custom(Arc::new(CustomRole {
                name: s.to_string(),
                rules: Vec::new(),
            }))
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiToken {
    pub id: Uuid,
    pub name: String,
    pub kind: TokenKind,
    /// SHA-256 hex of the token; the token itself is never stored.
    pub fingerprint: String,
    /// Worker tokens: the host they may act for.
    pub host_name: Option<String>,
    /// `Worker` exactly for worker tokens.
    pub role: Role,
    /// The projects (slugs) an operator or viewer token may act in; empty
    /// (every project) only for admin and worker tokens.
    pub projects: Vec<String>,
    pub created_at: DateTime<Utc>,
    pub last_used_at: Option<DateTime<Utc>>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// API tokens (`api_tokens`). Part of every [`crate::Tx`].
#[async_trait]
pub trait TokenTx: Send {
    async fn insert_token(&mut self, t: &ApiToken) -> StoreResult<()>;
    /// A token by fingerprint, revoked or not.
    async fn get_token_by_fingerprint(&mut self, fp: &str) -> StoreResult<Option<ApiToken>>;
    /// Those of `ids` that are revoked or do not exist, in one statement
    /// (the re-check of the tokens open streams hold: nearly
    /// always none, so a fleet's 10,000 held tokens cost one statement
    /// that returns no rows, not 10,000 rows a second).
    async fn dead_tokens(&mut self, ids: &[Uuid]) -> StoreResult<Vec<Uuid>>;
    /// All tokens ordered by created_at.
    async fn list_tokens(&mut self) -> StoreResult<Vec<ApiToken>>;
    /// Sets revoked_at on a live token; returns whether one was revoked.
    async fn revoke_token(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<bool>;
    /// For each `(id, at)` of `uses`: sets last_used_at = `at` unless it is
    /// already at or after `at - window`; returns how many were written.
    /// The guard makes a burst of requests write once; one statement
    /// writes every token's (10,000 workers' tokens).
    async fn touch_tokens(
        &mut self,
        uses: &[(Uuid, DateTime<Utc>)],
        window: chrono::Duration,
    ) -> StoreResult<u64>;
}
