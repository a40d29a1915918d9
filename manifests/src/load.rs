//! Positioned YAML loading: text → [`Document`]s, every problem a
//! [`ManifestError`] naming file, document index, line, column, field path
//! and what was expected.
//!
//! The text is parsed with an event parser (`saphyr-parser`, YAML 1.2).
//! A fast path turns the events straight into JSON (YAML 1.2 core-schema
//! scalars: `yes`/`no` stay strings) and typed kinds, with no positions; at
//! the first problem of any kind it gives up and the file is loaded again
//! by the positioned loader: a small tree that remembers where every key
//! and value starts, turned into JSON and deserialized through
//! `serde_path_to_error`, whose field path is looked up in the tree to give
//! the line and column. Errors are therefore always the positioned
//! loader's. A document loaded by the fast path keeps its file's text; an
//! error about it later (batch rules, apply) parses that file's positions
//! once, on first need.
//!
//! # Guarantees
//! - Documents that are empty or hold only comments are skipped, but still
//!   counted: document indexes are those of the file (0-based).
//! - A document with a `status:` block, or with the server-set metadata
//!   `uid`, `generation` or `creationTimestamp`, is refused (see
//!   [`crate::kinds`]); `metadata.resourceVersion` is accepted.
//! - Every refused document yields at least one error; the result is either
//!   every document or the errors — never a partial batch.
//!
//! # Caveats
//! - serde stops at the first type error inside a document, so one document
//!   reports at most one typing error (plus the structural checks made
//!   before typing: kind, apiVersion, status, server-set metadata).
//! - After a YAML syntax error the rest of the file is not read.
//! - Merge keys (`<<`) are not expanded; anchors and aliases are.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use saphyr_parser::{Event, Parser, ScalarStyle, Span};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ManifestError;
use crate::kinds::{Kind, Manifest, Provider, SERVER_SET_METADATA};

/// A 1-based line and column (in characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Position {
    /// 1-based line; 0 = unknown.
    pub line: usize,
    /// 1-based column; 0 = unknown.
    pub column: usize,
}

/// One segment of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Segment {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// Renders segments as `spec.command[0]`.
pub fn render_path(path: &[Segment]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// Splits `spec.command[0]` into segments (keys may not contain `.`; use
/// [`Document::error_at_segments`] for label keys).
pub fn split_path(path: &str) -> Vec<Segment> {
    let mut out = Vec::new();
    for part in path.split('.').filter(|p| !p.is_empty()) {
        let mut rest = part;
        if let Some(open) = rest.find('[') {
            out.push(Segment::Key(rest[..open].to_string()));
            rest = &rest[open..];
            while let Some(close) = rest.find(']') {
                if let Ok(i) = rest[1..close].parse() {
                    out.push(Segment::Index(i));
                }
                rest = &rest[close + 1..];
            }
        } else {
            out.push(Segment::Key(rest.to_string()));
        }
    }
    out
}

/// A parsed YAML node with the position where it starts.
#[derive(Debug, Clone)]
struct Node {
    at: Position,
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    Scalar {
        text: String,
        plain: bool,
        str_tag: bool,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    fn is_empty_document(&self) -> bool {
        matches!(&self.body, Body::Scalar { text, plain: true, .. } if is_null(text))
    }

    /// Where `path` is: a scalar's or sequence's own position, a mapping's
    /// key (the line of `spec:`), or the key itself when `key` is asked for
    /// (an unknown field). A path that does not exist resolves to its
    /// deepest existing prefix.
    fn locate(&self, path: &[Segment], key: bool) -> Position {
        let mut node = self;
        let mut key_at = self.at;
        for seg in path {
            let next = match (seg, &node.body) {
                (Segment::Key(k), Body::Map(entries)) => entries
                    .iter()
                    .find(|(key, _)| matches!(&key.body, Body::Scalar { text, .. } if text == k))
                    .map(|(key, value)| (key.at, value)),
                (Segment::Index(i), Body::Seq(items)) => items.get(*i).map(|v| (v.at, v)),
                _ => None,
            };
            match next {
                Some((at, child)) => {
                    key_at = at;
                    node = child;
                }
                None => return key_at,
            }
        }
        match node.body {
            _ if key => key_at,
            Body::Map(_) => key_at,
            Body::Scalar { .. } | Body::Seq(_) => node.at,
        }
    }
}

fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

/// YAML 1.2 core schema resolution of a plain scalar.
fn resolve_plain(text: &str) -> Value {
    if is_null(text) {
        return Value::Null;
    }
    match text {
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        if let Ok(i) = text.parse::<i64>() {
            return Value::from(i);
        }
        if let Ok(u) = text.trim_start_matches('+').parse::<u64>() {
            return Value::from(u);
        }
    }
    if let Some(oct) = text.strip_prefix("0o") {
        if let Ok(i) = i64::from_str_radix(oct, 8) {
            return Value::from(i);
        }
    }
    if let Some(hex) = text.strip_prefix("0x") {
        if let Ok(i) = i64::from_str_radix(hex, 16) {
            return Value::from(i);
        }
    }
    if is_float(digits) {
        if let Some(n) = text
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
        {
            return Value::Number(n);
        }
    }
    Value::String(text.to_string())
}

/// `(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?` (sign already removed).
fn is_float(s: &str) -> bool {
    let (mantissa, exp) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            int.bytes().all(|b| b.is_ascii_digit())
                && frac.bytes().all(|b| b.is_ascii_digit())
                && !(int.is_empty() && frac.is_empty())
        }
        None => !mantissa.is_empty() && mantissa.bytes().all(|b| b.is_ascii_digit()),
    };
    let exp_ok = exp.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())
    });
    mantissa_ok && exp_ok
}

