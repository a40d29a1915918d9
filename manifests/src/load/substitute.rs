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
    let mut problems = Vec::new();
    walk(value, &mut String::new(), vars, &mut problems);
    problems
}

fn walk(value: &mut Value, path: &mut String, vars: &Vars, problems: &mut Vec<(String, String)>) {
    match value {
        Value::String(s) => match one(s, vars) {
            Ok(Some(new)) => *value = new,
            Ok(None) => {}
            Err(why) => problems.push((path.clone(), why)),
        },
        Value::Array(items) => {
            for (i, v) in items.iter_mut().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                walk(v, path, vars, problems);
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
                walk(v, path, vars, problems);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// One scalar: `None` when it holds no `$` (unchanged).
fn one(s: &str, vars: &Vars) -> Result<Option<Value>, String> {
    if !s.contains('$') {
        return Ok(None);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    let mut refs = 0;
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
        match vars.get(name).map(String::as_str).or(default) {
            Some(v) => out.push_str(v),
            None => {
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
    Ok(Some(if whole {
        typed(out)
    } else {
        Value::String(out)
    }))
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
}
