//! `pamctl get … -o yaml | pamctl apply -f -`: what `get` prints carries
//! what the server owns — `status` and the server-set metadata (`uid`,
//! `generation`, `creationTimestamp`, `managedFields`) — and may be a
//! `List`. pamd refuses
//! those in a manifest, so pamctl drops them before sending (kubectl's
//! habit); `metadata.resourceVersion` stays: it makes a concurrent change
//! a conflict instead of a silent overwrite.
//!
//! # Guarantees
//!
//! A file with nothing to drop is sent byte for byte. A block-style file
//! (what `get -o yaml` prints) keeps every line where it was — dropped
//! lines become empty lines — so the server's errors point at the lines
//! the operator sees; the result is checked by parsing it again. Anything
//! else (flow style, JSON, a `List`) is sent re-serialized, with the same
//! content.

use pam_manifests::kinds::SERVER_SET_METADATA;
use serde_json::Value;

use crate::files::InputFile;

/// A `List` document's items, each in its place, with the list's
/// document index; other documents as they are.
pub fn expand_lists(docs: Vec<(usize, Value)>) -> Vec<(usize, Value)> {
    let mut out = Vec::new();
    for (index, v) in docs {
        let is_list = v.get("kind").and_then(Value::as_str) == Some("List")
            && v.get("items").is_some_and(Value::is_array);
        if is_list {
            if let Some(Value::Array(items)) = v.get("items") {
                out.extend(items.iter().cloned().map(|i| (index, i)));
            }
        } else {
            out.push((index, v));
        }
    }
    out
}

/// Drops `status` and the server-set metadata; whether anything went.
pub fn strip(v: &mut Value) -> bool {
    let Some(top) = v.as_object_mut() else {
        return false;
    };
    let mut changed = top.remove("status").is_some();
    if let Some(meta) = top.get_mut("metadata").and_then(Value::as_object_mut) {
        for f in SERVER_SET_METADATA {
            changed |= meta.remove(f).is_some();
        }
    }
    changed
}

/// The files to send for apply, diff and validate (module doc).
pub fn prepare(files: Vec<InputFile>) -> Vec<InputFile> {
    files.into_iter().map(prepare_one).collect()
}

fn prepare_one(f: InputFile) -> InputFile {
    // Unparseable text goes as it is: the server words the errors.
    let Ok(docs) = pam_manifests::load::parse_values(&f.name, &f.content) else {
        return f;
    };
    let has_list = docs
        .iter()
        .any(|(_, v)| v.get("kind").and_then(Value::as_str) == Some("List"));
    let mut expected = expand_lists(docs);
    let mut changed = false;
    for (_, v) in &mut expected {
        changed |= strip(v);
    }
    if !changed && !has_list {
        return f;
    }
    if !has_list {
        let blanked = blank_lines(&f.content);
        let same = pam_manifests::load::parse_values(&f.name, &blanked)
            .is_ok_and(|again| again == expected);
        if same {
            return InputFile {
                name: f.name,
                content: blanked,
            };
        }
    }
    let content = expected
        .iter()
        .map(|(_, v)| render_yaml(v))
        .collect::<Vec<_>>()
        .join("---\n");
    InputFile {
        name: f.name,
        content,
    }
}

