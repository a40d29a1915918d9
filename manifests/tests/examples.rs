//! Every file under `examples/` validates against the committed JSON
//! Schemas (with the small draft 2020-12 subset validator below), loads
//! through the typed loader, and the whole tree passes `validate_batch`
//! with nothing stored.
//!
//! The validator implements exactly the keywords the generated schemas
//! use and panics on any other, so a schema change cannot be silently
//! skipped.

use std::path::{Path, PathBuf};

use pam_manifests::load::{parse_documents, parse_values};
use pam_manifests::validate::{validate_batch, InMemoryState};
use pam_manifests::Kind;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
}

fn schema(kind: &str) -> Value {
    let text = std::fs::read_to_string(
        root().join(format!("schemas/{}.schema.json", kind.to_lowercase())),
    )
    .unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Validates `v` against `s` (resolving `$ref` in `root`); returns the
/// problems as `path: what`.
fn check(root: &Value, s: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    let Some(obj) = s.as_object() else {
        if s == &Value::Bool(false) {
            out.push(format!("{path}: not allowed"));
        }
        return;
    };
    for (kw, arg) in obj {
        match kw.as_str() {
            "$schema" | "title" | "description" | "default" | "$defs" | "format" => {}
            "$ref" => {
                let name = arg.as_str().unwrap().strip_prefix("#/$defs/").unwrap();
                check(root, &root["$defs"][name], v, path, out);
            }
            "type" => {
                let types: Vec<&str> = match arg {
                    Value::String(t) => vec![t.as_str()],
                    Value::Array(ts) => ts.iter().map(|t| t.as_str().unwrap()).collect(),
                    _ => panic!("type {arg}"),
                };
                let ok = types.iter().any(|t| match *t {
                    "string" => v.is_string(),
                    "integer" => v.is_i64() || v.is_u64(),
                    "number" => v.is_number(),
                    "boolean" => v.is_boolean(),
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "null" => v.is_null(),
                    other => panic!("type {other}"),
                });
                if !ok {
                    out.push(format!("{path}: expected type {types:?}, got {v}"));
                }
            }
            "const" => {
                if v != arg {
                    out.push(format!("{path}: expected {arg}, got {v}"));
                }
            }
            "enum" => {
                if !arg.as_array().unwrap().contains(v) {
                    out.push(format!("{path}: expected one of {arg}, got {v}"));
                }
            }
            "oneOf" | "anyOf" => {
                let passing = arg
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|sub| {
                        let mut e = Vec::new();
                        check(root, sub, v, path, &mut e);
                        e.is_empty()
                    })
                    .count();
                let ok = if kw == "oneOf" {
                    passing == 1
                } else {
                    passing >= 1
                };
                if !ok {
                    out.push(format!("{path}: {passing} alternatives of {kw} match {v}"));
                }
            }
            "properties" | "additionalProperties" | "patternProperties" | "required" => {
                let Some(map) = v.as_object() else { continue };
                if kw == "required" {
                    for r in arg.as_array().unwrap() {
                        if !map.contains_key(r.as_str().unwrap()) {
                            out.push(format!("{path}: missing {r}"));
                        }
                    }
                    continue;
                }
                if kw != "additionalProperties" {
                    continue; // handled with additionalProperties below
                }
                let props = obj.get("properties").and_then(Value::as_object);
                let patterns: Vec<(regex::Regex, &Value)> = obj
                    .get("patternProperties")
                    .and_then(Value::as_object)
                    .map(|p| {
                        p.iter()
                            .map(|(re, s)| (regex::Regex::new(re).unwrap(), s))
                            .collect()
                    })
                    .unwrap_or_default();
                for (k, child) in map {
                    let child_path = format!("{path}.{k}");
                    let mut matched = false;
                    if let Some(sub) = props.and_then(|p| p.get(k)) {
                        matched = true;
                        check(root, sub, child, &child_path, out);
                    }
                    for (re, sub) in &patterns {
                        if re.is_match(k) {
                            matched = true;
                            check(root, sub, child, &child_path, out);
                        }
                    }
                    if !matched {
                        check(root, arg, child, &child_path, out);
                    }
                }
            }
            "items" => {
                if let Some(items) = v.as_array() {
                    for (i, item) in items.iter().enumerate() {
                        check(root, arg, item, &format!("{path}[{i}]"), out);
                    }
                }
            }
            "minimum" | "maximum" => {
                if let Some(n) = v.as_f64() {
                    let bound = arg.as_f64().unwrap();
                    if (kw == "minimum" && n < bound) || (kw == "maximum" && n > bound) {
                        out.push(format!("{path}: {n} violates {kw} {bound}"));
                    }
                }
            }
            "minLength" | "maxLength" => {
                if let Some(s) = v.as_str() {
                    let n = s.chars().count() as u64;
                    let bound = arg.as_u64().unwrap();
                    if (kw == "minLength" && n < bound) || (kw == "maxLength" && n > bound) {
                        out.push(format!("{path}: length {n} violates {kw} {bound}"));
                    }
                }
            }
            "pattern" => {
                if let Some(s) = v.as_str() {
                    if !regex::Regex::new(arg.as_str().unwrap())
                        .unwrap()
                        .is_match(s)
                    {
                        out.push(format!("{path}: {s:?} does not match {arg}"));
                    }
                }
            }
            other => panic!("schema keyword {other} not supported by the test validator"),
        }
    }
    // `properties` without `additionalProperties` still checks known keys.
    if !obj.contains_key("additionalProperties") {
        if let (Some(props), Some(map)) = (
            obj.get("properties").and_then(Value::as_object),
            v.as_object(),
        ) {
            for (k, child) in map {
                if let Some(sub) = props.get(k) {
                    check(root, sub, child, &format!("{path}.{k}"), out);
                }
            }
        }
    }
}

