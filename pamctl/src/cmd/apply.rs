//! `apply` and `diff`: manifests go to the server as `files`, parsed there
//! with positions (docs/api.md, Apply).

use std::time::Duration;

use pam_manifests::{Kind, LabelSelector};
use serde_json::{json, Value};

use crate::cli::{DryRun, FileArgs, PruneArgs};
use crate::error::{CliError, Exit, Result};
use crate::files::{self, InputFile};
use crate::render::{self, diff};
use crate::term::{self, Stream};
use crate::Ctx;

/// Above this many objects an apply shows a spinner on a terminal.
const PROGRESS_THRESHOLD: usize = 300;

/// The input files, with what `get` prints but a manifest must not carry
/// dropped ([`crate::roundtrip`]).
pub(crate) fn read_files(args: &FileArgs) -> Result<Vec<InputFile>> {
    let files = files::collect(&args.files, args.recursive, &mut std::io::stdin().lock())?;
    Ok(crate::roundtrip::prepare(files))
}

/// A cheap count of the objects in the input (top-level `kind:` lines),
/// only to decide whether to show progress; the server's answer is the
/// truth.
fn rough_count(files: &[InputFile]) -> usize {
    files
        .iter()
        .map(|f| f.content.lines().filter(|l| l.starts_with("kind:")).count())
        .sum()
}

pub(crate) fn parse_selector(text: &str) -> Result<()> {
    LabelSelector::parse(text)
        .map(|_| ())
        .map_err(|e| CliError::usage(format!("bad selector {text:?}: {e}")))
}

/// Checks the prune flags: never prune without a selector.
pub(crate) fn check_prune(
    prune: bool,
    selector: Option<&str>,
    applyset: Option<&str>,
) -> Result<()> {
    if prune && selector.is_none() && applyset.is_none() {
        return Err(CliError::usage("--prune needs -l SELECTOR or --applyset NAME")
            .hint("pamctl never prunes without a selector: it would delete everything not in the input"));
    }
    if !prune && selector.is_some() {
        return Err(
            CliError::usage("-l/--selector on apply only chooses what --prune may delete")
                .hint("add --prune, or drop -l"),
        );
    }
    if let Some(s) = selector {
        parse_selector(s)?;
    }
    Ok(())
}

/// With a spinner on stderr when the batch is large and stderr a terminal:
/// the request is one transaction, so the spinner says only that pamctl is
/// waiting, and for how long.
fn with_progress<T>(objects: usize, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if objects <= PROGRESS_THRESHOLD || !term::stderr_is_terminal() {
        return f();
    }
    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
            .expect("a valid template"),
    );
    bar.set_message(format!("{what} ~{objects} objects, waiting for the server"));
    bar.enable_steady_tick(Duration::from_millis(100));
    let result = f();
    bar.finish_and_clear();
    result
}

/// The lines apply prints, from the server's `results`.
pub(crate) fn result_lines(body: &Value) -> Vec<String> {
    let dry = body.get("dryRun").and_then(Value::as_bool).unwrap_or(false);
    let suffix = if dry { " (server dry run)" } else { "" };
    body.get("results")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|r| {
            let kind = r.get("kind").and_then(Value::as_str).unwrap_or("?");
            let project = r.get("project").and_then(Value::as_str);
            let name = r.get("name").and_then(Value::as_str).unwrap_or("?");
            let action = r.get("action").and_then(Value::as_str).unwrap_or("?");
            let object = match Kind::parse(kind) {
                Some(k) => render::qualified_in(project, k, name),
                None => format!("{}.pam.dev/{name}", kind.to_ascii_lowercase()),
            };
            match r.get("message").and_then(Value::as_str) {
                // A kept object says why it was not pruned.
                Some(why) => format!("{object} {action}{suffix}: {why}"),
                None => format!("{object} {action}{suffix}"),
            }
        })
        .collect()
}

/// `pamctl apply`'s flags.
pub(crate) struct Flags {
    pub prune: PruneArgs,
    pub dry_run: DryRun,
    pub force_conflicts: bool,
}

/// Checks the prune flags and writes them into an apply or diff body.
fn add_prune(body: &mut Value, p: PruneArgs) -> Result<()> {
    check_prune(p.prune, p.selector.as_deref(), p.applyset.as_deref())?;
    body["prune"] = json!(p.prune);
    if let Some(s) = p.selector {
        body["selector"] = json!(s);
    }
    if let Some(a) = p.applyset {
        body["applyset"] = json!(a);
    }
    Ok(())
}

pub(crate) fn apply(ctx: &mut Ctx, args: &FileArgs, flags: Flags) -> Result<Exit> {
    let Flags {
        prune,
        dry_run,
        force_conflicts,
    } = flags;
    let mut body = json!({ "dryRun": dry_run == DryRun::Server });
    add_prune(&mut body, prune)?;
    let files = read_files(args)?;
    body["files"] = json!(files);
    let client = ctx.client()?;
    let answer = with_progress(rough_count(&files), "applying", || {
        let path = if force_conflicts {
            "/api/v1/apply?forceConflicts=true"
        } else {
            "/api/v1/apply"
        };
        client.post(path, &body)
    })?;
    for line in result_lines(&answer) {
        term::outln(&line);
    }
    Ok(Exit::Ok)
}

