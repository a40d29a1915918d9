//! `get`, `describe`, `delete`.

use chrono::Utc;
use pam_manifests::Kind;
use serde_json::Value;

use crate::client::{query, Client};
use crate::error::{CliError, Exit, Result};
use crate::render::{self, describe, Output};
use crate::{collection_path, object_path, parse_kind, term, Ctx};

fn items(body: Value) -> Result<Vec<Value>> {
    match body {
        Value::Object(mut m) => match m.remove("items") {
            Some(Value::Array(items)) => Ok(items),
            _ => Err(CliError::new(
                Exit::ServerError,
                "the list answer has no `items` array",
            )),
        },
        _ => Err(CliError::new(
            Exit::ServerError,
            "the list answer is not an object",
        )),
    }
}

/// Lists objects of `kind` (`project: None` = every project).
pub(crate) fn list(
    client: &Client,
    kind: Kind,
    project: Option<&str>,
    selector: Option<&str>,
) -> Result<Vec<Value>> {
    let path = format!(
        "{}{}",
        collection_path(kind, project),
        query(&[("labelSelector", selector)])
    );
    items(client.get(&path)?)
}

/// What `get` (and `get -w`) reads: the kind, and the project or, with
/// `-A`, every project.
pub(crate) struct GetScope {
    pub kind: Kind,
    pub across: bool,
    pub project: Option<String>,
}

impl GetScope {
    /// Checks the arguments `get` and `get -w` share.
    pub(crate) fn resolve(
        ctx: &mut Ctx,
        kind: &str,
        name: Option<&str>,
        selector: Option<&str>,
        all_projects: bool,
    ) -> Result<GetScope> {
        let kind = parse_kind(kind)?;
        if let Some(s) = selector {
            super::apply::parse_selector(s)?;
        }
        if name.is_some() && (all_projects || selector.is_some()) {
            return Err(CliError::usage("a NAME cannot be combined with -A or -l"));
        }
        let across = all_projects && kind.is_project_scoped();
        let project = if across { None } else { ctx.project_for(kind)? };
        Ok(GetScope {
            kind,
            across,
            project,
        })
    }
}

