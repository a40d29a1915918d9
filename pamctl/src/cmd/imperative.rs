//! `task start|done|cancel|reopen` and `host disable|enable|clear-suspect`.

use pam_manifests::Kind;
use serde_json::{json, Value};

use crate::cli::{HostCommand, TaskCommand};
use crate::error::{CliError, Exit, Result};
use crate::{object_path, render, term, Ctx};

fn cascade_names(answer: &Value) -> Vec<String> {
    answer
        .get("cascade")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| {
            v.as_str().map(str::to_string).or_else(|| {
                v.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
        })
        .collect()
}

pub(crate) fn task(ctx: &mut Ctx, cmd: TaskCommand) -> Result<Exit> {
    let (name, to, yes) = match cmd {
        TaskCommand::Start { name } => (name, "doing", true),
        TaskCommand::Done { name } => (name, "done", true),
        TaskCommand::Cancel { name, yes } => (name, "cancelled", yes),
        TaskCommand::Reopen { name } => (name, "todo", true),
    };
    let project = ctx.project()?;
    let client = ctx.client()?;
    let path = format!(
        "{}/transition",
        object_path(Kind::Task, Some(&project), &name)
    );
    if to == "cancelled" {
        let preview = client.post(&path, &json!({"to": to, "dryRun": true}))?;
        let cascade = cascade_names(&preview);
        if !cascade.is_empty() && !yes {
            if !term::stdin_is_terminal() {
                return Err(CliError::usage(format!(
                    "cancelling {name:?} also cancels {} descendant(s): {}",
                    cascade.len(),
                    cascade.join(", ")
                ))
                .hint("pass --yes to confirm when stdin is not a terminal"));
            }
            term::note(&format!(
                "Cancelling {name:?} also cancels: {}",
                cascade.join(", ")
            ));
            if !term::confirm("Continue?") {
                term::note("Nothing was changed.");
                return Ok(Exit::Failed);
            }
        }
    }
    let answer = client.post(&path, &json!({"to": to, "dryRun": false}))?;
    term::outln(&format!("{} {to}", render::qualified(Kind::Task, &name)));
    for c in cascade_names(&answer) {
        term::outln(&format!(
            "{} cancelled (cascade)",
            render::qualified(Kind::Task, &c)
        ));
    }
    Ok(Exit::Ok)
}

pub(crate) fn host(ctx: &mut Ctx, cmd: HostCommand) -> Result<Exit> {
    let (name, action, done) = match cmd {
        HostCommand::Disable { name } => (name, "disable", "disabled"),
        HostCommand::Enable { name } => (name, "enable", "enabled"),
        HostCommand::ClearSuspect { name } => (name, "clear-suspect", "suspect cleared"),
    };
    let client = ctx.client()?;
    client.post(
        &format!("{}/{action}", object_path(Kind::Host, None, &name)),
        &json!({}),
    )?;
    term::outln(&format!("{} {done}", render::qualified(Kind::Host, &name)));
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cascade_accepts_names_or_objects() {
        let a = json!({"task": {}, "cascade": ["a", {"metadata": {"name": "b"}}]});
        assert_eq!(cascade_names(&a), ["a", "b"]);
        assert!(cascade_names(&json!({"task": {}})).is_empty());
    }
}
