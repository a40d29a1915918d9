//! JSON value → typed [`Manifest`]: the one typing step of both reads.
//!
//! [`type_document`] makes the structural checks (a mapping; no `status`;
//! no server-set metadata; a known `kind`), then deserializes the kind's
//! type; serde's error path is turned into a positioned error through the
//! document's [`Locator`]. [`check_document`] adds the per-document rules
//! typing cannot express.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::positions::{Locator, Segment};
use super::Document;
use crate::error::ManifestError;
use crate::kinds::{Kind, Manifest, Provider, SERVER_SET_METADATA};

/// "one of `Project`, `Task`, …": every kind of the registry.
fn kinds_expected() -> String {
    let names: Vec<String> = crate::kinds::info::NAMES
        .iter()
        .map(|n| format!("`{n}`"))
        .collect();
    format!("one of {}", names.join(", "))
}

/// Structural checks, then typing of one document. Every problem found is
/// returned; serde stops at the first type error, so there is at most one of
/// those.
pub(super) fn type_document(
    doc: &Locator<'_>,
    mut value: Value,
) -> Result<Manifest, Vec<ManifestError>> {
    let Some(top) = value.as_object_mut() else {
        return Err(vec![doc.error_at(
            "",
            "expected a mapping with apiVersion, kind, metadata and spec",
        )]);
    };
    let mut errors = Vec::new();
    if top.contains_key("status") {
        errors.push(doc.error_at(
            "status",
            "status is observed state, set by the controller; expected no status in a manifest (remove the block)",
        ));
        top.remove("status");
    }
    if let Some(meta) = top.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in SERVER_SET_METADATA {
            if meta.remove(field).is_some() {
                errors.push(doc.error_at(
                    &format!("metadata.{field}"),
                    "set by the server; expected it absent in a manifest (only resourceVersion may be given)",
                ));
            }
        }
    }
    let kind = match top.get("kind") {
        None => {
            errors.push(doc.error_at(
                "kind",
                format!("missing required field, expected {}", kinds_expected()),
            ));
            return Err(errors);
        }
        Some(Value::String(s)) => match Kind::parse(s) {
            Some(k) => k,
            None => {
                errors.push(doc.error_at(
                    "kind",
                    format!("unknown kind {s:?}, expected {}", kinds_expected()),
                ));
                return Err(errors);
            }
        },
        Some(other) => {
            errors.push(doc.error_at(
                "kind",
                format!(
                    "invalid type: {}, expected {}",
                    describe(other),
                    kinds_expected()
                ),
            ));
            return Err(errors);
        }
    };
    let typed = if kind == Kind::Secret {
        // A Secret's values never reach an error: each is checked to be a
        // string here, so serde (whose messages quote the value it did not
        // expect) never sees one that is not, and what serde says about
        // the rest is told without values.
        let values = secret_value_errors(doc, &value);
        if !values.is_empty() {
            errors.extend(values);
            return Err(errors);
        }
        // With its path always, so what is about the values is known.
        typed_at(doc, value)
            .map_err(|mut e| {
                if e.path == "spec" || e.path.starts_with("spec.") {
                    e.message = without_values(&e.message);
                }
                e
            })
            .map(Manifest::Secret)
    } else {
        crate::kinds::for_manifest!(kind, T => typed::<T>(doc, value).map(Manifest::from))
    };
    match typed {
        Ok(m) if errors.is_empty() => Ok(m),
        Ok(_) => Err(errors),
        Err(e) => {
            errors.push(e);
            Err(errors)
        }
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "mapping",
    }
}

/// Every value of a Secret's `spec.data` and `spec.stringData` that is
/// not a string (and either map that is not a mapping), told by its type
/// and position only.
fn secret_value_errors(doc: &Locator<'_>, value: &Value) -> Vec<ManifestError> {
    let Some(spec) = value.get("spec").and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut errors = Vec::new();
    for field in ["data", "stringData"] {
        let at = |key: Option<&str>| {
            let mut path = vec![
                Segment::Key("spec".to_string()),
                Segment::Key(field.to_string()),
            ];
            path.extend(key.map(|k| Segment::Key(k.to_string())));
            path
        };
        match spec.get(field) {
            None | Some(Value::Null) => {}
            Some(Value::Object(values)) => {
                for (key, v) in values {
                    if !v.is_string() {
                        errors.push(doc.error_at_segments(
                            &at(Some(key)),
                            format!("expected a string, got {}", a(describe(v))),
                        ));
                    }
                }
            }
            Some(other) => errors.push(doc.error_at_segments(
                &at(None),
                format!(
                    "expected a mapping of keys to strings, got {}",
                    a(describe(other))
                ),
            )),
        }
    }
    errors
}