fn schema_errors(doc: &Value) -> Vec<String> {
    let kind = doc["kind"].as_str().expect("kind");
    let s = schema(kind);
    let mut out = Vec::new();
    check(&s, &s, doc, "", &mut out);
    out
}

#[test]
fn every_example_validates_against_its_schema_and_the_batch_rules() {
    let mut files = Vec::new();
    yaml_files(&root().join("examples"), &mut files);
    assert!(files.len() >= 6, "examples/ has {} files", files.len());
    let mut all_docs = Vec::new();
    let mut kinds_seen = std::collections::BTreeSet::new();
    for path in &files {
        let label = path.strip_prefix(root()).unwrap().display().to_string();
        let text = std::fs::read_to_string(path).unwrap();

        // The editor hint points at the schema of the file's one kind, by a
        // relative path that exists.
        let first = text.lines().next().unwrap();
        let rel = first
            .strip_prefix("# yaml-language-server: $schema=")
            .unwrap_or_else(|| panic!("{label}: first line is not a schema hint: {first}"));
        let schema_path = path.parent().unwrap().join(rel);
        assert!(schema_path.exists(), "{label}: {rel} does not exist");

        for (index, value) in parse_values(&label, &text).unwrap() {
            let kind = value["kind"].as_str().unwrap();
            assert!(
                rel.ends_with(&format!("{}.schema.json", kind.to_lowercase())),
                "{label} document {index}: kind {kind} but the hint points at {rel}"
            );
            let errs = schema_errors(&value);
            assert!(errs.is_empty(), "{label} document {index}: {errs:#?}");
        }
        let docs = parse_documents(&label, &text).unwrap_or_else(|e| {
            panic!(
                "{label}: {}",
                e.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        });
        kinds_seen.extend(docs.iter().map(|d| d.manifest.kind()));
        all_docs.extend(docs);
    }
    assert_eq!(
        kinds_seen.len(),
        Kind::ALL.len(),
        "examples cover every kind"
    );
    assert!(all_docs.len() >= 18, "{} documents", all_docs.len());
    let errors = validate_batch(&all_docs, &InMemoryState::default());
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn the_test_validator_rejects_what_the_schema_forbids() {
    let good = serde_json::json!({
        "apiVersion": "pam.dev/v1", "kind": "Run",
        "metadata": {"name": "r", "project": "p"},
        "spec": {"task": "t", "provider": "claude", "cwd": "/x", "target": {"host": "h"}}
    });
    assert!(
        schema_errors(&good).is_empty(),
        "{:?}",
        schema_errors(&good)
    );
    let cases = [
        ("/spec/provider", serde_json::json!("gpt")),
        ("/metadata/name", serde_json::json!("Bad_Name")),
        ("/spec/restartPolicy", serde_json::json!({"maxAttempts": 0})),
        (
            "/spec/target",
            serde_json::json!({"host": "h", "selector": {}}),
        ),
        ("/spec/bogus", serde_json::json!(1)),
        ("/status", serde_json::json!({"phase": "running"})),
        (
            "/metadata/uid",
            serde_json::json!("6f1c2b1e-8d7a-4a57-9a3c-0d1f2e3a4b5c"),
        ),
    ];
    for (pointer, value) in cases {
        let mut bad = good.clone();
        let (parent, key) = pointer.rsplit_once('/').unwrap();
        let target = if parent.is_empty() {
            &mut bad
        } else {
            bad.pointer_mut(parent).unwrap()
        };
        target[key] = value;
        assert!(!schema_errors(&bad).is_empty(), "{pointer} accepted");
    }
    let mut missing = good.clone();
    missing["spec"].as_object_mut().unwrap().remove("task");
    assert!(!schema_errors(&missing).is_empty(), "missing task accepted");
}
