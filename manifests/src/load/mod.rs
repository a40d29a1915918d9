//! Positioned YAML loading: text → [`Document`]s, every problem a
//! [`ManifestError`] naming file, document index, line, column, field path
//! and what was expected.
//!
//! One reader ([`yaml`]) turns YAML events into JSON values; one typing step
//! ([`typing`]) turns a value into a typed [`Manifest`]. The reader runs
//! fast first: values only, giving up at the first problem of any kind, so
//! good input pays no position cost. When it gives up, the file is read
//! again positioned: the same reader also builds a position tree and
//! records every problem, and serde's error paths are looked up in that
//! tree to give the line and column. Errors are therefore always the
//! positioned read's. A document loaded by the fast read keeps its file's
//! text; an error about it later (batch rules, apply) reads that file's
//! positions once, on first need.
//!
//! # Guarantees
//! - Documents that are empty or hold only comments are skipped, but still
//!   counted: document indexes are those of the file (0-based).
//! - A document with a `status:` block, or with the server-set metadata
//!   `uid`, `generation` or `creationTimestamp`, is refused (see
//!   [`crate::kinds`]); `metadata.resourceVersion` is accepted.
//! - Every refused document yields at least one error; the result is either
//!   every document or the errors — never a partial batch.
//! - The YAML limits of [`crate::limits`] (file and document size, nesting
//!   depth, alias expansion) hold on every path: a file past one is a
//!   positioned error, never a stack overflow or an unbounded expansion.
//!
//! # Caveats
//! - serde stops at the first type error inside a document, so one document
//!   reports at most one typing error (plus the structural checks made
//!   before typing: kind, apiVersion, status, server-set metadata).
//! - After a YAML syntax error, or past a YAML limit, the rest of the file
//!   is not read.
//! - Merge keys (`<<`) are not expanded; anchors and aliases are.

mod budget;
mod positions;
mod scalar;
pub mod substitute;
mod typing;
mod yaml;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::Value;

use crate::error::ManifestError;
use crate::kinds::Manifest;
pub use positions::{render_path, split_path, Position, Segment};
use positions::{Locator, Pos};

/// One manifest read from a file, with the positions of its fields.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file label given to the loader (one per file, shared by its
    /// documents).
    pub file: Arc<str>,
    /// 0-based index of the document in its file.
    pub index: usize,
    /// The typed object (never with a `status` when it came from the
    /// loader).
    pub manifest: Manifest,
    root: Positions,
    /// The top-level `spec` keys as written (before defaults were
    /// filled in), one per line: the fields an applier names (managed
    /// fields). One allocation per document.
    spec_keys: Box<str>,
}

/// The top-level keys of a document's `spec` as written.
fn spec_keys_of(value: &Value) -> Box<str> {
    match value.get("spec").and_then(Value::as_object) {
        Some(spec) => spec
            .keys()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
            .into(),
        None => "".into(),
    }
}

/// Where a document's positions come from.
#[derive(Debug, Clone)]
enum Positions {
    /// Not from YAML text: errors carry no line or column.
    None,
    /// The position tree, built while loading.
    Tree(Pos),
    /// Loaded by the fast read: the file is read again, with positions,
    /// the first time an error about one of its documents needs them.
    Lazy(Arc<Source>),
}

/// A file loaded by the fast read, kept for positioning later errors.
struct Source {
    file: String,
    /// Shared with the caller where it can be ([`parse_documents_shared`]):
    /// apply's request holds the text already.
    text: Arc<str>,
    roots: OnceLock<HashMap<usize, Pos>>,
}

impl Source {
    fn root(&self, index: usize) -> Option<&Pos> {
        self.roots
            .get_or_init(|| {
                yaml::read_positioned(&self.file, &self.text)
                    .docs
                    .into_iter()
                    .map(|d| (d.index, d.positions))
                    .collect()
            })
            .get(&index)
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Source")
            .field("file", &self.file)
            .field("bytes", &self.text.len())
            .field("positioned", &self.roots.get().is_some())
            .finish()
    }
}

impl Document {
    /// A document that did not come from YAML text (errors about it carry
    /// no line or column).
    pub fn from_manifest(file: &str, index: usize, manifest: Manifest) -> Document {
        let spec_keys = spec_keys_of(&serde_json::json!({ "spec": manifest.spec_json() }));
        Document {
            file: file.into(),
            index,
            manifest,
            root: Positions::None,
            spec_keys,
        }
    }

    /// The top-level `spec` fields the document wrote (a field left to
    /// its default is not among them).
    pub fn spec_fields(&self) -> impl Iterator<Item = &str> {
        self.spec_keys.split('\n').filter(|k| !k.is_empty())
    }

