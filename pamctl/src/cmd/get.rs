//! `get` and `describe`.

use chrono::Utc;
use pam_manifests::Kind;
use serde_json::Value;

use super::targets;
use crate::cli::GetArgs;
use crate::client::{query, Client};
use crate::error::{CliError, Exit, Result};
use crate::jsonpath::Path;
use crate::render::{self, describe, GetOpts};
use crate::{object_path, term, Ctx};

/// Prints `errors` (already worded) and returns the worst one's exit code
/// as an error with nothing left to print: for verbs that go on past a
/// missing object, as kubectl does, and fail at the end.
pub(crate) fn fail_after(errors: Vec<CliError>) -> Result<Exit> {
    let mut worst: Option<CliError> = None;
    for e in errors {
        crate::report(&e);
        if worst
            .as_ref()
            .is_none_or(|w| (e.exit as u8) > (w.exit as u8))
        {
            worst = Some(e);
        }
    }
    match worst {
        Some(e) => Err(CliError {
            message: String::new(),
            details: vec![],
            hints: vec![],
            ..e
        }),
        None => Ok(Exit::Ok),
    }
}

/// The objects a request names (each one; a 404 goes to `missing`, the
/// rest are still read, as kubectl does), or every object of its kind
/// matching `selector`.
fn read(
    client: &Client,
    r: &targets::Request,
    project: Option<&str>,
    selector: Option<&str>,
    missing: &mut Vec<CliError>,
) -> Result<Vec<Value>> {
    if r.names.is_empty() {
        return client.list(r.kind, project, selector);
    }
    let mut found = Vec::new();
    for n in &r.names {
        match client.get(&object_path(r.kind, project, n)) {
            Ok(o) => found.push(o),
            Err(e) if e.status == Some(404) => missing.push(e),
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

/// Where `get` reads one kind: the project, or with `-A` every project.
pub(crate) fn scope(
    ctx: &mut Ctx,
    kind: Kind,
    all_projects: bool,
) -> Result<(bool, Option<String>)> {
    let across = all_projects && kind.is_project_scoped();
    let project = if across { None } else { ctx.project_for(kind)? };
    Ok((across, project))
}

/// `get all` (kubectl's habit): every project-scoped kind — a
/// project's tasks, runs, Schedules and Secrets — as `tasks,runs,…`.
fn all_expanded(args: &[String]) -> Vec<String> {
    match args.split_first() {
        Some((first, rest)) if first.eq_ignore_ascii_case("all") => {
            let kinds: Vec<&str> = Kind::ALL
                .iter()
                .filter(|k| k.is_project_scoped())
                .map(|k| k.plural())
                .collect();
            std::iter::once(kinds.join(","))
                .chain(rest.iter().cloned())
                .collect()
        }
        _ => args.to_vec(),
    }
}

pub(crate) fn get(ctx: &mut Ctx, a: GetArgs) -> Result<Exit> {
    if a.args
        .first()
        .is_some_and(|k| super::webhooks::NAMES.contains(&k.to_ascii_lowercase().as_str()))
    {
        return super::webhooks::get(ctx, &a);
    }
    if a.args
        .first()
        .is_some_and(|k| super::events::NAMES.contains(&k.to_ascii_lowercase().as_str()))
    {
        return super::events::get(ctx, &a);
    }
    let f = &a.events;
    if f.for_.is_some() || !f.types.is_empty() || f.show_output {
        return Err(CliError::usage(
            "--for, --types and --show-output are for events (pamctl get events)",
        ));
    }
    let requests = targets::parse(&all_expanded(&a.args))?;
    if let Some(s) = &a.selector {
        super::apply::parse_selector(s)?;
    }
    if a.blocked && requests.iter().any(|r| r.kind != Kind::Task) {
        return Err(CliError::usage(
            "--blocked lists tasks only (pamctl get tasks --blocked)",
        ));
    }
    if a.blocked && a.watch {
        return Err(CliError::usage("--blocked cannot be combined with -w"));
    }
    let named = requests.iter().any(|r| !r.names.is_empty());
    if named && (a.all_projects || a.selector.is_some()) {
        return Err(CliError::usage("a NAME cannot be combined with -A or -l"));
    }
    let sort = match &a.sort_by {
        Some(p) => {
            Some(Path::parse(p).map_err(|e| CliError::usage(format!("--sort-by {p:?}: {e}")))?)
        }
        None => None,
    };
    let opts = GetOpts {
        with_project: false,
        no_headers: a.no_headers,
        show_labels: a.show_labels,
        label_columns: a.label_columns.clone(),
    };
    if a.watch {
        let [one] = requests.as_slice() else {
            return Err(CliError::usage("-w watches one kind at a time"));
        };
        if one.names.len() > 1 {
            return Err(CliError::usage(
                "-w watches one NAME, or every object of a kind",
            ));
        }
        let (across, project) = scope(ctx, one.kind, a.all_projects)?;
        let w = super::watch::Watch {
            kind: one.kind,
            name: one.names.first().map(String::as_str),
            selector: a.selector.as_deref(),
            output: &a.output,
            opts: GetOpts {
                with_project: across,
                ..opts
            },
            project,
        };
        return super::watch::get_watch(ctx, w);
    }
    let client = ctx.client()?;
    let single = matches!(requests.as_slice(), [r] if r.names.len() == 1);
    let mut groups: Vec<(Kind, Vec<Value>)> = Vec::new();
    let mut missing = Vec::new();
    let mut with_project = false;
    let mut projects = Vec::new();
    for r in &requests {
        let (across, project) = scope(ctx, r.kind, a.all_projects)?;
        with_project |= across;
        let mut items = read(
            &client,
            r,
            project.as_deref(),
            a.selector.as_deref(),
            &mut missing,
        )?;
        if a.blocked {
            // A task waits while status.blockedBy lists any task.
            items.retain(|o| {
                o.pointer("/status/blockedBy")
                    .and_then(Value::as_array)
                    .is_some_and(|b| !b.is_empty())
            });
        }
        if let Some(p) = &sort {
            render::columns::sort_by(&mut items, p);
        }
        if let Some(p) = project {
            if !projects.contains(&p) {
                projects.push(p);
            }
        }
        groups.push((r.kind, items));
    }
    let opts = GetOpts {
        with_project,
        ..opts
    };
    let empty = groups.iter().all(|(_, items)| items.is_empty());
    if empty && a.output.is_table() {
        if missing.is_empty() {
            let kinds: Vec<&str> = groups.iter().map(|(k, _)| k.plural()).collect();
            let scope = match projects.as_slice() {
                [p] => format!(" in project {p:?}"),
                _ => String::new(),
            };
            term::note(&format!("No {}{scope}.", kinds.join(" or ")));
        }
        return fail_after(missing);
    }
    if single && !missing.is_empty() {
        return fail_after(missing);
    }
    let text = render::get_groups(&groups, &a.output, single, &opts, Utc::now())?;
    term::out(&text);
    fail_after(missing)
}

/// Pages of events read by `describe` (1000 each) before it gives up.
const MAX_EVENT_PAGES: usize = 100;
/// Events `describe` shows.
const DESCRIBE_EVENTS: usize = 20;

/// The object's last events: the journal's events of the kind's topic
/// family (`topic=run.`, a prefix), read from the start in pages and
/// filtered here by the object's uid in the payload.
fn recent_events(client: &Client, kind: Kind, obj: &Value) -> Result<(Vec<Value>, bool)> {
    let uid = obj
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let prefix = describe::topic_prefix(kind);
    let mut after = 0i64;
    let mut found: Vec<Value> = Vec::new();
    for _ in 0..MAX_EVENT_PAGES {
        let path = format!(
            "/api/v1/events{}",
            query(&[
                ("after", Some(&after.to_string())),
                ("topic", Some(prefix)),
                ("limit", Some("1000")),
            ])
        );
        let page = crate::client::items(client.get(&path)?)?;
        let n = page.len();
        for e in page {
            if let Some(seq) = e.get("seq").and_then(Value::as_i64) {
                after = after.max(seq);
            }
            let topic = e.get("topic").and_then(Value::as_str).unwrap_or("");
            if topic.starts_with(prefix) && describe::event_is_about(&e, kind, uid, name) {
                found.push(e);
                if found.len() > DESCRIBE_EVENTS {
                    found.remove(0);
                }
            }
        }
        if n < 1000 {
            return Ok((found, false));
        }
    }
    Ok((found, true))
}

/// A run's recent activity (`GET …/activity`); nothing when it cannot be
/// read (a pamd that does not serve it), with a note.
fn recent_activity(client: &Client, project: Option<&str>, run: &Value) -> Vec<Value> {
    let name = run
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let path = format!("{}/activity", crate::object_path(Kind::Run, project, name));
    match client.get(&path) {
        Ok(v) => v
            .get("items")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default(),
        Err(e) => {
            term::note(&format!("note: recent activity unavailable: {}", e.message));
            Vec::new()
        }
    }
}

pub(crate) fn describe(ctx: &mut Ctx, args: &[String]) -> Result<Exit> {
    let requests = targets::parse(args)?;
    let client = ctx.client()?;
    let mut pages = Vec::new();
    let mut missing = Vec::new();
    for r in requests {
        let project = ctx.project_for(r.kind)?;
        let objects = read(&client, &r, project.as_deref(), None, &mut missing)?;
        for obj in objects {
            let events = match recent_events(&client, r.kind, &obj) {
                Ok((events, truncated)) => {
                    if truncated {
                        term::note(
                            "note: the event journal is long; events after the first 100000 were not read",
                        );
                    }
                    events
                }
                Err(e) => {
                    term::note(&format!("note: events unavailable: {}", e.message));
                    Vec::new()
                }
            };
            // A run's agent: what it did lately (its current attempt).
            let activity = if r.kind == Kind::Run {
                recent_activity(&client, project.as_deref(), &obj)
            } else {
                Vec::new()
            };
            pages.push(describe::page(
                r.kind,
                &obj,
                &describe::EventsAndActivity {
                    events: &events,
                    activity: &activity,
                },
                Utc::now(),
            ));
        }
    }
    term::out(&pages.join("\n\n"));
    fail_after(missing)
}