/// A YAML document that parsed, before typing.
struct RawDocument {
    index: usize,
    root: Node,
}

fn position(span: &Span) -> Position {
    Position {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

/// Builds node trees from parser events, one per document.
fn parse_yaml(file: &str, text: &str) -> (Vec<RawDocument>, Vec<ManifestError>) {
    enum Frame {
        Seq(Position, usize, Vec<Node>),
        Map(Position, usize, Vec<(Node, Node)>, Option<Node>),
    }
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    let mut index: Option<usize> = None;
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut root: Option<Node> = None;
    let mut parser = Parser::new_from_str(text);
    let doc_index = |index: Option<usize>| index.unwrap_or(0);

    while let Some(next) = parser.next_event() {
        let (event, span) = match next {
            Ok(e) => e,
            Err(e) => {
                errors.push(ManifestError {
                    file: file.to_string(),
                    document: doc_index(index),
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                    path: String::new(),
                    message: format!("invalid YAML: {}", e.info()),
                });
                return (docs, errors);
            }
        };
        let at = position(&span);
        let (node, anchor) = match event {
            Event::DocumentStart(_) => {
                index = Some(index.map_or(0, |i| i + 1));
                root = None;
                anchors.clear();
                continue;
            }
            Event::DocumentEnd => {
                if let Some(r) = root.take() {
                    docs.push(RawDocument {
                        index: doc_index(index),
                        root: r,
                    });
                }
                continue;
            }
            Event::Scalar(value, style, anchor, tag) => {
                let str_tag = tag
                    .as_ref()
                    .is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
                let node = Node {
                    at,
                    body: Body::Scalar {
                        text: value.into_owned(),
                        plain: style == ScalarStyle::Plain,
                        str_tag,
                    },
                };
                (node, anchor)
            }
            Event::Alias(id) => match anchors.get(&id) {
                Some(n) => (Node { at, ..n.clone() }, 0),
                None => {
                    errors.push(ManifestError {
                        file: file.to_string(),
                        document: doc_index(index),
                        line: at.line,
                        column: at.column,
                        path: String::new(),
                        message: "unknown alias, expected an anchor defined earlier".into(),
                    });
                    continue;
                }
            },
            Event::SequenceStart(anchor, _) => {
                stack.push(Frame::Seq(at, anchor, Vec::new()));
                continue;
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Frame::Map(at, anchor, Vec::new(), None));
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(at, anchor, items)) => (
                    Node {
                        at,
                        body: Body::Seq(items),
                    },
                    anchor,
                ),
                _ => continue,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(at, anchor, entries, _)) => (
                    Node {
                        at,
                        body: Body::Map(entries),
                    },
                    anchor,
                ),
                _ => continue,
            },
            Event::StreamStart | Event::StreamEnd | Event::Nothing => continue,
        };
        if anchor != 0 {
            anchors.insert(anchor, node.clone());
        }
        match stack.last_mut() {
            Some(Frame::Seq(_, _, items)) => items.push(node),
            Some(Frame::Map(_, _, entries, pending)) => match pending.take() {
                Some(key) => entries.push((key, node)),
                None => *pending = Some(node),
            },
            None => root = Some(node),
        }
    }
    (docs, errors)
}

