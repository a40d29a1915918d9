//! `edit KIND/NAME…`: the objects as manifests (no status, no server-set
//! metadata, with the resourceVersion that guards the write) in a temp
//! file, `$VISUAL`/`$EDITOR` (default `vi`) on it, then apply on save.
//! As kubectl does: an empty or unchanged file cancels; a refused apply
//! (invalid, conflict, illegal change) reopens the file with the errors
//! as `#` lines at the top; saving it again unchanged gives up and keeps
//! the file.

use std::path::{Path, PathBuf};

use pam_manifests::Kind;
use serde_json::{json, Value};

use super::targets;
use crate::error::{CliError, Exit, Result};
use crate::files::InputFile;
use crate::{object_path, render, roundtrip, term, Ctx};

const HEADER: &str = "\
# Edit the object(s) below. Lines beginning with '#' are ignored, and an
# empty file cancels the edit. If saving fails, this file is reopened with
# the errors at the top (line numbers count from the top of the file).
";

/// The editable text of objects as read from the server.
pub(crate) fn editable(objects: &[Value]) -> (String, Vec<Value>) {
    let manifests: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut m = render::object(o);
            roundtrip::strip(&mut m);
            m
        })
        .collect();
    let text = manifests
        .iter()
        .map(render::to_yaml)
        .collect::<Vec<_>>()
        .join("---\n");
    (text, manifests)
}

/// The file's text without comment lines (what the edit is about).
fn body(text: &str) -> String {
    text.split_inclusive('\n')
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect()
}

/// The file: header, the errors of the last try as `#` lines, the body.
fn file_text(errors: &[String], body: &str) -> String {
    let mut out = HEADER.to_string();
    if !errors.is_empty() {
        out.push_str("#\n");
        for e in errors {
            for line in e.lines() {
                out.push_str(&format!("# {line}\n"));
            }
        }
    }
    out.push_str("#\n");
    out.push_str(body);
    out
}

/// (kind, project, name) of each document, for the rule that edit changes
/// objects and never which objects.
fn identities(values: &[(usize, Value)]) -> Vec<(String, String, String)> {
    values
        .iter()
        .map(|(_, v)| {
            let s = |p: &str| {
                v.pointer(p)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            };
            (s("/kind"), s("/metadata/project"), s("/metadata/name"))
        })
        .collect()
}

/// Runs the editor on `path` through `sh`, so `EDITOR="code --wait"` works.
fn run_editor(path: &Path) -> Result<()> {
    let editor = ["VISUAL", "EDITOR"]
        .iter()
        .filter_map(|k| std::env::var(k).ok())
        .find(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "vi".into());
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("pamctl-edit")
        .arg(path)
        .status()
        .map_err(|e| CliError::failed(format!("cannot start the editor {editor:?}: {e}")))?;
    if !status.success() {
        return Err(
            CliError::failed(format!("the editor {editor:?} exited with {status}"))
                .hint(format!("your changes, if any, are in {}", path.display())),
        );
    }
    Ok(())
}

fn temp_path() -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    std::env::temp_dir().join(format!("pamctl-edit-{}-{nanos}.yaml", std::process::id()))
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text)
        .map_err(|e| CliError::failed(format!("cannot write {}: {e}", path.display())))
}

pub(crate) fn edit(ctx: &mut Ctx, args: &[String], force_conflicts: bool) -> Result<Exit> {
    let request = targets::parse_one_kind(args, "edit")?;
    if request.names.is_empty() {
        return Err(CliError::usage(
            "edit: which objects? pass KIND/NAME… or KIND NAME…",
        ));
    }
    let kind: Kind = request.kind;
    let project = ctx.project_for(kind)?;
    let client = ctx.client()?;
    let objects = request
        .names
        .iter()
        .map(|n| client.get(&object_path(kind, project.as_deref(), n)))
        .collect::<Result<Vec<_>>>()?;
    let (original_body, originals) = editable(&objects);
    let original: Vec<(usize, Value)> = originals.into_iter().map(|m| (0, m)).collect();
    let path = temp_path();
    write(&path, &file_text(&[], &original_body))?;
    let cancelled = |path: &Path| {
        let _ = std::fs::remove_file(path);
        term::note("Edit cancelled, no changes made.");
        Ok(Exit::Ok)
    };
    let mut refused_body: Option<String> = None;
    loop {
        run_editor(&path)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| CliError::failed(format!("cannot read {}: {e}", path.display())))?;
        let edited = body(&text);
        if edited.trim().is_empty() {
            return cancelled(&path);
        }
        if refused_body.as_deref() == Some(edited.as_str()) {
            return Err(CliError::failed(
                "edit cancelled: the file was saved again without changes",
            )
            .hint(format!("your changes are in {}", path.display())));
        }
        let errors: Vec<String> = match pam_manifests::load::parse_values(
            &path.display().to_string(),
            &text,
        ) {
            Err(es) => es.iter().map(|e| format!("error: {e}")).collect(),
            Ok(values) => {
                let values: Vec<(usize, Value)> = values.into_iter().map(|(_, v)| (0, v)).collect();
                if values == original {
                    return cancelled(&path);
                }
                if identities(&values) != identities(&original) {
                    vec!["error: edit changes objects, not which objects: keep each document's kind, metadata.name and metadata.project (and their order)".to_string()]
                } else {
                    let files = [InputFile {
                        name: path.display().to_string(),
                        content: text.clone(),
                    }];
                    match client.post(
                        &super::meta::apply_path("edit", force_conflicts),
                        &json!({ "files": files, "dryRun": false, "prune": false }),
                    ) {
                        Ok(answer) => {
                            for line in super::apply::result_lines(&answer) {
                                term::outln(&line.replace(" configured", " edited"));
                            }
                            let _ = std::fs::remove_file(&path);
                            return Ok(Exit::Ok);
                        }
                        // The operator can fix what the server refused.
                        Err(e) if e.exit == Exit::Refused => {
                            let mut lines: Vec<String> = e
                                .lines()
                                .into_iter()
                                .map(|(label, l)| format!("{label}: {l}"))
                                .collect();
                            if e.status == Some(409) && !super::meta::field_conflict(&e) {
                                lines.push("hint: to write your version anyway, delete the metadata.resourceVersion line; to start over, empty this file and edit again".into());
                            }
                            lines
                        }
                        Err(e) => {
                            return Err(e.hint(format!("your changes are in {}", path.display())))
                        }
                    }
                }
            }
        };
        for e in &errors {
            term::note(e);
        }
        write(&path, &file_text(&errors, &edited))?;
        refused_body = Some(edited);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_editable_file() {
        let (text, _) = editable(&crate::render::samples::tasks()[1..]);
        let f = file_text(
            &["error: 422 invalid: 1 problem\nhint: second line".to_string()],
            &text,
        );
        insta::assert_snapshot!(f, @r"
        # Edit the object(s) below. Lines beginning with '#' are ignored, and an
        # empty file cancels the edit. If saving fails, this file is reopened with
        # the errors at the top (line numbers count from the top of the file).
        #
        # error: 422 invalid: 1 problem
        # hint: second line
        #
        apiVersion: pam.dev/v1
        kind: Task
        metadata:
          name: build
          project: web
          resourceVersion: '42'
        spec:
          assignee: ana
          description: ''
          parent: release-1
          sortOrder: 1
          status: todo
          title: Build it
          type: task
        ");
        assert_eq!(body(&f), text);
    }
}