/// `number` → `a number`, `null` as it is.
fn a(what: &str) -> String {
    match what {
        "null" => what.to_string(),
        _ => format!("a {what}"),
    }
}

/// serde's `invalid type: string "…", expected …` (or `invalid value:
/// integer `…``) without the value: the type word(s) only.
fn without_values(message: &str) -> String {
    for prefix in ["invalid type: ", "invalid value: "] {
        if let Some(rest) = message.strip_prefix(prefix) {
            // The expectation is the type's, never the input's, so the
            // last `, expected ` is where the input ends.
            let (unexpected, expected) = rest.rsplit_once(", expected ").unwrap_or((rest, ""));
            let kind = unexpected
                .split(['`', '"', '\''])
                .next()
                .unwrap_or("")
                .trim();
            return if expected.is_empty() {
                format!("{prefix}{kind}")
            } else {
                format!("{prefix}{kind}, expected {expected}")
            };
        }
    }
    // Other serde messages name fields, not values; a custom one might
    // quote anything, so only the known shapes pass.
    if message.starts_with("missing")
        || message.starts_with("unknown field")
        || message.starts_with("duplicate field")
    {
        return message.to_string();
    }
    "invalid value, expected a Secret manifest (values are not shown)".to_string()
}

/// Deserializes a kind's type; an error names the field path serde was at.
///
/// The fast load (which only needs to know that typing failed: it then
/// loads the file again positioned) does not track the path: tracking it
/// costs a sixth of a load.
fn typed<T: DeserializeOwned>(doc: &Locator<'_>, value: Value) -> Result<T, ManifestError> {
    if !doc.paths {
        return serde_json::from_value(value).map_err(|e| doc.error_at("", e.to_string()));
    }
    typed_at(doc, value)
}

/// [`typed`], the error at its field path (with no positions, the path
/// alone).
fn typed_at<T: DeserializeOwned>(doc: &Locator<'_>, value: Value) -> Result<T, ManifestError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let mut path: Vec<Segment> = e
            .path()
            .iter()
            .filter_map(|seg| match seg {
                serde_path_to_error::Segment::Seq { index } => Some(Segment::Index(*index)),
                serde_path_to_error::Segment::Map { key } => Some(Segment::Key(key.clone())),
                serde_path_to_error::Segment::Enum { variant } => {
                    Some(Segment::Key(variant.clone()))
                }
                serde_path_to_error::Segment::Unknown => None,
            })
            .collect();
        let message = e.inner().to_string();
        let mut on_key = message.starts_with("invalid label key");
        let message = if let Some(field) = backticked(&message, "missing field `") {
            path.push(Segment::Key(field.to_string()));
            "missing required field, expected a value".to_string()
        } else if let Some(field) = backticked(&message, "unknown field `") {
            // The unknown key may already be the last path segment.
            if path.last() != Some(&Segment::Key(field.to_string())) {
                path.push(Segment::Key(field.to_string()));
            }
            on_key = true;
            let rest = message.split_once("`, ").map_or("", |(_, r)| r);
            match rest {
                "there are no fields" => "unknown field, expected no fields here".to_string(),
                rest => format!("unknown field, {rest}"),
            }
        } else {
            message
        };
        if on_key {
            doc.error_at_key(&path, message)
        } else {
            doc.error_at_segments(&path, message)
        }
    })
}

/// The text between `prefix` and the next backtick.
fn backticked<'a>(message: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = message.strip_prefix(prefix)?;
    rest.split_once('`').map(|(field, _)| field)
}