/// `pamctl diff`: what apply would change; with `--applyset NAME` (or
/// `--prune -l SEL`) also what it would prune, as deletions.
pub(crate) fn diff(
    ctx: &mut Ctx,
    args: &FileArgs,
    mut prune: PruneArgs,
    force_conflicts: bool,
) -> Result<Exit> {
    // An applyset is the pruning unit: diffing one lists its prunes.
    prune.prune |= prune.applyset.is_some();
    let mut body = json!({});
    add_prune(&mut body, prune)?;
    let files = read_files(args)?;
    body["files"] = json!(files);
    let client = ctx.client()?;
    let path = if force_conflicts {
        "/api/v1/diff?forceConflicts=true"
    } else {
        "/api/v1/diff"
    };
    let answer = with_progress(rough_count(&files), "diffing", || client.post(path, &body))?;
    let text = render_diff(&answer, term::colour(Stream::Stdout))?;
    term::out(&text);
    Ok(if text.is_empty() {
        Exit::Ok
    } else {
        Exit::Failed
    })
}

/// Every changed object's unified diff, in the server's order.
pub(crate) fn render_diff(answer: &Value, colour: bool) -> Result<String> {
    let items = answer
        .get("items")
        .and_then(Value::as_array)
        .ok_or_else(|| CliError::new(Exit::ServerError, "the diff answer has no `items`"))?;
    let mut out = String::new();
    for it in items {
        if it.get("action").and_then(Value::as_str) == Some("unchanged") {
            continue;
        }
        let kind_text = it.get("kind").and_then(Value::as_str).unwrap_or("");
        let kind = Kind::parse(kind_text).ok_or_else(|| {
            CliError::new(
                Exit::ServerError,
                format!("the diff answer has an unknown kind {kind_text:?}"),
            )
        })?;
        let item = diff::Item {
            kind,
            project: it.get("project").and_then(Value::as_str),
            name: it.get("name").and_then(Value::as_str).unwrap_or("?"),
            live: it.get("live").filter(|l| !l.is_null()),
            // None: pruned.
            desired: it.get("desired").filter(|d| !d.is_null()),
        };
        out.push_str(&diff::unified(&item, colour));
        // A Secret's values are never sent: say per key what changes.
        for c in it
            .get("secretChanges")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = c.get("key").and_then(Value::as_str).unwrap_or("?");
            let change = c.get("change").and_then(Value::as_str).unwrap_or("?");
            out.push_str(&format!("# secret key {key}: {change}\n"));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prune_needs_a_selector() {
        let e = check_prune(true, None, None).unwrap_err();
        assert_eq!(e.exit, Exit::Usage);
        assert_eq!(e.message, "--prune needs -l SELECTOR or --applyset NAME");
        check_prune(true, Some("app=web"), None).unwrap();
        check_prune(true, None, Some("web")).unwrap();
        check_prune(false, None, Some("web")).unwrap();
        assert_eq!(
            check_prune(false, Some("app=web"), None).unwrap_err().exit,
            Exit::Usage
        );
        let bad = check_prune(true, Some("app in ("), None).unwrap_err();
        assert!(bad.message.starts_with("bad selector"), "{}", bad.message);
    }

    #[test]
    fn apply_lines_are_kubectl_shaped() {
        let body = json!({"dryRun": false, "results": [
            {"kind": "Project", "name": "web", "action": "unchanged", "generation": 1},
            {"kind": "Task", "project": "web", "name": "build", "action": "created", "generation": 1},
            {"kind": "Task", "project": "web", "name": "test", "action": "configured", "generation": 2},
            {"kind": "Run", "project": "web", "name": "old", "action": "pruned"},
        ]});
        assert_eq!(
            result_lines(&body),
            [
                "project.pam.dev/web unchanged",
                "web/task.pam.dev/build created",
                "web/task.pam.dev/test configured",
                "web/run.pam.dev/old pruned",
            ]
        );
        let dry = json!({"dryRun": true, "results": [{"kind": "Host", "name": "alpha", "action": "created"}]});
        assert_eq!(
            result_lines(&dry),
            ["host.pam.dev/alpha created (server dry run)"]
        );
    }

    #[test]
    fn diff_skips_unchanged_and_is_empty_without_changes() {
        let same = json!({"items": [{"kind": "Task", "project": "web", "name": "a", "action": "unchanged",
            "live": {"spec": {"title": "A"}}, "desired": {"spec": {"title": "A"}}}]});
        assert_eq!(render_diff(&same, false).unwrap(), "");
        let changed = json!({"items": [
            {"kind": "Task", "project": "web", "name": "a", "action": "update",
             "live": {"spec": {"title": "A"}, "labels": {}, "annotations": {}},
             "desired": {"spec": {"title": "B"}, "labels": {}, "annotations": {}}},
            {"kind": "Project", "name": "new", "action": "create", "live": null,
             "desired": {"spec": {"description": ""}}}]});
        insta::assert_snapshot!(render_diff(&changed, false).unwrap(), @r"
        --- web/task.pam.dev/a (live)
        +++ web/task.pam.dev/a (desired)
        @@ -1,4 +1,4 @@
         annotations: {}
         labels: {}
         spec:
        -  title: A
        +  title: B
        --- /dev/null
        +++ project.pam.dev/new (desired)
        @@ -0,0 +1,4 @@
        +annotations: {}
        +labels: {}
        +spec:
        +  description: ''
        ");
    }

    #[test]
    fn rough_count_counts_top_level_kinds() {
        let f = InputFile {
            name: "a".into(),
            content: "kind: Task\n---\nkind: Run\nspec:\n  kind: x\n".into(),
        };
        assert_eq!(rough_count(&[f]), 2);
    }
}