/// Converts a node tree to JSON; errors name the offending path.
fn to_json(
    node: &Node,
    path: &mut Vec<Segment>,
    out: &mut Vec<(Position, Vec<Segment>, String)>,
) -> Value {
    match &node.body {
        Body::Scalar {
            text,
            plain,
            str_tag,
        } => {
            if *plain && !*str_tag {
                resolve_plain(text)
            } else {
                Value::String(text.clone())
            }
        }
        Body::Seq(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, item)| {
                    path.push(Segment::Index(i));
                    let v = to_json(item, path, out);
                    path.pop();
                    v
                })
                .collect(),
        ),
        Body::Map(entries) => {
            let mut map = serde_json::Map::new();
            for (key, value) in entries {
                let Body::Scalar { text, .. } = &key.body else {
                    out.push((
                        key.at,
                        path.clone(),
                        "a key must be a plain scalar, expected a field name".into(),
                    ));
                    continue;
                };
                path.push(Segment::Key(text.clone()));
                if map.contains_key(text) {
                    out.push((
                        key.at,
                        path.clone(),
                        "duplicate key, expected each key once per mapping".into(),
                    ));
                } else {
                    let v = to_json(value, path, out);
                    map.insert(text.clone(), v);
                }
                path.pop();
            }
            Value::Object(map)
        }
    }
}

/// One manifest read from a file, with the positions of its fields.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file label given to the loader.
    pub file: String,
    /// 0-based index of the document in its file.
    pub index: usize,
    /// The typed object (never with a `status` when it came from the
    /// loader).
    pub manifest: Manifest,
    root: Positions,
}

/// Where a document's positions come from.
#[derive(Debug, Clone)]
enum Positions {
    /// Not from YAML text: errors carry no line or column.
    None,
    /// The positioned tree, built while loading.
    Tree(Node),
    /// Loaded by the fast path: the file is parsed again, with positions,
    /// the first time an error about one of its documents needs them.
    Lazy(Arc<Source>),
}

/// A file loaded by the fast path, kept for positioning later errors.
struct Source {
    file: String,
    text: String,
    roots: OnceLock<HashMap<usize, Node>>,
}

