//! `token create|list|revoke`.

use chrono::{DateTime, Utc};
use clap::Subcommand;
use serde_json::{json, Value};

use crate::client::enc;
use crate::error::{CliError, Exit, Result};
use crate::render::age;
use crate::render::table::{cell, Table};
use crate::{term, Ctx};

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create an operator token NAME, or a worker token with --worker HOST; prints it once.
    /// An operator or viewer token acts only in the projects of -p/--project (a comma list:
    /// --project web,api)
    Create {
        #[arg(required_unless_present = "worker", conflicts_with = "worker")]
        name: Option<String>,
        /// Create a worker token for this host
        #[arg(long, value_name = "HOST")]
        worker: Option<String>,
        /// admin (everything, the default), operator (read and change its projects) or
        /// viewer (read its projects); metrics (only scrape /metrics); or the name of a Role
        /// (a custom role: what its rules allow, in the projects they name; pamctl get roles)
        #[arg(long, conflicts_with = "worker")]
        role: Option<String>,
    },
    /// List tokens (never their values)
    List,
    /// Revoke a token by id
    Revoke { id: String },
}

#[derive(Debug, Subcommand)]
pub enum AuthCommand {
    /// Whether the token may do VERB to KIND (in -p P): prints yes or no, exits 0 or 1
    CanI {
        /// get, list, watch, create, update, delete, attach, signal, sync, trigger
        verb: String,
        /// A kind (runs, run, rn …) or events, manifests, tokens, secretkeys,
        /// webhookdeliveries
        kind: String,
    },
}

pub(crate) fn token(ctx: &mut Ctx, cmd: TokenCommand) -> Result<Exit> {
    let client = ctx.client()?;
    match cmd {
        TokenCommand::Create { name, worker, role } => {
            // Only a --project given here scopes the token, never the
            // context's default project.
            let projects: Vec<&str> = ctx
                .explicit_project()
                .map(|p| {
                    p.split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .collect()
                })
                .unwrap_or_default();
            let body = match (name, worker) {
                (_, Some(host)) => json!({ "worker": host }),
                (Some(name), None) => {
                    // Only what was given: an older pamd refuses unknown
                    // fields.
                    let mut b = json!({ "name": name });
                    if !projects.is_empty() {
                        b["projects"] = json!(projects);
                    }
                    if let Some(role) = role {
                        b["role"] = json!(role);
                    }
                    b
                }
                (None, None) => return Err(CliError::usage("pass NAME or --worker HOST")),
            };
            let answer = client.post("/api/v1/tokens", &body)?;
            let token = answer
                .get("token")
                .and_then(Value::as_str)
                .ok_or_else(|| CliError::new(Exit::ServerError, "the answer has no `token`"))?;
            term::outln(token);
            term::note(&format!(
                "{} created; it is not shown again, store it now",
                created_line(&answer)
            ));
        }
        TokenCommand::List => {
            let answer = client.get("/api/v1/tokens")?;
            let items = answer
                .get("items")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if items.is_empty() {
                term::note("No tokens.");
            } else {
                term::out(&list_table(&items, Utc::now()));
            }
        }
        TokenCommand::Revoke { id } => {
            client.delete(&format!("/api/v1/tokens/{}", enc(&id)))?;
            term::outln(&format!("token {id} revoked"));
        }
    }
    Ok(Exit::Ok)
}

/// `whoami`: the token's name, role and projects.
pub(crate) fn whoami(ctx: &mut Ctx) -> Result<Exit> {
    let v = ctx.client()?.get("/api/v1/whoami")?;
    term::outln(&format!("name:     {}", cell(&v, "/name")));
    term::outln(&format!("role:     {}", cell(&v, "/role")));
    term::outln(&format!("projects: {}", projects(&v)));
    // A custom role's rules, as pamd resolved them for this request.
    if let Some(rules) = v.get("rules").and_then(Value::as_array) {
        term::outln("rules:");
        let list = |r: &Value, k: &str| {
            let items: Vec<&str> = r
                .get(k)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if items.is_empty() {
                "<none>".to_string()
            } else {
                items.join(",")
            }
        };
        if rules.is_empty() {
            term::outln("  <none> (no Role of this name: no rights)");
        }
        for r in rules {
            term::outln(&format!(
                "  {} {} in {}",
                list(r, "verbs"),
                list(r, "kinds"),
                list(r, "projects")
            ));
        }
    }
    Ok(Exit::Ok)
}