    /// This document holding another manifest (the same object with
    /// fields merged in, say): errors about it keep this document's file
    /// and positions.
    pub fn with_manifest(&self, manifest: Manifest) -> Document {
        Document {
            file: self.file.clone(),
            index: self.index,
            manifest,
            root: self.root.clone(),
            spec_keys: self.spec_keys.clone(),
        }
    }

    /// Where a field is (see [`ManifestError`] for what position a path
    /// names); unknown positions are `0:0`.
    pub fn locate(&self, path: &str) -> Position {
        self.locator().locate(&split_path(path), false)
    }

    fn locator(&self) -> Locator<'_> {
        Locator {
            file: &self.file,
            index: self.index,
            paths: true,
            root: match &self.root {
                Positions::None => None,
                Positions::Tree(pos) => Some(pos),
                Positions::Lazy(source) => source.root(self.index),
            },
        }
    }

    /// An error about the field at `path` (`spec.parent`) of this document.
    pub fn error_at(&self, path: &str, message: impl Into<String>) -> ManifestError {
        self.locator().error_at(path, message)
    }

    /// Like [`Document::error_at`], for paths whose keys contain dots.
    pub fn error_at_segments(&self, path: &[Segment], message: impl Into<String>) -> ManifestError {
        self.locator().error_at_segments(path, message)
    }
}