fn render_yaml(v: &Value) -> String {
    serde_yaml::to_string(v).expect("a JSON value serializes as YAML")
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Empties the lines of top-level `status:` blocks and of the server-set
/// keys directly under a top-level `metadata:` (block style only; the
/// caller checks the outcome).
fn blank_lines(text: &str) -> String {
    #[derive(PartialEq)]
    enum In {
        Other,
        Status,
        Metadata,
    }
    let mut state = In::Other;
    // Inside metadata: the indentation of its keys, and whether the lines
    // below the current key are being dropped with it.
    let mut meta_indent: Option<usize> = None;
    let mut dropping_key = false;
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches(['\n', '\r']);
        let trimmed = body.trim_start();
        let blank_or_comment = trimmed.is_empty() || trimmed.starts_with('#');
        let keep = if body.starts_with("---") || body.starts_with("...") {
            state = In::Other;
            true
        } else if blank_or_comment {
            state != In::Status && !dropping_key
        } else if indent(body) == 0 && !body.starts_with("- ") && body != "-" {
            let key = body.split(':').next().unwrap_or("").trim();
            state = match key {
                "status" => In::Status,
                "metadata" => In::Metadata,
                _ => In::Other,
            };
            meta_indent = None;
            dropping_key = false;
            state != In::Status
        } else {
            match state {
                In::Status => false,
                In::Other => true,
                In::Metadata => {
                    let ind = indent(body);
                    let key_indent = *meta_indent.get_or_insert(ind);
                    // A sequence's items may sit at its key's indent
                    // (`managedFields:` then `- manager: …`): still the key.
                    let item = trimmed.starts_with("- ") || trimmed == "-";
                    if ind < key_indent || (ind == key_indent && !item) {
                        let key = trimmed.split(':').next().unwrap_or("").trim();
                        dropping_key = SERVER_SET_METADATA.contains(&key);
                    }
                    !dropping_key
                }
            }
        };
        if keep {
            out.push_str(line);
        } else if line.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOT: &str = "\
apiVersion: pam.dev/v1
kind: Task
metadata:
  creationTimestamp: 2026-03-01T11:55:00Z
  generation: 3
  labels:
    app: web
  name: build
  project: web
  resourceVersion: '42'
  uid: 9f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9
spec:
  title: Build it
status:
  conditions:
  - status: 'True'
    type: Ready
  phase: todo
";

    fn file(content: &str) -> InputFile {
        InputFile {
            name: "-".into(),
            content: content.into(),
        }
    }

    #[test]
    fn managed_fields_go_with_their_items_and_lines_stay() {
        let got = GOT.replace(
            "  generation: 3\n",
            "  generation: 3\n  managedFields:\n  - fields:\n    - spec.title\n    manager: apply:ci\n    operation: Apply\n    time: 2026-03-01T11:55:00Z\n",
        );
        let out = prepare(vec![file(&got)]).remove(0);
        assert_eq!(out.content.lines().count(), got.lines().count());
        assert!(!out.content.contains("manager"), "{}", out.content);
        assert!(
            out.content.contains("\n  labels:\n    app: web\n"),
            "{}",
            out.content
        );
        let title = |t: &str| t.lines().position(|l| l == "  title: Build it");
        assert_eq!(title(&out.content), title(&got));
    }

    #[test]
    fn get_yaml_keeps_its_lines() {
        let out = prepare(vec![file(GOT)]).remove(0);
        insta::assert_snapshot!(out.content, @r"
        apiVersion: pam.dev/v1
        kind: Task
        metadata:


          labels:
            app: web
          name: build
          project: web
          resourceVersion: '42'

        spec:
          title: Build it
        ");
        assert_eq!(out.content.lines().count(), GOT.lines().count());
        let parsed = pam_manifests::parse_documents("-", &out.content).unwrap();
        assert_eq!(parsed[0].manifest.resource_version(), Some("42"));
    }

    #[test]
    fn clean_files_are_untouched_and_json_or_lists_are_rewritten() {
        let clean = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {}\n";
        assert_eq!(prepare(vec![file(clean)])[0].content, clean);
        let json = r#"{"apiVersion": "pam.dev/v1", "kind": "Project", "metadata": {"name": "web", "uid": "x", "resourceVersion": "3"}, "spec": {}, "status": {"phase": "active"}}"#;
        let out = &prepare(vec![file(json)])[0].content;
        let v = pam_manifests::load::parse_values("-", out).unwrap();
        assert_eq!(
            v[0].1,
            serde_json::json!({"apiVersion": "pam.dev/v1", "kind": "Project",
                "metadata": {"name": "web", "resourceVersion": "3"}, "spec": {}})
        );
        let list = format!(
            "apiVersion: pam.dev/v1\nkind: List\nitems:\n- {json}\n- apiVersion: pam.dev/v1\n  kind: Host\n  metadata: {{name: h}}\n  spec: {{platform: linux}}\n  status: {{phase: online}}\n"
        );
        let out = &prepare(vec![file(&list)])[0].content;
        let docs = pam_manifests::parse_documents("-", out).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].manifest.name().as_str(), "h");
    }

    #[test]
    fn nested_keys_named_like_server_fields_stay() {
        let text = "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: a\n  project: web\n  annotations:\n    uid: keep-me\n  uid: drop-me\nspec:\n  title: A\n  description: |\n    status:\n    uid: x\n";
        let out = &prepare(vec![file(text)])[0].content;
        let v = pam_manifests::load::parse_values("-", out).unwrap();
        assert_eq!(v[0].1["metadata"]["annotations"]["uid"], "keep-me");
        assert!(v[0].1["metadata"].get("uid").is_none());
        assert_eq!(v[0].1["spec"]["description"], "status:\nuid: x\n");
        assert_eq!(out.lines().count(), text.lines().count());
    }
}
