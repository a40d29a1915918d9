//! `explain KIND[.field[.field]] [--recursive]`, from the kinds' JSON
//! Schemas (generated from the types pamctl was built with, so it explains
//! its manifests offline). Shaped like kubectl's: KIND, VERSION, the
//! field and its type, DESCRIPTION, then FIELDS with types, `-required-`
//! and descriptions (`--recursive`: the whole tree, types only).

use pam_manifests::Kind;
use serde_json::Value;

use crate::error::{CliError, Exit, Result};
use crate::{parse_kind, render, term};

/// A kind's schema, generated from the types pamctl was built with (the
/// same generator writes the committed `schemas/`, and a test in
/// pam-manifests keeps those current), so pamctl explains offline.
fn schema(kind: Kind) -> Value {
    pam_manifests::schema::schema_for(kind)
}

/// `status` is not in the manifest schemas (a manifest never carries
/// it); explain still lists it, as kubectl does, and says where to look.
const STATUS_TEXT: &str = "Observed state, set by the controller; never part of a manifest (apply drops it). Read it with `pamctl get KIND NAME -o yaml` or `pamctl describe`.";

/// A schema node with `$ref`s followed and `anyOf [X, null]` unwrapped.
fn resolve<'a>(root: &'a Value, mut s: &'a Value) -> &'a Value {
    for _ in 0..16 {
        if let Some(r) = s.get("$ref").and_then(Value::as_str) {
            match r
                .strip_prefix("#/$defs/")
                .and_then(|name| root.pointer(&format!("/$defs/{name}")))
            {
                Some(target) => {
                    s = target;
                    continue;
                }
                None => return s,
            }
        }
        if let Some(alts) = s.get("anyOf").and_then(Value::as_array) {
            let non_null: Vec<&Value> = alts
                .iter()
                .filter(|a| a.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if let [one] = non_null.as_slice() {
                s = one;
                continue;
            }
        }
        return s;
    }
    s
}

fn primary_type(s: &Value) -> Option<&str> {
    match s.get("type") {
        Some(Value::String(t)) => Some(t),
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).find(|t| *t != "null"),
        _ => None,
    }
}

/// The alternatives of a `oneOf` that are all objects (Run `target`).
fn object_alternatives<'a>(root: &'a Value, s: &'a Value) -> Option<Vec<&'a Value>> {
    let alts = s.get("oneOf")?.as_array()?;
    let objs: Vec<&Value> = alts.iter().map(|a| resolve(root, a)).collect();
    objs.iter()
        .all(|a| primary_type(a) == Some("object"))
        .then_some(objs)
}