/// `auth can-i VERB KIND [-p P]`: `yes` (exit 0) or `no` (exit 1), as the
/// server's one authorization decides (kubectl's habit).
pub(crate) fn can_i(ctx: &mut Ctx, verb: &str, kind: &str) -> Result<Exit> {
    // A kind by any of its names; the other resources by theirs.
    let resource = pam_manifests::Kind::parse_alias(kind)
        .map(|k| k.plural().to_string())
        .unwrap_or_else(|| kind.to_string());
    let mut path = format!(
        "/api/v1/auth/can-i?verb={}&resource={}",
        enc(verb),
        enc(&resource)
    );
    if let Some(p) = ctx.explicit_project() {
        path.push_str(&format!("&project={}", enc(p)));
    }
    let v = ctx.client()?.get(&path)?;
    if v.get("allowed").and_then(Value::as_bool) == Some(true) {
        term::outln("yes");
        Ok(Exit::Ok)
    } else {
        term::outln("no");
        Ok(Exit::Failed)
    }
}

/// A token's projects as a comma list; `*` for every project (an admin).
fn projects(o: &Value) -> String {
    let ps: Vec<&str> = o
        .get("projects")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    match (ps.is_empty(), cell(o, "/role").as_str()) {
        (true, "admin") => "*".into(),
        (true, _) => "<none>".into(),
        _ => ps.join(","),
    }
}

fn list_table(items: &[Value], now: DateTime<Utc>) -> String {
    let ago = |o: &Value, k: &str| match o.get(k).and_then(Value::as_str) {
        Some(t) => age::since(Some(t), now),
        None => "<never>".to_string(),
    };
    let mut t = Table::new(&[
        "ID",
        "NAME",
        "KIND",
        "ROLE",
        "PROJECTS",
        "HOST",
        "AGE",
        "LAST-USED",
        "REVOKED",
    ]);
    for o in items {
        let revoked = match o.get("revokedAt").and_then(Value::as_str) {
            Some(r) => format!("{} ago", age::since(Some(r), now)),
            None => "no".into(),
        };
        t.row(vec![
            cell(o, "/id"),
            cell(o, "/name"),
            cell(o, "/kind"),
            cell(o, "/role"),
            projects(o),
            cell(o, "/host"),
            ago(o, "createdAt"),
            ago(o, "lastUsedAt"),
            revoked,
        ]);
    }
    t.render()
}

/// What a created token is, as `token create` says it: a worker token
/// and its host, or an operator token by its role and projects
/// (`viewer token ci for projects web, api (id …)`).
fn created_line(answer: &Value) -> String {
    let name = cell(answer, "/name");
    let id = cell(answer, "/id");
    if answer.get("kind").and_then(Value::as_str) == Some("worker") {
        return format!(
            "worker token {name} for host {} (id {id})",
            cell(answer, "/host")
        );
    }
    let role = answer
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("operator");
    let projects: Vec<&str> = answer
        .get("projects")
        .and_then(Value::as_array)
        .map(|p| p.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let scope = if projects.is_empty() {
        "every project".to_string()
    } else {
        format!("projects {}", projects.join(", "))
    };
    format!("{role} token {name} for {scope} (id {id})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_table() {
        let items = vec![
            json!({"id": "t-1", "name": "ci", "kind": "operator", "host": null, "role": "viewer", "projects": ["web", "api"],
                   "createdAt": "2026-02-28T12:00:00Z", "lastUsedAt": "2026-03-01T11:58:00Z", "revokedAt": null}),
            json!({"id": "t-2", "name": "worker-alpha", "kind": "worker", "host": "alpha", "role": "worker", "projects": [],
                   "createdAt": "2026-02-01T12:00:00Z", "lastUsedAt": null, "revokedAt": "2026-03-01T10:00:00Z"}),
        ];
        insta::assert_snapshot!(list_table(&items, crate::render::samples::now()), @r"
        ID    NAME           KIND       ROLE     PROJECTS   HOST     AGE   LAST-USED   REVOKED
        t-1   ci             operator   viewer   web,api    <none>   24h   2m          no
        t-2   worker-alpha   worker     worker   <none>     alpha    28d   <never>     120m ago
        ");
    }

    #[test]
    fn a_created_token_is_said_by_its_role_and_projects() {
        let viewer = json!({"id": "t-1", "name": "ci", "kind": "operator", "role": "viewer", "projects": ["web", "api"]});
        assert_eq!(
            created_line(&viewer),
            "viewer token ci for projects web, api (id t-1)"
        );
        let admin = json!({"id": "t-2", "name": "root", "kind": "operator", "role": "admin", "projects": []});
        assert_eq!(
            created_line(&admin),
            "admin token root for every project (id t-2)"
        );
        let worker = json!({"id": "t-3", "name": "worker-alpha", "kind": "worker", "host": "alpha", "role": "worker"});
        assert_eq!(
            created_line(&worker),
            "worker token worker-alpha for host alpha (id t-3)"
        );
    }
}
