//! Where things are in a YAML document: positions, field paths, the
//! position tree the positioned read builds, and [`Locator`], which turns a
//! field path into a positioned [`ManifestError`].

use crate::error::ManifestError;

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
/// [`super::Document::error_at_segments`] for label keys).
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

/// Where a parser span starts (1-based line and column).
pub(super) fn position(span: &saphyr_parser::Span) -> Position {
    Position {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

/// Where a node of a document starts, and where its children are: the
/// shape of the document without its values.
#[derive(Debug, Clone)]
pub(super) struct Pos {
    pub(super) at: Position,
    /// Where its children are; `None` for a scalar, and for anything in
    /// the fast read (boxed: a leaf costs nothing to make or drop).
    pub(super) body: Option<Box<PosBody>>,
}

#[derive(Debug, Clone)]
pub(super) enum PosBody {
    /// A sequence's items.
    Seq(Vec<Pos>),
    /// A mapping's entries: key text, where the key starts, the value. Only
    /// the first of duplicate keys, and only scalar keys, are kept.
    Map(Vec<(String, Position, Pos)>),
}

impl Pos {
    pub(super) fn leaf(at: Position) -> Pos {
        Pos { at, body: None }
    }

    /// Where `path` is: a scalar's or sequence's own position, a mapping's
    /// key (the line of `spec:`), or the key itself when `key` is asked for
    /// (an unknown field). A path that does not exist resolves to its
    /// deepest existing prefix.
    fn locate(&self, path: &[Segment], key: bool) -> Position {
        let mut node = self;
        let mut key_at = self.at;
        for seg in path {
            let next = match (seg, node.body.as_deref()) {
                (Segment::Key(k), Some(PosBody::Map(entries))) => entries
                    .iter()
                    .find(|(text, _, _)| text == k)
                    .map(|(_, at, value)| (*at, value)),
                (Segment::Index(i), Some(PosBody::Seq(items))) => items.get(*i).map(|v| (v.at, v)),
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
        match node.body.as_deref() {
            _ if key => key_at,
            Some(PosBody::Map(_)) => key_at,
            None | Some(PosBody::Seq(_)) => node.at,
        }
    }
}

/// Turns field paths of one document into positioned errors.
pub(super) struct Locator<'a> {
    pub(super) file: &'a str,
    pub(super) index: usize,
    /// The document's positions; `None` when unknown (errors carry no line
    /// or column).
    pub(super) root: Option<&'a Pos>,
    /// Whether typing errors name the field serde was at. Only the fast
    /// load leaves it off (it only needs to know that typing failed, and
    /// tracking the path costs a sixth of a load); JSON objects have no
    /// positions but still name the field.
    pub(super) paths: bool,
}

impl Locator<'_> {
    pub(super) fn locate(&self, path: &[Segment], key: bool) -> Position {
        self.root
            .map_or(Position::default(), |r| r.locate(path, key))
    }

    pub(super) fn error_at(&self, path: &str, message: impl Into<String>) -> ManifestError {
        self.error_at_segments(&split_path(path), message)
    }

    pub(super) fn error_at_segments(
        &self,
        path: &[Segment],
        message: impl Into<String>,
    ) -> ManifestError {
        self.error_at_position(path, self.locate(path, false), message)
    }

    /// An error pointing at the key of the last path segment.
    pub(super) fn error_at_key(
        &self,
        path: &[Segment],
        message: impl Into<String>,
    ) -> ManifestError {
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