impl Source {
    fn root(&self, index: usize) -> Option<&Node> {
        self.roots
            .get_or_init(|| {
                parse_yaml(&self.file, &self.text)
                    .0
                    .into_iter()
                    .map(|d| (d.index, d.root))
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
        Document {
            file: file.to_string(),
            index,
            manifest,
            root: Positions::None,
        }
    }

    /// Where a field is (see [`ManifestError`] for what position a path
    /// names); unknown positions are `0:0`.
    pub fn locate(&self, path: &str) -> Position {
        self.locate_segments(&split_path(path))
    }

    fn locate_segments(&self, path: &[Segment]) -> Position {
        self.locator().locate(path, false)
    }

    fn locator(&self) -> Locator<'_> {
        Locator {
            file: &self.file,
            index: self.index,
            root: match &self.root {
                Positions::None => None,
                Positions::Tree(node) => Some(node),
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

/// Turns field paths of one document into positioned errors.
struct Locator<'a> {
    file: &'a str,
    index: usize,
    root: Option<&'a Node>,
}

impl Locator<'_> {
    fn locate(&self, path: &[Segment], key: bool) -> Position {
        self.root
            .map_or(Position::default(), |r| r.locate(path, key))
    }

    fn error_at(&self, path: &str, message: impl Into<String>) -> ManifestError {
        self.error_at_segments(&split_path(path), message)
    }

    fn error_at_segments(&self, path: &[Segment], message: impl Into<String>) -> ManifestError {
        self.error_at_position(path, self.locate(path, false), message)
    }

    /// An error pointing at the key of the last path segment.
    fn error_at_key(&self, path: &[Segment], message: impl Into<String>) -> ManifestError {
        self.error_at_position(path, self.locate(path, true), message)
    }

    fn error_at_position(
        &self,
        path: &[Segment],
        at: Position,
        message: impl Into<String>,
    ) -> ManifestError {
        ManifestError {
            file: self.file.to_string(),
            document: self.index,
            line: at.line,
            column: at.column,
            path: render_path(path),
            message: message.into(),
        }
    }
}

/// Parses every YAML document of `text` into JSON values, skipping empty
/// documents; returns `(document index, value)` pairs. For callers that
/// need the raw objects (diffs, schema checks).
pub fn parse_values(
    file_label: &str,
    text: &str,
) -> Result<Vec<(usize, Value)>, Vec<ManifestError>> {
    let (raw, mut errors) = parse_yaml(file_label, text);
    let mut out = Vec::new();
    for doc in raw.iter().filter(|d| !d.root.is_empty_document()) {
        let mut problems = Vec::new();
        let value = to_json(&doc.root, &mut Vec::new(), &mut problems);
        for (at, path, message) in problems {
            errors.push(ManifestError {
                file: file_label.to_string(),
                document: doc.index,
                line: at.line,
                column: at.column,
                path: render_path(&path),
                message,
            });
        }
        out.push((doc.index, value));
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// Parses a (multi-document) YAML file into typed manifests.
///
/// `file_label` is only used in errors. Empty and comment-only documents
/// are skipped. Either every document parses and is well-formed on its own,
/// or every error found is returned; cross-document rules are
/// [`crate::validate::validate_batch`]'s.
pub fn parse_documents(file_label: &str, text: &str) -> Result<Vec<Document>, Vec<ManifestError>> {
    match parse_documents_fast(file_label, text) {
        Some(docs) => Ok(docs),
        None => parse_documents_positioned(file_label, text),
    }
}

/// The fast path: YAML events straight to JSON values and typed manifests,
/// with no position tree. `None` at the first problem of any kind — the
/// caller then loads the file again with positions, which finds and words
/// every error (so errors are exactly those of the positioned loader).
/// Documents keep the text: positions for later errors (batch rules) are
/// parsed once per file, on first need.
fn parse_documents_fast(file_label: &str, text: &str) -> Option<Vec<Document>> {
    let values = parse_values_fast(text)?;
    let source = Arc::new(Source {
        file: file_label.to_string(),
        text: text.to_string(),
        roots: OnceLock::new(),
    });
    let mut docs = Vec::with_capacity(values.len());
    for (index, value) in values {
        let manifest = type_document_fast(value)?;
        let doc = Document {
            file: file_label.to_string(),
            index,
            manifest,
            root: Positions::Lazy(source.clone()),
        };
        if !check_document(&doc).is_empty() {
            return None;
        }
        docs.push(doc);
    }
    Some(docs)
}

/// [`type_document`] for a document that has no problem; `None` when it
/// has any.
fn type_document_fast(value: Value) -> Option<Manifest> {
    let top = value.as_object()?;
    if top.contains_key("status") {
        return None;
    }
    if let Some(meta) = top.get("metadata").and_then(Value::as_object) {
        if SERVER_SET_METADATA.iter().any(|f| meta.contains_key(*f)) {
            return None;
        }
    }
    let kind = Kind::parse(top.get("kind")?.as_str()?)?;
    match kind {
        Kind::Project => serde_json::from_value(value).ok().map(Manifest::Project),
        Kind::Task => serde_json::from_value(value).ok().map(Manifest::Task),
        Kind::Run => serde_json::from_value(value).ok().map(Manifest::Run),
        Kind::Host => serde_json::from_value(value).ok().map(Manifest::Host),
    }
}

/// [`parse_yaml`] then [`to_json`] in one pass without positions, for text
/// with no problem: `(document index, value)` of the non-empty documents,
/// or `None` at the first problem (syntax, unknown alias, duplicate key,
/// non-scalar key, anything unusual).
fn parse_values_fast(text: &str) -> Option<Vec<(usize, Value)>> {
    enum Frame {
        Seq(usize, Vec<Value>),
        Map(usize, serde_json::Map<String, Value>, Option<String>),
    }
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Value> = HashMap::new();
    let mut docs = Vec::new();
    let mut root: Option<Value> = None;
    let mut index: Option<usize> = None;
    while let Some(next) = parser.next_event() {
        let (event, _) = next.ok()?;
        let (value, anchor) = match event {
            Event::DocumentStart(_) => {
                index = Some(index.map_or(0, |i| i + 1));
                root = None;
                anchors.clear();
                continue;
            }
            Event::DocumentEnd => {
                if let Some(r) = root.take() {
                    // A plain null root is an empty document (skipped).
                    if !r.is_null() {
                        docs.push((index.unwrap_or(0), r));
                    }
                }
                continue;
            }
            Event::Scalar(text, style, anchor, tag) => {
                let str_tag = tag
                    .as_ref()
                    .is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
                let resolve = |text: &str| {
                    if style == ScalarStyle::Plain && !str_tag {
                        resolve_plain(text)
                    } else {
                        Value::String(text.to_string())
                    }
                };
                if let Some(Frame::Map(_, _, pending @ None)) = stack.last_mut() {
                    // A key: its text, whatever its style.
                    if anchor != 0 {
                        anchors.insert(anchor, resolve(&text));
                    }
                    *pending = Some(text.into_owned());
                    continue;
                }
                (resolve(&text), anchor)
            }
            Event::Alias(id) => (anchors.get(&id)?.clone(), 0),
            Event::SequenceStart(anchor, _) => {
                stack.push(Frame::Seq(anchor, Vec::new()));
                continue;
            }
            Event::MappingStart(anchor, _) => {
                stack.push(Frame::Map(anchor, serde_json::Map::new(), None));
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(anchor, items)) => (Value::Array(items), anchor),
                _ => return None,
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(anchor, map, None)) => (Value::Object(map), anchor),
                _ => return None,
            },
            Event::StreamStart | Event::StreamEnd | Event::Nothing => continue,
        };
        if anchor != 0 {
            anchors.insert(anchor, value.clone());
        }
        match stack.last_mut() {
            Some(Frame::Seq(_, items)) => items.push(value),
            Some(Frame::Map(_, map, pending)) => {
                // A non-scalar key (pending empty) is the slow path's error.
                let key = pending.take()?;
                if map.contains_key(&key) {
                    return None;
                }
                map.insert(key, value);
            }
            None => root = Some(value),
        }
    }
    Some(docs)
}

/// The positioned loader: every error, named and positioned.
fn parse_documents_positioned(
    file_label: &str,
    text: &str,
) -> Result<Vec<Document>, Vec<ManifestError>> {
    let (raw, mut errors) = parse_yaml(file_label, text);
    let mut docs = Vec::new();
    for doc in raw.into_iter().filter(|d| !d.root.is_empty_document()) {
        let doc_errors_before = errors.len();
        let mut problems = Vec::new();
        let value = to_json(&doc.root, &mut Vec::new(), &mut problems);
        for (at, path, message) in problems {
            errors.push(ManifestError {
                file: file_label.to_string(),
                document: doc.index,
                line: at.line,
                column: at.column,
                path: render_path(&path),
                message,
            });
        }
        if errors.len() > doc_errors_before {
            continue;
        }
        let locator = Locator {
            file: file_label,
            index: doc.index,
            root: Some(&doc.root),
        };
        match type_document(&locator, value) {
            Ok(manifest) => {
                let doc = Document {
                    file: file_label.to_string(),
                    index: doc.index,
                    manifest,
                    root: Positions::Tree(doc.root),
                };
                let problems = check_document(&doc);
                if problems.is_empty() {
                    docs.push(doc);
                } else {
                    errors.extend(problems);
                }
            }
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(docs)
    } else {
        Err(errors)
    }
}

const KINDS_EXPECTED: &str = "one of `Project`, `Task`, `Run`, `Host`";

/// Structural checks, then typing of one document.
fn type_document(doc: &Locator<'_>, mut value: Value) -> Result<Manifest, Vec<ManifestError>> {
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
                format!("missing required field, expected {KINDS_EXPECTED}"),
            ));
            return Err(errors);
        }
        Some(Value::String(s)) => match Kind::parse(s) {
            Some(k) => k,
            None => {
                errors.push(doc.error_at(
                    "kind",
                    format!("unknown kind {s:?}, expected {KINDS_EXPECTED}"),
                ));
                return Err(errors);
            }
        },
        Some(other) => {
            errors.push(doc.error_at(
                "kind",
                format!(
                    "invalid type: {}, expected {KINDS_EXPECTED}",
                    describe(other)
                ),
            ));
            return Err(errors);
        }
    };
    let typed = match kind {
        Kind::Project => typed(doc, value).map(Manifest::Project),
        Kind::Task => typed(doc, value).map(Manifest::Task),
        Kind::Run => typed(doc, value).map(Manifest::Run),
        Kind::Host => typed(doc, value).map(Manifest::Host),
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

fn typed<T: DeserializeOwned>(doc: &Locator<'_>, value: Value) -> Result<T, ManifestError> {
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
fn check_document(doc: &Document) -> Vec<ManifestError> {
    let mut errors = Vec::new();
    if let Manifest::Run(run) = &doc.manifest {
        let spec = &run.spec;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_scalars_resolve_like_yaml_1_2() {
        assert_eq!(resolve_plain("~"), Value::Null);
        assert_eq!(resolve_plain("true"), Value::Bool(true));
        assert_eq!(resolve_plain("yes"), Value::String("yes".into()));
        assert_eq!(resolve_plain("42"), Value::from(42));
        assert_eq!(resolve_plain("-7"), Value::from(-7));
        assert_eq!(resolve_plain("0x1f"), Value::from(31));
        assert_eq!(resolve_plain("1.5"), serde_json::json!(1.5));
        assert_eq!(resolve_plain("1e3"), serde_json::json!(1000.0));
        assert_eq!(resolve_plain("1.2.3"), Value::String("1.2.3".into()));
        assert_eq!(resolve_plain("v1"), Value::String("v1".into()));
    }

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
        let fast = parse_documents_fast("f.yaml", text).expect("fast path");
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
            assert!(parse_documents_fast("f.yaml", bad).is_none(), "{bad}");
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
