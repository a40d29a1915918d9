//! `version` and `api-resources`: what this pamctl is and knows.

use pam_manifests::Kind;
use serde_json::{json, Value};

use crate::error::{CliError, Exit, Result};
use crate::render::{self, table::Table};
use crate::{term, Ctx};

pub const CLIENT_VERSION: &str = env!("CARGO_PKG_VERSION");

/// `pamctl version [--client] [-o json|yaml]`. The server's version is
/// `GET /api/v1/version` (no token needed); when it cannot be read the
/// client version is still printed, then the error.
pub(crate) fn version(ctx: &mut Ctx, client_only: bool, output: Option<&str>) -> Result<Exit> {
    let client = json!({ "version": CLIENT_VERSION, "apiVersion": render::API_VERSION });
    let server = if client_only {
        None
    } else {
        Some(ctx.client().and_then(|c| c.get("/api/v1/version")))
    };
    let (server, error) = match server {
        None => (None, None),
        Some(Ok(v)) => (Some(v), None),
        Some(Err(e)) => (None, Some(e)),
    };
    match output {
        Some(format) => {
            let mut doc = json!({ "clientVersion": client });
            if let Some(s) = &server {
                doc["serverVersion"] = s.clone();
            }
            term::out(&if format == "yaml" {
                render::to_yaml(&doc)
            } else {
                render::to_json(&doc)
            });
        }
        None => {
            term::outln(&format!("Client Version: {CLIENT_VERSION}"));
            if let Some(s) = &server {
                term::outln(&server_line(s));
            }
        }
    }
    match error {
        Some(e) => Err(e),
        None => Ok(Exit::Ok),
    }
}

fn server_line(s: &Value) -> String {
    let field = |k: &str| match s.get(k) {
        Some(Value::String(v)) => v.clone(),
        Some(Value::Null) | None => "unknown".into(),
        Some(other) => other.to_string(),
    };
    format!(
        "Server Version: {} (API {}, schema {})",
        field("version"),
        field("apiVersion"),
        field("schemaVersion")
    )
}

/// `pamctl api-resources`: every kind, kubectl's columns. NAMESPACED means
/// project-scoped (addressed with `-p`).
pub(crate) fn api_resources(output: Option<&str>, no_headers: bool) -> Result<Exit> {
    if output == Some("name") {
        let mut names: Vec<&str> = Kind::ALL.iter().map(|k| k.plural()).collect();
        names.push(crate::cmd::webhooks::NAMES[0]);
        names.push(crate::cmd::events::NAMES[0]);
        names.sort();
        term::out(&names.iter().map(|n| format!("{n}\n")).collect::<String>());
        return Ok(Exit::Ok);
    }
    if let Some(o) = output.filter(|o| *o != "wide") {
        return Err(CliError::usage(format!("-o {o}: expected wide or name")));
    }
    term::out(&resources_table().render_rows(!no_headers));
    Ok(Exit::Ok)
}

fn resources_table() -> Table {
    let mut t = Table::new(&["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]);
    let mut kinds = Kind::ALL.to_vec();
    kinds.sort_by_key(|k| k.plural());
    let mut rows: Vec<Vec<String>> = kinds
        .into_iter()
        .map(|k| {
            vec![
                k.plural().into(),
                k.short().into(),
                render::API_VERSION.into(),
                k.is_project_scoped().to_string(),
                k.as_str().into(),
            ]
        })
        .collect();
    // Not a kind one applies, but a resource `get` lists.
    let names = crate::cmd::webhooks::NAMES;
    rows.push(vec![
        names[0].into(),
        names[3].into(),
        render::API_VERSION.into(),
        "false".into(),
        "WebhookDelivery".into(),
    ]);
    // The journal, which `get events` lists; -p filters it.
    let events = crate::cmd::events::NAMES;
    rows.push(vec![
        events[0].into(),
        events[2].into(),
        render::API_VERSION.into(),
        "false".into(),
        "Event".into(),
    ]);
    rows.sort();
    for r in rows {
        t.row(r);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resources_table() {
        insta::assert_snapshot!(resources_table().render(), @r"
        NAME                SHORTNAMES   APIVERSION   NAMESPACED   KIND
        events              ev           pam.dev/v1   false        Event
        hosts               ho           pam.dev/v1   false        Host
        projects            proj         pam.dev/v1   false        Project
        roles               ro           pam.dev/v1   false        Role
        runs                rn           pam.dev/v1   true         Run
        schedules           sch          pam.dev/v1   true         Schedule
        secrets             sec          pam.dev/v1   true         Secret
        sources             src          pam.dev/v1   false        Source
        tasks               tk           pam.dev/v1   true         Task
        webhookdeliveries   whd          pam.dev/v1   false        WebhookDelivery
        webhooks            wh           pam.dev/v1   false        Webhook
        ");
    }

    #[test]
    fn the_server_line() {
        let s = json!({"name": "pamd", "version": "0.1.0", "apiVersion": "pam.dev/v1", "schemaVersion": 12});
        assert_eq!(
            server_line(&s),
            "Server Version: 0.1.0 (API pam.dev/v1, schema 12)"
        );
    }
}
