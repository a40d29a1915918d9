//! Webhook deliveries: `pamctl get webhookdeliveries [WEBHOOK]`
//! (the newest first: status, attempts, last response code) and
//! `pamctl webhook redeliver ID` (the same delivery — id and body — is sent
//! again now).

use chrono::Utc;
use serde_json::Value;

use crate::cli::{GetArgs, WebhookCommand};
use crate::client::{enc, query};
use crate::error::{CliError, Exit, Result};
use crate::render::table::{cell, Table};
use crate::render::{self, age, Output};
use crate::{term, Ctx};

/// What `get` takes for the deliveries listing.
pub(crate) const NAMES: [&str; 4] = [
    "webhookdeliveries",
    "webhookdelivery",
    "webhook-deliveries",
    "whd",
];

/// `pamctl get webhookdeliveries [WEBHOOK] [-o …]`.
pub(crate) fn get(ctx: &mut Ctx, a: &GetArgs) -> Result<Exit> {
    let webhook = match a.args.as_slice() {
        [_] => None,
        [_, name] => Some(name.as_str()),
        _ => {
            return Err(CliError::usage(
                "pamctl get webhookdeliveries [WEBHOOK]: at most one webhook name",
            ))
        }
    };
    if a.selector.is_some() || a.watch || a.all_projects {
        return Err(CliError::usage(
            "webhook deliveries take no -l, -w or -A (pamctl get webhookdeliveries [WEBHOOK])",
        ));
    }
    let client = ctx.client()?;
    let path = format!(
        "/api/v1/webhookdeliveries{}",
        query(&[("webhook", webhook), ("limit", Some("1000"))])
    );
    let answer = client.get(&path)?;
    let items: Vec<Value> = answer
        .get("items")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    match &a.output {
        Output::Json => term::out(&render::to_json(&answer)),
        Output::Yaml => term::out(&render::to_yaml(&answer)),
        Output::Name => {
            for d in &items {
                term::outln(&format!("webhookdelivery/{}", cell(d, "/id")));
            }
        }
        Output::Table | Output::Wide => {
            let t = table(&items, a.output == Output::Wide);
            term::out(&t.render_rows(!a.no_headers));
        }
        _ => {
            return Err(CliError::usage(
                "webhook deliveries print as table, wide, yaml, json or name",
            ))
        }
    }
    Ok(Exit::Ok)
}

fn table(items: &[Value], wide: bool) -> Table {
    let now = Utc::now();
    let mut headers = vec![
        "ID",
        "WEBHOOK",
        "SEQ",
        "TOPIC",
        "STATUS",
        "ATTEMPTS",
        "LAST-CODE",
        "AGE",
    ];
    if wide {
        headers.extend(["NEXT-ATTEMPT", "LAST-ERROR"]);
    }
    let mut t = Table::new(&headers);
    for d in items {
        let code = match d.get("lastCode").and_then(Value::as_i64) {
            Some(c) => c.to_string(),
            None => "<none>".into(),
        };
        let mut row = vec![
            cell(d, "/id"),
            cell(d, "/webhook"),
            cell(d, "/seq"),
            cell(d, "/topic"),
            cell(d, "/status"),
            cell(d, "/attempts"),
            code,
            age::since(d.get("createdAt").and_then(Value::as_str), now),
        ];
        if wide {
            let next = d
                .get("nextAttemptAt")
                .and_then(Value::as_str)
                .map_or_else(String::new, |s| s.to_string());
            row.extend([next, cell(d, "/lastError")]);
        }
        t.row(row);
    }
    t
}

pub(crate) fn webhook(ctx: &mut Ctx, cmd: WebhookCommand) -> Result<Exit> {
    let client = ctx.client()?;
    match cmd {
        WebhookCommand::Redeliver { id } => {
            let d = client.post(
                &format!("/api/v1/webhookdeliveries/{}/redeliver", enc(&id)),
                &serde_json::json!({}),
            )?;
            term::outln(&format!(
                "webhookdelivery/{} queued again (webhook {}, seq {})",
                cell(&d, "/id"),
                cell(&d, "/webhook"),
                cell(&d, "/seq")
            ));
        }
    }
    Ok(Exit::Ok)
}
