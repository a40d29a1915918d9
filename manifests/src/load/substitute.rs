//! Variable substitution in a GitOps Source's manifests (Flux's
//! `postBuild.substitute`): `${VAR}`, `${VAR:=default}` and the escape
//! `$${VAR}` (a literal `${VAR}`).
//!
//! It acts on the parsed YAML, one string scalar at a time (never on map
//! keys, never on the text): a value cannot add a field, end a string or
//! open a document, whatever it holds — a newline stays inside its string.
//! A scalar that is exactly one `${…}` takes the type its value reads as
//! (`3` a number, `true` a boolean), so `maxAttempts: ${RETRIES}` works; a
//! reference inside other text stays text. An unset variable without a
//! default is an error at its scalar's file:line.

use std::collections::BTreeMap;

use serde_json::Value;

/// The variables, by name.
pub type Vars = BTreeMap<String, String>;

/// Whether `name` may name a variable: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn valid_name(name: &str) -> bool {
    let mut b = name.bytes();
    matches!(b.next(), Some(c) if c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

/// Substitutes in every string scalar of `value`; the problems as (path,
/// message), paths as the locator reads them (`spec.title`,
/// `spec.command[1]`).
pub fn substitute(value: &mut Value, vars: &Vars) -> Vec<(String, String)> {
    substitute_recording(value, vars).problems
}

/// A scalar that took variables' values: where, which variables, and the
/// text it became (what an error about it must not print: the variables
/// may come from Secrets).
#[derive(Debug, Clone, PartialEq)]
pub struct Used {
    pub path: String,
    pub vars: Vec<String>,
    pub value: String,
}

/// What [`substitute_recording`] did.
#[derive(Debug, Default)]
pub struct Substituted {
    pub problems: Vec<(String, String)>,
    pub used: Vec<Used>,
}

/// [`substitute`], also recording each scalar that took a value.
pub fn substitute_recording(value: &mut Value, vars: &Vars) -> Substituted {
    let mut out = Substituted::default();
    walk(value, &mut String::new(), vars, &mut out);
    out
}

/// An error about a document that took variables' values, with every
/// value it would print taken out: the message names the variables and
/// keeps what was expected, never the value (a Secret's value must not
/// reach a Source's status, its events or `pamctl diff`). A value is
/// looked for as it is and as Rust's `{:?}` quotes it; one of fewer
/// than 4 bytes only in an error at or around its own field, where a
/// short value is not a coincidence.
pub fn hide_values(path: &str, message: &str, used: &[Used]) -> Option<String> {
    let near = |u: &Used| {
        let inside = |a: &str, b: &str| {
            a == b || a.starts_with(&format!("{b}.")) || a.starts_with(&format!("{b}["))
        };
        path.is_empty() || inside(path, &u.path) || inside(&u.path, path)
    };
    let shows = |text: &str, u: &Used| {
        if u.value.is_empty() {
            return false;
        }
        let quoted = format!("{:?}", u.value);
        text.contains(&u.value) || text.contains(&quoted[1..quoted.len() - 1])
    };
    let hit: Vec<&Used> = used
        .iter()
        .filter(|u| shows(message, u) && (u.value.len() >= 4 || near(u)))
        .collect();
    if hit.is_empty() {
        return None;
    }
    let mut names: Vec<String> = hit
        .iter()
        .flat_map(|u| u.vars.iter().map(|v| format!("${{{v}}}")))
        .collect();
    names.sort();
    names.dedup();
    let expected = message
        .rfind(", expected ")
        .map(|at| &message[at..])
        .filter(|tail| !hit.iter().any(|u| shows(tail, u)))
        .unwrap_or("");
    Some(format!(
        "the value substituted for {} is not valid here (not shown: it may be a Secret's){expected}",
        names.join(", ")
    ))
}

fn walk(value: &mut Value, path: &mut String, vars: &Vars, out: &mut Substituted) {
    match value {
        Value::String(s) => match one(s, vars) {
            Ok(Some((new, names))) => {
                if !names.is_empty() {
                    let text = match &new {
                        Value::String(t) => t.clone(),
                        other => other.to_string(),
                    };
                    out.used.push(Used {
                        path: path.clone(),
                        vars: names,
                        value: text,
                    });
                }
                *value = new;
            }
            Ok(None) => {}
            Err(why) => out.problems.push((path.clone(), why)),
        },
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(v, path, vars, out);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(k);
                walk(v, path, vars, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// One scalar: `None` when it holds no `$` (unchanged); else its new
/// value and the variables whose values it took (not those that fell
/// back to their default).
fn one(s: &str, vars: &Vars) -> Result<Option<(Value, Vec<String>)>, String> {
    if !s.contains('$') {
        return Ok(None);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut refs = 0;
    let mut names = Vec::new();
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(escaped) = tail.strip_prefix("$${") {
            out.push_str("${");
            rest = escaped;
            continue;
        }
        let Some(body) = tail.strip_prefix("${") else {
            out.push('$');
            rest = &tail[1..];
            continue;
        };
        let end = body.find('}').ok_or_else(|| {
            format!("{tail:?}: an unclosed ${{, expected ${{NAME}} or ${{NAME:=default}}")
        })?;
        let inner = &body[..end];
        let (name, default) = match inner.split_once(":=") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        if !valid_name(name) {
            return Err(format!(
                "${{{inner}}}: {name:?} is not a variable name, expected letters, digits and '_' (or write $${{…}} for a literal)"
            ));
        }
        match (vars.get(name), default) {
            (Some(v), _) => {
                out.push_str(v);
                names.push(name.to_string());
            }
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!(
                    "${{{name}}} is not set: give it in spec.substitute, or a default as ${{{name}:=value}}"
                ))
            }
        }
        refs += 1;
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    let whole = refs == 1 && s.starts_with("${") && s.ends_with('}') && !s[2..].contains("${");
    let value = if whole {
        typed(out)
    } else {
        Value::String(out)
    };
    Ok(Some((value, names)))
}

/// A whole-scalar value as YAML would read it plainly: an integer, a
/// float, a boolean, or else the string.
fn typed(v: String) -> Value {
    if let Ok(i) = v.parse::<i64>() {
        return Value::from(i);
    }
    if v.contains('.') {
        if let Ok(f) = v.parse::<f64>() {
            if f.is_finite() {
                return Value::from(f);
            }
        }
    }
    match v.as_str() {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars() -> Vars {
        [("TITLE", "Hello"), ("N", "3"), ("EVIL", "x\nstatus: {}")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn references_defaults_escapes_and_types() {
        let mut v = json!({
            "spec": {
                "title": "${TITLE} world",
                "maxAttempts": "${N}",
                "note": "${MISSING:=fallback}",
                "literal": "$${TITLE} costs $5",
                "cmd": ["echo", "${EVIL}"],
            },
            "${TITLE}": "keys stay",
        });
        assert!(substitute(&mut v, &vars()).is_empty());
        assert_eq!(v["spec"]["title"], "Hello world");
        assert_eq!(v["spec"]["maxAttempts"], 3);
        assert_eq!(v["spec"]["note"], "fallback");
        assert_eq!(v["spec"]["literal"], "${TITLE} costs $5");
        // A newline stays in its string: no field is added.
        assert_eq!(v["spec"]["cmd"][1], "x\nstatus: {}");
        assert_eq!(v["${TITLE}"], "keys stay");
        assert!(v.get("status").is_none());
    }

    #[test]
    fn an_unset_variable_or_a_bad_reference_is_a_problem_at_its_path() {
        let mut v =
            json!({"spec": {"title": "${NOPE}", "cmd": ["a", "${bad-name}"], "x": "${open"}});
        let mut got = substitute(&mut v, &vars());
        got.sort();
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!(got[0].0, "spec.cmd[1]");
        assert!(got[0].1.contains("not a variable name"), "{got:?}");
        assert_eq!(got[1].0, "spec.title");
        assert!(got[1].1.contains("${NOPE} is not set"), "{got:?}");
        assert_eq!(got[2].0, "spec.x");
        assert!(got[2].1.contains("unclosed"), "{got:?}");
    }

    #[test]
    fn what_took_a_value_is_recorded_and_defaults_are_not() {
        let mut v =
            json!({"metadata": {"name": "${TITLE}"}, "spec": {"n": "${N}", "d": "${MISSING:=x}"}});
        let done = substitute_recording(&mut v, &vars());
        assert!(done.problems.is_empty());
        let mut used = done.used;
        used.sort_by(|a, b| a.path.cmp(&b.path));
        assert_eq!(
            used,
            [
                Used {
                    path: "metadata.name".into(),
                    vars: vec!["TITLE".into()],
                    value: "Hello".into()
                },
                Used {
                    path: "spec.n".into(),
                    vars: vec!["N".into()],
                    value: "3".into()
                },
            ]
        );
    }

    #[test]
    fn an_error_that_would_show_a_value_names_the_variable_instead() {
        let used = [
            Used {
                path: "metadata.name".into(),
                vars: vec!["NAME".into()],
                value: "Hunter2_Secret".into(),
            },
            Used {
                path: "spec.n".into(),
                vars: vec!["N".into()],
                value: "7".into(),
            },
            Used {
                path: "spec.evil".into(),
                vars: vec!["EVIL".into()],
                value: "a\"b\nc".into(),
            },
        ];
        let m = hide_values(
            "metadata.name",
            "\"Hunter2_Secret\" is not a valid name, expected lowercase letters, digits and '-'",
            &used,
        )
        .unwrap();
        assert!(!m.contains("Hunter2"), "{m}");
        assert!(m.contains("${NAME}"), "{m}");
        assert!(
            m.ends_with(", expected lowercase letters, digits and '-'"),
            "{m}"
        );
        // Anywhere in the document, a long value is found...
        let m = hide_values("kind", "no kind Hunter2_Secret", &used).unwrap();
        assert!(!m.contains("Hunter2") && m.contains("${NAME}"), "{m}");
        // ...and in its quoted form.
        let m = hide_values("spec", "bad value \"a\\\"b\\nc\"", &used).unwrap();
        assert!(m.contains("${EVIL}"), "{m}");
        // A short one only at its own field (or around it).
        assert!(hide_values("metadata.labels", "at most 7 labels", &used).is_none());
        let m = hide_values("spec.n", "7 is out of range, expected 1 to 5", &used).unwrap();
        assert!(
            m.contains("${N}") && m.ends_with(", expected 1 to 5"),
            "{m}"
        );
        // An expected part that shows the value goes too.
        let m = hide_values("metadata.name", "bad, expected not Hunter2_Secret", &used).unwrap();
        assert!(!m.contains("Hunter2"), "{m}");
        // A message without any value is kept.
        assert!(hide_values("spec.title", "too long, expected at most 512 bytes", &used).is_none());
    }
}