pub(crate) fn get(
    ctx: &mut Ctx,
    kind: &str,
    name: Option<&str>,
    selector: Option<&str>,
    output: Output,
    all_projects: bool,
) -> Result<Exit> {
    let GetScope {
        kind,
        across,
        project,
    } = GetScope::resolve(ctx, kind, name, selector, all_projects)?;
    let client = ctx.client()?;
    let objects = match name {
        Some(n) => vec![client.get(&object_path(kind, project.as_deref(), n))?],
        None => list(&client, kind, project.as_deref(), selector)?,
    };
    if objects.is_empty() && matches!(output, Output::Table | Output::Wide) {
        let scope = match &project {
            Some(p) => format!(" in project {p:?}"),
            None => String::new(),
        };
        term::note(&format!("No {}{scope}.", kind.plural()));
        return Ok(Exit::Ok);
    }
    let text = render::get(kind, &objects, output, name.is_some(), across, Utc::now())?;
    term::out(&text);
    Ok(Exit::Ok)
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
        let page = items(client.get(&path)?)?;
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

pub(crate) fn describe(ctx: &mut Ctx, kind: &str, name: &str) -> Result<Exit> {
    let kind = parse_kind(kind)?;
    let project = ctx.project_for(kind)?;
    let client = ctx.client()?;
    let obj = client.get(&object_path(kind, project.as_deref(), name))?;
    let events = match recent_events(&client, kind, &obj) {
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
    term::out(&describe::page(kind, &obj, &events, Utc::now()));
    Ok(Exit::Ok)
}

/// One object to delete.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub kind: Kind,
    pub project: Option<String>,
    pub name: String,
}

/// The objects named by manifest files (`delete -f`); a document without
/// `metadata.project` uses `default_project`.
pub(crate) fn targets_from_files(
    files: &[crate::files::InputFile],
    default_project: Option<&str>,
) -> Result<Vec<Target>> {
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for f in files {
        let docs = match pam_manifests::load::parse_values(&f.name, &f.content) {
            Ok(d) => d,
            Err(es) => {
                errors.extend(es.iter().map(ToString::to_string));
                continue;
            }
        };
        for (index, v) in docs {
            let kind_text = v.get("kind").and_then(Value::as_str).unwrap_or("");
            let Some(kind) = Kind::parse(kind_text) else {
                errors.push(format!(
                    "{}: document {index}: kind: unknown kind {kind_text:?}",
                    f.name
                ));
                continue;
            };
            let Some(name) = v.pointer("/metadata/name").and_then(Value::as_str) else {
                errors.push(format!(
                    "{}: document {index}: metadata.name: missing",
                    f.name
                ));
                continue;
            };
            let project = if kind.is_project_scoped() {
                match v
                    .pointer("/metadata/project")
                    .and_then(Value::as_str)
                    .or(default_project)
                {
                    Some(p) => Some(p.to_string()),
                    None => {
                        errors.push(format!(
                            "{}: document {index}: metadata.project: missing and no -p given",
                            f.name
                        ));
                        continue;
                    }
                }
            } else {
                None
            };
            out.push(Target {
                kind,
                project,
                name: name.to_string(),
            });
        }
    }
    if !errors.is_empty() {
        return Err(CliError::usage("cannot read the objects to delete").details(errors));
    }
    Ok(out)
}

pub(crate) fn delete(
    ctx: &mut Ctx,
    args: &[String],
    files: &[String],
    recursive: bool,
    selector: Option<&str>,
) -> Result<Exit> {
    let targets = if !files.is_empty() {
        if !args.is_empty() || selector.is_some() {
            return Err(CliError::usage(
                "-f cannot be combined with KIND NAME or -l",
            ));
        }
        let inputs = crate::files::collect(files, recursive, &mut std::io::stdin().lock())?;
        let project = ctx.resolved()?.project.clone();
        targets_from_files(&inputs, project.as_deref())?
    } else {
        let Some((kind, names)) = args.split_first() else {
            return Err(CliError::usage(
                "nothing to delete: pass KIND NAME…, KIND -l SELECTOR, or -f FILE",
            ));
        };
        let kind = parse_kind(kind)?;
        let project = ctx.project_for(kind)?;
        match (names.is_empty(), selector) {
            (false, None) => names
                .iter()
                .map(|n| Target {
                    kind,
                    project: project.clone(),
                    name: n.clone(),
                })
                .collect(),
            (true, Some(sel)) => {
                super::apply::parse_selector(sel)?;
                let client = ctx.client()?;
                let found = list(&client, kind, project.as_deref(), Some(sel))?;
                if found.is_empty() {
                    term::note(&format!("No {} match {sel:?}.", kind.plural()));
                }
                found
                    .iter()
                    .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
                    .map(|n| Target {
                        kind,
                        project: project.clone(),
                        name: n.to_string(),
                    })
                    .collect()
            }
            (false, Some(_)) => return Err(CliError::usage("pass either NAMEs or -l, not both")),
            (true, None) => {
                return Err(CliError::usage(format!(
                    "delete {}: which? pass NAMEs or -l SELECTOR",
                    kind.plural()
                )))
            }
        }
    };
    let client = ctx.client()?;
    let mut worst: Option<CliError> = None;
    for t in targets {
        match client.delete(&object_path(t.kind, t.project.as_deref(), &t.name)) {
            Ok(_) => term::outln(&format!("{} deleted", render::qualified(t.kind, &t.name))),
            Err(e) => {
                crate::report(&e);
                if worst
                    .as_ref()
                    .is_none_or(|w| (e.exit as u8) > (w.exit as u8))
                {
                    worst = Some(e);
                }
            }
        }
    }
    match worst {
        // Already printed; exit with its code.
        Some(e) => Err(CliError {
            message: String::new(),
            details: vec![],
            hints: vec![],
            ..e
        }),
        None => Ok(Exit::Ok),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::InputFile;

    #[test]
    fn delete_targets_from_manifests() {
        let f = InputFile {
            name: "web.yaml".into(),
            content: "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\n---\n\
                      apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: build}\nspec: {title: B}\n---\n\
                      apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: api}\n"
                .into(),
        };
        let t = targets_from_files(std::slice::from_ref(&f), Some("web")).unwrap();
        assert_eq!(
            t,
            [
                Target {
                    kind: Kind::Project,
                    project: None,
                    name: "web".into()
                },
                Target {
                    kind: Kind::Task,
                    project: Some("web".into()),
                    name: "build".into()
                },
                Target {
                    kind: Kind::Run,
                    project: Some("api".into()),
                    name: "r1".into()
                },
            ]
        );
        let e = targets_from_files(&[f], None).unwrap_err();
        assert_eq!(
            e.details,
            ["web.yaml: document 1: metadata.project: missing and no -p given"]
        );
    }
}
