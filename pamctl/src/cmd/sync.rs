//! `pamctl sync NAME`: sync a GitOps Source now and wait for the result —
//! the loop clears the request when its sync is written; exit 1 when that
//! sync Failed, with the message (file:line and field).

use std::time::{Duration, Instant};

use pam_manifests::kinds::SyncState;
use pam_manifests::Kind;
use serde_json::{json, Value};

use crate::error::{CliError, Exit, Result};
use crate::render::table::short_rev;
use crate::{duration, object_path, term, Ctx};

fn text<'a>(o: &'a Value, pointer: &str) -> &'a str {
    o.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

pub(crate) fn sync(ctx: &mut Ctx, name: &str, timeout: &str) -> Result<Exit> {
    let timeout = duration::parse(timeout)?;
    let client = ctx.client()?;
    let path = object_path(Kind::Source, None, name);
    client.post(&format!("{path}/sync"), &json!({}))?;
    let started = Instant::now();
    // Polled through the listing: it carries the status without each owned
    // object's state (a get of one reads the whole inventory for those).
    let list = crate::collection_path(Kind::Source, None);
    loop {
        let listed = client.get(&list)?;
        let Some(o) = listed
            .get("items")
            .and_then(Value::as_array)
            .and_then(|items| items.iter().find(|o| text(o, "/metadata/name") == name))
            .cloned()
        else {
            return Err(CliError::failed(format!(
                "source.pam.dev/{name} was deleted while syncing"
            )));
        };
        // The loop clears the request in the status write of its sync.
        if o.pointer("/status/syncRequestedAt").is_none() {
            let sync = SyncState::parse(text(&o, "/status/sync")).unwrap_or_default();
            let revision = text(&o, "/status/revision");
            let short = short_rev(revision);
            if sync == SyncState::Failed {
                return Err(CliError::failed(format!(
                    "source.pam.dev/{name} sync failed: {}",
                    text(&o, "/status/syncMessage")
                ))
                .hint(format!("pamctl describe source {name}")));
            }
            let health = text(&o, "/status/health");
            let mut line = format!("source.pam.dev/{name} {sync} at {short} ({health})");
            if sync == SyncState::OutOfSync {
                line.push_str(&format!(": {}", text(&o, "/status/syncMessage")));
            }
            term::outln(&line);
            return Ok(if sync == SyncState::OutOfSync {
                Exit::Failed
            } else {
                Exit::Ok
            });
        }
        if started.elapsed() >= timeout {
            return Err(CliError::failed(format!(
                "source.pam.dev/{name}: no sync within {}",
                duration::format(timeout)
            ))
            .hint(
                "is the Source suspended, or pamd's sync loop stuck? see `pamctl describe source`",
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `pamctl diff source NAME [--revision REF]`: what a sync of
/// the Source (at REF) would change — pamd runs the sync's own code and
/// rolls it back. Exit 0 when nothing would change, 1 when something
/// would, like `pamctl diff`.
pub(crate) fn diff_source(ctx: &mut Ctx, name: &str, revision: Option<&str>) -> Result<Exit> {
    let client = ctx.client()?;
    let mut path = format!("{}/diff", object_path(Kind::Source, None, name));
    if let Some(r) = revision {
        path.push_str(&format!("?revision={}", crate::client::enc(r)));
    }
    let answer = client.get(&path)?;
    let changes = answer
        .get("changes")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let short = short_rev(text(&answer, "/revision"));
    let mut out = String::new();
    for c in &changes {
        let kind = text(c, "/kind").to_lowercase();
        let name = match c.get("project").and_then(Value::as_str) {
            Some(p) => format!("{p}/{}", text(c, "/name")),
            None => text(c, "/name").to_string(),
        };
        out.push_str(&format!("{kind}.pam.dev/{name} {}", text(c, "/action")));
        if let Some(m) = c.get("message").and_then(Value::as_str) {
            out.push_str(&format!(" ({m})"));
        }
        out.push('\n');
    }
    if changes.is_empty() {
        term::out(&format!("source.pam.dev/{name} at {short}: no changes\n"));
        return Ok(Exit::Ok);
    }
    term::out(&format!(
        "source.pam.dev/{name} at {short} would change:\n{out}"
    ));
    Ok(Exit::Failed)
}