/// Per-document rules that typing cannot express.
pub(super) fn check_document(doc: &Document) -> Vec<ManifestError> {
    let mut errors = Vec::new();
    if let Manifest::Source(s) = &doc.manifest {
        for (path, message) in s.spec.problems() {
            errors.push(doc.error_at(path, message));
        }
    }
    for (path, message) in doc.manifest.generic_problems() {
        errors.push(doc.error_at(&path, message));
    }
    if let Manifest::Webhook(w) = &doc.manifest {
        for (path, message) in w.spec.problems() {
            errors.push(doc.error_at(&path, message));
        }
    }
    if let Manifest::Schedule(s) = &doc.manifest {
        // Its runs are named NAME-<tick in minutes>, a name of at most 63.
        if s.metadata.name.as_str().len() > 52 {
            errors.push(doc.error_at(
                "metadata.name",
                format!(
                    "{} bytes, expected at most 52 for a Schedule (its runs are named NAME-<tick>)",
                    s.metadata.name.as_str().len()
                ),
            ));
        }
        for (path, message) in s.spec.problems(&s.metadata.project) {
            errors.push(doc.error_at(&path, message));
        }
        if let Some(req) = &s.spec.run_template.provider_version {
            if let Err(message) = crate::versions::requirement(req) {
                errors.push(doc.error_at("spec.runTemplate.providerVersion", message));
            }
        }
    }
    for (path, message) in workspace_problems(&doc.manifest)
        .into_iter()
        .chain(permission_problems(&doc.manifest))
    {
        errors.push(doc.error_at(&path, message));
    }
    if let Manifest::Run(run) = &doc.manifest {
        let spec = &run.spec;
        if let Some(req) = &spec.provider_version {
            if let Err(message) = crate::versions::requirement(req) {
                errors.push(doc.error_at("spec.providerVersion", message));
            }
        }
        match (&spec.command, spec.provider) {
            (None, Provider::Exec) => errors.push(doc.error_at(
                "spec.command",
                "missing required field for provider exec, expected the argv to run (a non-empty list)",
            )),
            (Some(argv), Provider::Exec) if argv.is_empty() || argv[0].is_empty() => {
                errors.push(doc.error_at(
                    "spec.command",
                    "empty command, expected the argv to run (a non-empty list whose first item is the program)",
                ))
            }
            (Some(_), p) if p != Provider::Exec => errors.push(doc.error_at(
                "spec.command",
                format!("command is only for provider exec, expected no command for provider {p} (its command line is the worker's)"),
            )),
            _ => {}
        }
        for (path, message) in spec.env_problems(&run.metadata.project) {
            errors.push(doc.error_at(&path, message));
        }
        let policy = &spec.restart_policy;
        if policy.backoff_max_seconds < policy.backoff_seconds {
            errors.push(doc.error_at(
                "spec.restartPolicy.backoffMaxSeconds",
                format!(
                    "{} is below backoffSeconds, expected at least {}",
                    policy.backoff_max_seconds, policy.backoff_seconds
                ),
            ));
        }
    }
    errors
}

/// A workspace's per-document rules: a repository's URL and default ref, a
/// workspace's ref and branch names, and never both a workspace and a
/// `cwd` (the worktree is the provider's cwd).
fn workspace_problems(m: &Manifest) -> Vec<(String, String)> {
    let run_spec = |spec: &crate::kinds::RunSpec, at: &str| {
        let Some(ws) = &spec.workspace else {
            return Vec::new();
        };
        let mut out = ws.problems(&format!("{at}.workspace"));
        if !spec.cwd.is_empty() {
            out.push((
                format!("{at}.cwd"),
                "a run with a workspace gets its worktree as cwd, expected no cwd (or no workspace)"
                    .to_string(),
            ));
        }
        out
    };
    match m {
        Manifest::Project(p) => p
            .spec
            .repository
            .as_ref()
            .map_or_else(Vec::new, |r| r.problems("spec.repository")),
        Manifest::Task(t) => t
            .spec
            .workspace
            .as_ref()
            .map_or_else(Vec::new, |w| w.problems("spec.workspace")),
        Manifest::Run(r) => run_spec(&r.spec, "spec"),
        Manifest::Schedule(s) => run_spec(&s.spec.run_template, "spec.runTemplate"),
        _ => Vec::new(),
    }
}

/// The tool rules of a `permissions` (Project, Task, Run, a Schedule's
/// run template): each one argument of the provider's command line.
fn permission_problems(m: &Manifest) -> Vec<(String, String)> {
    let (p, at) = match m {
        Manifest::Project(p) => (p.spec.permissions.as_ref(), "spec.permissions"),
        Manifest::Task(t) => (t.spec.permissions.as_ref(), "spec.permissions"),
        Manifest::Run(r) => (r.spec.permissions.as_ref(), "spec.permissions"),
        Manifest::Schedule(s) => (
            s.spec.run_template.permissions.as_ref(),
            "spec.runTemplate.permissions",
        ),
        _ => (None, ""),
    };
    p.map_or_else(Vec::new, |p| p.problems(at))
}