/// Parses every YAML document of `text` into JSON values, skipping empty
/// documents; returns `(document index, value)` pairs. For callers that
/// need the raw objects (diffs, schema checks).
pub fn parse_values(
    file_label: &str,
    text: &str,
) -> Result<Vec<(usize, Value)>, Vec<ManifestError>> {
    let mut values = Vec::new();
    if yaml::read_fast_each(text, &mut |index, value| {
        values.push((index, value));
        true
    }) {
        return Ok(values);
    }
    let read = yaml::read_positioned(file_label, text);
    let mut errors = read.errors;
    let mut out = Vec::new();
    for doc in read.docs {
        errors.extend(doc.problems);
        out.push((doc.index, doc.value));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Types one object given as JSON (an API request's `objects`, a Run that
/// `pamctl run start` builds) with exactly the rules of a document read
/// from a file: the structural checks, typing, and the per-document rules
/// (an exec run needs a command, …). One validation for both paths; errors
/// carry no line or column.
pub fn document_from_value(
    file_label: &str,
    index: usize,
    value: Value,
) -> Result<Document, Vec<ManifestError>> {
    let locator = Locator {
        file: file_label,
        index,
        root: None,
        paths: true,
    };
    if crate::limits::too_deep(&value) {
        return Err(vec![locator.error_at("", crate::limits::too_deep_message())]);
    }
    let spec_keys = spec_keys_of(&value);
    let doc = Document {
        file: file_label.into(),
        index,
        manifest: typing::type_document(&locator, value)?,
        root: Positions::None,
        spec_keys,
    };
    let problems = typing::check_document(&doc);
    if problems.is_empty() {
        Ok(doc)
    } else {
        Err(problems)
    }
}

/// Parses a (multi-document) YAML file into typed manifests.
///
/// `file_label` is only used in errors. Empty and comment-only documents
/// are skipped. Either every document parses and is well-formed on its own,
/// or every error found is returned; cross-document rules are
/// [`crate::validate::validate_batch`]'s.
pub fn parse_documents(file_label: &str, text: &str) -> Result<Vec<Document>, Vec<ManifestError>> {
    parse_documents_shared(file_label, text.into())
}

/// [`parse_documents`] of a text the caller shares: the documents keep
/// it (for positioning later errors) without a copy.
pub fn parse_documents_shared(
    file_label: &str,
    text: Arc<str>,
) -> Result<Vec<Document>, Vec<ManifestError>> {
    match parse_documents_fast(file_label, text.clone(), false) {
        Some(docs) => {
            let mut docs: Vec<Document> = docs.into_iter().map(|(d, _)| d).collect();
            docs.shrink_to_fit();
            Ok(docs)
        }
        None => parse_documents_positioned(file_label, &text),
    }
}

/// [`parse_documents`] with each document's value as written (before
/// typing), for callers that keep what a manifest declares (a GitOps
/// Source's field ownership): one read of the text where both are well
/// formed, else the positioned load's errors.
pub fn parse_documents_and_values(
    file_label: &str,
    text: &str,
) -> Result<Vec<(Document, Value)>, Vec<ManifestError>> {
    if let Some(docs) = parse_documents_fast(file_label, text.into(), true) {
        return Ok(docs
            .into_iter()
            .map(|(d, v)| (d, v.unwrap_or(Value::Null)))
            .collect());
    }
    let docs = parse_documents_positioned(file_label, text)?;
    let mut values: std::collections::HashMap<usize, Value> =
        parse_values(file_label, text)?.into_iter().collect();
    Ok(docs
        .into_iter()
        .map(|d| {
            let v = values.remove(&d.index).unwrap_or(Value::Null);
            (d, v)
        })
        .collect())
}

/// [`parse_documents_and_values`] of a Source with `spec.substitute`:
/// `vars` substituted in every string scalar of each document
/// before it is typed ([`substitute`]); the values returned are the
/// substituted ones (what the Source declares). Always the positioned
/// read, so an unset variable is an error at its line.
pub fn parse_documents_and_values_substituted(
    file_label: &str,
    text: &str,
    vars: &substitute::Vars,
) -> Result<Vec<(Document, Value)>, Vec<ManifestError>> {
    positioned(file_label, text, Some(vars))
}

/// The fast read, then typing, with no positions. `None` at the first
/// problem of any kind — the caller then loads the file again with
/// positions, which finds and words every error (so errors are exactly
/// those of the positioned load). Documents keep the text: positions for
/// later errors (batch rules) are read once per file, on first need.
/// `keep_values`: each document also comes with its value before typing.
fn parse_documents_fast(
    file_label: &str,
    text: Arc<str>,
    keep_values: bool,
) -> Option<Vec<(Document, Option<Value>)>> {
    let source = Arc::new(Source {
        file: file_label.to_string(),
        text,
        roots: OnceLock::new(),
    });
    let file: Arc<str> = file_label.into();
    let mut docs = Vec::new();
    // Each document typed as soon as it is read: its value is dropped
    // before the next one is built.
    let mut each = |index: usize, value: Value| {
        let locator = Locator {
            file: file_label,
            index,
            root: None,
            paths: false,
        };
        let kept = keep_values.then(|| value.clone());
        let spec_keys = spec_keys_of(&value);
        let Ok(manifest) = typing::type_document(&locator, value) else {
            return false;
        };
        let mut doc = Document {
            file: file.clone(),
            index,
            manifest,
            root: Positions::None,
            spec_keys,
        };
        // Checked before the positions are attached: a problem here means
        // the positioned load, not a lazy read of positions first.
        if !typing::check_document(&doc).is_empty() {
            return false;
        }
        doc.root = Positions::Lazy(source.clone());
        docs.push((doc, kept));
        true
    };
    if !yaml::read_fast_each(&source.text, &mut each) {
        return None;
    }
    docs.shrink_to_fit();
    Some(docs)
}

/// The positioned load: every error, named and positioned.
fn parse_documents_positioned(
    file_label: &str,
    text: &str,
) -> Result<Vec<Document>, Vec<ManifestError>> {
    positioned(file_label, text, None).map(|docs| docs.into_iter().map(|(d, _)| d).collect())
}

/// The positioned read and typing, with each document's value as it was
/// typed — after `vars` were substituted into it, when given.
fn positioned(
    file_label: &str,
    text: &str,
    vars: Option<&substitute::Vars>,
) -> Result<Vec<(Document, Value)>, Vec<ManifestError>> {
    let read = yaml::read_positioned(file_label, text);
    let mut errors = read.errors;
    let mut docs = Vec::new();
    let file: Arc<str> = file_label.into();
    for tree in read.docs {
        if !tree.problems.is_empty() {
            errors.extend(tree.problems);
            continue;
        }
        let locator = Locator {
            file: file_label,
            index: tree.index,
            root: Some(&tree.positions),
            paths: true,
        };
        let mut value = tree.value;
        let mut used = Vec::new();
        if let Some(vars) = vars {
            let done = substitute::substitute_recording(&mut value, vars);
            if !done.problems.is_empty() {
                errors.extend(
                    done.problems
                        .into_iter()
                        .map(|(path, why)| locator.error_at(&path, why)),
                );
                continue;
            }
            used = done.used;
        }
        // What typing and the field checks say of this document, with no
        // substituted value in it.
        let hidden = |mut problems: Vec<ManifestError>| {
            for e in &mut problems {
                if let Some(m) = substitute::hide_values(&e.path, &e.message, &used) {
                    e.message = m;
                }
            }
            problems
        };
        // Kept only where asked for: a plain load types the value alone.
        let kept = if vars.is_some() {
            value.clone()
        } else {
            Value::Null
        };
        let spec_keys = spec_keys_of(&value);
        match typing::type_document(&locator, value) {
            Ok(manifest) => {
                let doc = Document {
                    file: file.clone(),
                    index: tree.index,
                    manifest,
                    root: Positions::Tree(tree.positions),
                    spec_keys,
                };
                let problems = typing::check_document(&doc);
                if problems.is_empty() {
                    docs.push((doc, kept));
                } else {
                    errors.extend(hidden(problems));
                }
            }
            Err(e) => errors.extend(hidden(e)),
        }
    }
    if errors.is_empty() {
        Ok(docs)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_expand_and_yaml_1_1_booleans_stay_strings() {
        let text = "apiVersion: pam.dev/v1\nkind: Host\nmetadata:\n  name: h1\n  labels: &l {enabled: yes}\nspec:\n  platform: linux\n  labels: *l\n";
        let docs = parse_documents("h.yaml", text).unwrap();
        let Manifest::Host(h) = &docs[0].manifest else {
            panic!("not a host")
        };
        assert_eq!(h.spec.labels, h.metadata.labels);
        assert_eq!(h.spec.labels.values().next().unwrap().as_str(), "yes");
        assert_eq!(
            docs[0].locate("spec.platform"),
            Position {
                line: 7,
                column: 13
            }
        );
    }

    #[test]
    fn fast_and_positioned_loaders_agree() {
        let text = "# c\n---\napiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {displayName: \"Web\"}\n---\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: a\n  project: web\n  labels: &l {tier: '1'}\nspec:\n  title: A\n  sortOrder: 3\n  parent: b\n";
        let fast: Vec<Document> = parse_documents_fast("f.yaml", text.into(), false)
            .expect("fast path")
            .into_iter()
            .map(|(d, v)| {
                assert!(v.is_none(), "values only when asked for");
                d
            })
            .collect();
        let slow = parse_documents_positioned("f.yaml", text).unwrap();
        assert_eq!(fast.len(), 2);
        for (f, s) in fast.iter().zip(&slow) {
            assert!(matches!(f.root, Positions::Lazy(_)));
            assert_eq!((f.index, &f.manifest), (s.index, &s.manifest));
            for path in [
                "",
                "kind",
                "metadata.name",
                "metadata.labels.tier",
                "spec.parent",
                "spec.nope",
            ] {
                assert_eq!(f.locate(path), s.locate(path), "{path}");
            }
            assert_eq!(
                f.error_at("spec.parent", "m").to_string(),
                s.error_at("spec.parent", "m").to_string()
            );
        }
        // Any problem: the fast path gives up (and the positioned loader words it).
        for bad in [
            "kind: Project\nkind: Task\n",
            "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {}\nstatus: {}\n",
            "apiVersion: pam.dev/v1\nkind: Nope\n",
            "a: [1, 2\n",
            "? [a]\n: b\n",
            "a: *nope\n",
        ] {
            assert!(
                parse_documents_fast("f.yaml", bad.into(), true).is_none(),
                "{bad}"
            );
            assert!(parse_documents("f.yaml", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn paths_split_and_render() {
        let p = split_path("spec.command[2].x");
        assert_eq!(render_path(&p), "spec.command[2].x");
        assert_eq!(p[2], Segment::Index(2));
    }
}

/// Which files of a directory are manifests — the one rule of `pamctl
/// apply -f DIR [-R]` and a directory or git Source (they used
/// to differ): `*.yaml`, `*.yml` and `*.json`, leaving out hidden files and
/// anything under a hidden directory. `rel` is the path below the
/// directory read, `/`-separated.
pub fn is_manifest_file(rel: &str) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    !rel.split('/').any(is_hidden)
        && (name.ends_with(".yaml") || name.ends_with(".yml") || name.ends_with(".json"))
}

/// A hidden file or directory name (`.git`, `.tmp-x.yaml`): never read as
/// a manifest, never walked into.
pub fn is_hidden(name: &str) -> bool {
    name.starts_with('.')
}

#[cfg(test)]
mod manifest_files {
    use super::is_manifest_file;

    #[test]
    fn yaml_yml_and_json_not_hidden() {
        for yes in ["a.yaml", "b.yml", "c.json", "sub/d.yaml"] {
            assert!(is_manifest_file(yes), "{yes}");
        }
        for no in [
            "notes.txt",
            ".e.yaml",
            "sub/.f.yml",
            ".git/g.yaml",
            "a/.b/c.json",
            "yaml",
        ] {
            assert!(!is_manifest_file(no), "{no}");
        }
    }
}