fn enum_values(root: &Value, s: &Value) -> Vec<String> {
    let r = resolve(root, s);
    r.get("oneOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|a| a.get("const").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// kubectl's type words: `<string>`, `<integer>`, `<[]string>`,
/// `<map[string]string>`, `<Object>`.
fn type_name(root: &Value, s: &Value) -> String {
    let r = resolve(root, s);
    if !enum_values(root, s).is_empty() {
        return "string".into();
    }
    if object_alternatives(root, r).is_some() {
        return "Object".into();
    }
    match primary_type(r) {
        Some("array") => format!(
            "[]{}",
            r.get("items")
                .map_or("Object".into(), |i| type_name(root, i))
        ),
        Some("object") => {
            let has_props = r
                .get("properties")
                .and_then(Value::as_object)
                .is_some_and(|p| !p.is_empty());
            match r.get("patternProperties").and_then(Value::as_object) {
                Some(pp) if !has_props => {
                    let value = pp
                        .values()
                        .next()
                        .map_or("string".into(), |v| type_name(root, v));
                    format!("map[string]{value}")
                }
                _ => "Object".into(),
            }
        }
        Some(t) => t.to_string(),
        None => "Object".into(),
    }
}

fn description(root: &Value, s: &Value) -> String {
    s.get("description")
        .or_else(|| resolve(root, s).get("description"))
        .and_then(Value::as_str)
        .unwrap_or("<empty>")
        .to_string()
}

/// One field of an object node.
struct Field<'a> {
    name: String,
    schema: &'a Value,
    required: bool,
    /// For a field of one `oneOf` alternative: that alternative's
    /// description (it says what choosing the field means).
    alternative: Option<&'a str>,
}

/// The fields of an object node (the union of a `oneOf` of objects, none
/// of them required: each is one way to fill the object).
fn fields<'a>(root: &'a Value, s: &'a Value) -> Vec<Field<'a>> {
    let r = resolve(root, s);
    let alternatives = object_alternatives(root, r);
    let union = alternatives.is_some();
    let parts = alternatives.unwrap_or_else(|| vec![r]);
    let mut out: Vec<Field> = Vec::new();
    for part in parts {
        let alternative = part
            .get("description")
            .and_then(Value::as_str)
            .filter(|_| union);
        let required: Vec<&str> = part
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        for (name, schema) in part
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            if !out.iter().any(|f| &f.name == name) {
                out.push(Field {
                    name: name.clone(),
                    schema,
                    required: !union && required.contains(&name.as_str()),
                    alternative,
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Indents every line of `text` by `n` spaces.
fn indented(text: &str, n: usize) -> String {
    text.lines()
        .map(|l| format!("{}{l}\n", " ".repeat(n)))
        .collect()
}

fn field_line(root: &Value, f: &Field) -> String {
    let req = if f.required { " -required-" } else { "" };
    format!("{}\t<{}>{req}\n", f.name, type_name(root, f.schema))
}

fn tree(root: &Value, s: &Value, depth: usize, out: &mut String) {
    if depth > 12 {
        return;
    }
    for f in fields(root, s) {
        out.push_str(&" ".repeat(2 * depth));
        out.push_str(&field_line(root, &f));
        tree(root, f.schema, depth + 1, out);
    }
}

/// The explain page for `KIND[.field…]`.
pub(crate) fn page(path: &str, recursive: bool) -> Result<String> {
    let mut parts = path.split('.');
    let kind = parse_kind(parts.next().unwrap_or(""))?;
    let fields_path: Vec<&str> = parts.collect();
    let root = schema(kind);
    let mut node: &Value = &root;
    let mut walked: Vec<&str> = Vec::new();
    for name in &fields_path {
        if walked.is_empty() && *name == "status" {
            return Err(CliError::usage(format!(
                "{}.status: {STATUS_TEXT}",
                kind.singular()
            )));
        }
        let here = fields(&root, node);
        let Some(f) = here.iter().find(|f| f.name == *name) else {
            let known: Vec<&str> = here.iter().map(|f| f.name.as_str()).collect();
            let at = std::iter::once(kind.singular())
                .chain(walked.iter().copied())
                .collect::<Vec<_>>()
                .join(".");
            let mut e = CliError::usage(format!("field {name:?} does not exist in {at}"));
            if !known.is_empty() {
                e = e.hint(format!("fields of {at}: {}", known.join(", ")));
            }
            return Err(e);
        };
        node = f.schema;
        walked.push(name);
    }
    let mut out = format!(
        "KIND:       {}\nVERSION:    {}\n\n",
        kind.as_str(),
        render::API_VERSION
    );
    if let Some(last) = walked.last() {
        out.push_str(&format!("FIELD: {last} <{}>\n\n", type_name(&root, node)));
    }
    out.push_str("DESCRIPTION:\n");
    let desc = if walked.is_empty() {
        root.get("description")
            .and_then(Value::as_str)
            .unwrap_or("<empty>")
            .to_string()
    } else {
        description(&root, node)
    };
    out.push_str(&indented(&desc, 4));
    let values = enum_values(&root, node);
    if !values.is_empty() {
        out.push_str("\nENUM:\n");
        out.push_str(&indented(&values.join("\n"), 4));
    }
    let fs = fields(&root, node);
    if fs.is_empty() && !walked.is_empty() {
        return Ok(out);
    }
    out.push_str("\nFIELDS:\n");
    if recursive {
        let mut t = String::new();
        tree(&root, node, 1, &mut t);
        out.push_str(&t);
        if walked.is_empty() {
            out.push_str("  status\t<Object>\n");
        }
        return Ok(out);
    }
    for f in &fs {
        out.push_str("  ");
        out.push_str(&field_line(&root, f));
        let desc = match (f.schema.get("description"), f.alternative) {
            (None, Some(alt)) => alt.to_string(),
            _ => description(&root, f.schema),
        };
        out.push_str(&indented(&desc, 4));
        let values = enum_values(&root, f.schema);
        if !values.is_empty() {
            out.push_str(&format!("    enum: {}\n", values.join(", ")));
        }
        out.push('\n');
    }
    if walked.is_empty() {
        // Not in the schema; listed so the page shows the whole object.
        out.push_str("  status\t<Object>\n");
        out.push_str(&indented(STATUS_TEXT, 4));
        out.push('\n');
    }
    Ok(out)
}

/// For completion: the paths one level below `current`'s parent
/// (`run.spec.re` → `run.spec.restartPolicy`, …); empty when the parent
/// is not a known path.
pub(crate) fn children(current: &str) -> Vec<String> {
    let Some((parent, _)) = current.rsplit_once('.') else {
        return Vec::new();
    };
    let mut parts = parent.split('.');
    let Ok(kind) = parse_kind(parts.next().unwrap_or("")) else {
        return Vec::new();
    };
    let root = schema(kind);
    let mut node: &Value = &root;
    for name in parts {
        match fields(&root, node).into_iter().find(|f| f.name == name) {
            Some(f) => node = f.schema,
            None => return Vec::new(),
        }
    }
    fields(&root, node)
        .into_iter()
        .map(|f| format!("{parent}.{}", f.name))
        .collect()
}

pub(crate) fn explain(path: &str, recursive: bool) -> Result<Exit> {
    term::out(&page(path, recursive)?);
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_explains_and_every_field_resolves() {
        for kind in Kind::ALL {
            let p = page(kind.singular(), false).unwrap();
            assert!(
                p.contains("FIELDS:\n  apiVersion\t<string> -required-"),
                "{p}"
            );
            let r = page(kind.singular(), true).unwrap();
            assert!(r.contains("  spec\t<Object>"), "{r}");
            // Every field's type is a type word, never a raw `$ref`.
            assert!(!r.contains("$ref"), "{r}");
        }
    }

    #[test]
    fn a_field_page() {
        insta::assert_snapshot!(page("run.spec.restartPolicy", false).unwrap(), @r"
        KIND:       Run
        VERSION:    pam.dev/v1

        FIELD: restartPolicy <Object>

        DESCRIPTION:
            Restart policy for failed attempts.

        FIELDS:
          backoffMaxSeconds	<integer>
            Upper bound of the doubling wait.

          backoffSeconds	<integer>
            Wait before the first requeue; doubles per attempt.

          maxAttempts	<integer>
            Attempts in all, the first included (≥ 1; 1 = never restart).

        ");
        let provider = page("runs.spec.provider", false).unwrap();
        assert!(provider.contains("FIELD: provider <string>"), "{provider}");
        assert!(
            provider.contains("ENUM:\n    claude\n    codex\n"),
            "{provider}"
        );
        let target = page("run.spec.target", false).unwrap();
        assert!(target.contains("  host\t<string>\n"), "{target}");
        assert!(
            target.contains("  selector\t<map[string]string>\n"),
            "{target}"
        );
        let labels = page("task.metadata.labels", false).unwrap();
        assert!(
            labels.contains("FIELD: labels <map[string]string>"),
            "{labels}"
        );
        let cmd = page("run.spec.command", false).unwrap();
        assert!(cmd.contains("FIELD: command <[]string>"), "{cmd}");
    }

    #[test]
    fn unknown_fields_and_status() {
        let e = page("run.spec.colour", false).unwrap_err();
        assert_eq!(e.message, "field \"colour\" does not exist in run.spec");
        assert!(
            e.hints[0].starts_with("fields of run.spec: budget, command, cwd,"),
            "{:?}",
            e.hints
        );
        let e = page("run.status.phase", false).unwrap_err();
        assert!(
            e.message.starts_with("run.status: Observed state"),
            "{}",
            e.message
        );
        assert!(page("pods", false)
            .unwrap_err()
            .message
            .contains("unknown kind"));
    }
}
