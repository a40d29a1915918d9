//! YAML text → JSON values, one per document: the one reader of both
//! loads.
//!
//! The text is parsed with an event parser (`saphyr-parser`, YAML 1.2) and
//! the events are turned straight into `serde_json` values (YAML 1.2 core
//! schema scalars: `yes`/`no` stay strings). The reader runs in one of two
//! modes:
//!
//! - **fast** ([`read_fast`]): values only; at the first problem of any kind
//!   it gives up, so good input pays for nothing else;
//! - **positioned** ([`read_positioned`]): also a [`Pos`] tree (where every
//!   key and value starts), and every problem is recorded, worded and
//!   positioned, and reading goes on where it can.
//!
//! Both modes enforce the limits of [`crate::limits`] as they read, so no
//! later step (JSON conversion, serde, dropping a value) meets a tree deeper
//! than [`NESTING_MAX_DEPTH`] or an alias expansion past its budget.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, StrInput};
use serde_json::Value;

use super::budget::{Budget, Exceeded};
use super::positions::{position, render_path, Pos, PosBody, Position, Segment};
use super::scalar::{is_null, scalar_value};
use crate::error::ManifestError;
use crate::limits::{too_deep_message, NESTING_MAX_DEPTH};

/// One non-empty document as read.
pub(super) struct Tree {
    /// 0-based index of the document in its file.
    pub(super) index: usize,
    pub(super) value: Value,
    /// Its positions (a bare leaf in the fast read).
    pub(super) positions: Pos,
    /// Its own problems (duplicate or non-scalar keys), in document order.
    pub(super) problems: Vec<ManifestError>,
}

/// What the positioned read found.
pub(super) struct Read {
    /// The non-empty documents read, in file order.
    pub(super) docs: Vec<Tree>,
    /// Problems of the file as YAML (syntax, aliases, limits), in file
    /// order; reported before any document's own problems.
    pub(super) errors: Vec<ManifestError>,
}

/// The fast read, handing each non-empty document's `(index, value)` to
/// `each` as soon as it is read (so a big file's values are never all
/// alive at once); `false` when it gave up, at the first problem
/// of any kind or when `each` returns `false`.
pub(super) fn read_fast_each(text: &str, each: &mut dyn FnMut(usize, Value) -> bool) -> bool {
    let mut reader = Reader::new("", text, false);
    reader.each = Some(each);
    reader.run().is_ok()
}

/// The positioned read: every document with its positions, and every
/// problem worded and positioned.
pub(super) fn read_positioned(file: &str, text: &str) -> Read {
    match Reader::new(file, text, true).run() {
        Ok(read) => read,
        Err(GaveUp) => unreachable!("a positioned read records problems, it never gives up"),
    }
}

/// Why reading ended early.
enum Halt {
    /// Fast mode met a problem: read the text again, positioned.
    GiveUp,
    /// Positioned mode met a problem after which the rest of the file
    /// cannot be read (syntax, a limit); it is recorded.
    Stop,
}

/// The fast read gave up.
struct GaveUp;

/// A finished node, on its way into its parent.
struct Node {
    value: Value,
    positions: Pos,
    /// Nodes in it, itself included (for the alias budget).
    nodes: usize,
    /// A plain null scalar: as a document's root, an empty document.
    null: bool,
}

/// A problem of a document, found under a refused key or not.
struct Problem {
    at: Position,
    path: Vec<Segment>,
    message: &'static str,
    /// The stack index of the deepest refused node above it (see
    /// [`Frame::refused`]); `None`: reported.
    refused: Option<usize>,
}

/// An anchored node, kept for its aliases.
struct Anchor {
    value: Value,
    positions: Pos,
    nodes: usize,
    /// A scalar's text, for an alias used as a key.
    key: Option<String>,
    /// The problems inside it that are not under a refused key within it,
    /// paths relative to it: each alias reports them again under its own
    /// path, as a copy of the node would.
    problems: Vec<(Position, Vec<Segment>, &'static str)>,
}

/// What the next node of a mapping is.
enum Key {
    /// The value of this key (its text and where it starts).
    Text(String, Position),
    /// The value of a key already in the mapping: read, reported as a
    /// duplicate, dropped.
    Duplicate(String, Position),
    /// The value of a mapping or sequence used as a key (where it starts):
    /// read, reported, dropped.
    NotScalar(Position),
}

/// A mapping or sequence being read.
struct Frame {
    at: Position,
    anchor: usize,
    /// Nodes inside so far.
    nodes: usize,
    /// The stack index of the deepest refused node (a non-scalar key, or
    /// the value of a refused key) at or above this one, if any. The
    /// problems below a refused node are not reported: nothing below it is
    /// kept, and the refusal is the problem.
    refused: Option<usize>,
    /// The length of its field path, and how many problems the document
    /// had when it started (the ones after are inside it).
    path_len: usize,
    problems_from: usize,
    body: FrameBody,
}

enum FrameBody {
    Seq(Vec<Value>, Vec<Pos>),
    /// Entries, their positions, and the pending key (`None`: the next
    /// node is a key).
    Map(
        serde_json::Map<String, Value>,
        Vec<(String, Position, Pos)>,
        Option<Key>,
    ),
}

struct Reader<'a> {
    file: &'a str,
    positioned: bool,
    parser: Parser<'a, StrInput<'a>>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchor>,
    /// The document being read: its index, root and own problems.
    index: Option<usize>,
    root: Option<Node>,
    problems: Vec<Problem>,
    docs: Vec<Tree>,
    errors: Vec<ManifestError>,
    budget: Budget<'a>,
    /// Fast mode: where each document goes when read, instead of `docs`.
    each: Option<&'a mut dyn FnMut(usize, Value) -> bool>,
}

impl<'a> Reader<'a> {
    fn new(file: &'a str, text: &'a str, positioned: bool) -> Reader<'a> {
        Reader {
            file,
            positioned,
            parser: Parser::new_from_str(text),
            stack: Vec::new(),
            anchors: HashMap::new(),
            index: None,
            root: None,
            problems: Vec::new(),
            docs: Vec::new(),
            errors: Vec::new(),
            budget: Budget::new(text),
            each: None,
        }
    }

    fn run(mut self) -> Result<Read, GaveUp> {
        let outcome = match self.budget.file() {
            Ok(()) => self.events(),
            Err(exceeded) => self.exceeded(exceeded),
        };
        match outcome {
            Ok(()) | Err(Halt::Stop) => Ok(Read {
                docs: self.docs,
                errors: self.errors,
            }),
            Err(Halt::GiveUp) => Err(GaveUp),
        }
    }

    fn events(&mut self) -> Result<(), Halt> {
        while let Some(next) = self.parser.next_event() {
            let (event, span) = match next {
                Ok(e) => e,
                Err(e) => {
                    let at = Position {
                        line: e.marker().line(),
                        column: e.marker().col() + 1,
                    };
                    return self.fatal(at, format!("invalid YAML: {}", e.info()));
                }
            };
            if let Err(exceeded) = self.budget.event(&span) {
                return self.exceeded(exceeded);
            }
            self.event(event, &span)?;
        }
        Ok(())
    }

    fn event(&mut self, event: Event<'a>, span: &Span) -> Result<(), Halt> {
        let at = position(span);
        match event {
            Event::DocumentStart(_) => {
                self.budget.document_start(span, at);
                self.index = Some(self.index.map_or(0, |i| i + 1));
                self.root = None;
                self.anchors.clear();
                self.problems.clear();
                Ok(())
            }
            Event::DocumentEnd => match self.budget.document_end() {
                Ok(()) => self.end_document(),
                Err(exceeded) => self.exceeded(exceeded),
            },
            Event::Scalar(text, style, anchor, tag) => {
                self.budget.written();
                let plain = style == ScalarStyle::Plain;
                let str_tag = tag
                    .as_ref()
                    .is_some_and(|t| t.is_yaml_core_schema() && t.suffix == "str");
                if anchor != 0 {
                    self.anchors.insert(
                        anchor,
                        Anchor {
                            value: scalar_value(text.clone(), plain, str_tag),
                            positions: Pos::leaf(at),
                            nodes: 1,
                            key: Some(text.to_string()),
                            problems: Vec::new(),
                        },
                    );
                }
                if self.expects_key() {
                    // A key: its text, whatever its style.
                    return self.key(text.into_owned(), at);
                }
                let null = plain && is_null(&text);
                self.add(Node {
                    value: scalar_value(text, plain, str_tag),
                    positions: Pos::leaf(at),
                    nodes: 1,
                    null,
                })
            }
            Event::Alias(id) => self.alias(id, at),
            Event::SequenceStart(anchor, _) => {
                self.start(at, anchor, FrameBody::Seq(Vec::new(), Vec::new()))
            }
            Event::MappingStart(anchor, _) => self.start(
                at,
                anchor,
                FrameBody::Map(serde_json::Map::new(), Vec::new(), None),
            ),
            Event::SequenceEnd | Event::MappingEnd => self.end(),
            Event::StreamStart | Event::StreamEnd | Event::Nothing => Ok(()),
        }
    }

    /// Whether the next node is a mapping's key.
    fn expects_key(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame {
                body: FrameBody::Map(_, _, None),
                ..
            })
        )
    }

    /// [`Frame::refused`] for the next node.
    fn next_refused(&self) -> Option<usize> {
        let top = self.stack.last()?;
        match top.body {
            FrameBody::Map(_, _, None | Some(Key::Duplicate(..) | Key::NotScalar(_))) => {
                Some(self.stack.len())
            }
            _ => top.refused,
        }
    }

    /// A mapping or sequence starts.
    fn start(&mut self, at: Position, anchor: usize, body: FrameBody) -> Result<(), Halt> {
        self.budget.written();
        if self.stack.len() >= NESTING_MAX_DEPTH {
            return self.fatal(at, too_deep_message());
        }
        if self.expects_key() && !self.positioned {
            return Err(Halt::GiveUp);
        }
        let path_len = if self.positioned {
            self.path(true).len()
        } else {
            0
        };
        self.stack.push(Frame {
            at,
            anchor,
            nodes: 0,
            refused: self.next_refused(),
            path_len,
            problems_from: self.problems.len(),
            body,
        });
        Ok(())
    }

    /// A mapping or sequence ends.
    fn end(&mut self) -> Result<(), Halt> {
        let Some(frame) = self.stack.pop() else {
            return Ok(());
        };
        let positioned = self.positioned;
        let (value, body) = match frame.body {
            FrameBody::Seq(items, positions) => (
                Value::Array(items),
                positioned.then_some(PosBody::Seq(positions)),
            ),
            FrameBody::Map(map, positions, _) => (
                Value::Object(map),
                positioned.then_some(PosBody::Map(positions)),
            ),
        };
        let positions = Pos {
            at: frame.at,
            body: body.map(Box::new),
        };
        let nodes = frame.nodes + 1;
        if frame.anchor != 0 {
            // Problems under a refused node inside the anchored one are not
            // its own (a copy of it would not report them either).
            let own = self.stack.len();
            let problems = self.problems[frame.problems_from..]
                .iter()
                .filter(|p| p.refused.is_none_or(|r| r <= own))
                .map(|p| (p.at, p.path[frame.path_len..].to_vec(), p.message))
                .collect();
            self.anchors.insert(
                frame.anchor,
                Anchor {
                    value: value.clone(),
                    positions: positions.clone(),
                    nodes,
                    key: None,
                    problems,
                },
            );
        }
        if self.expects_key() {
            // A mapping or sequence as a key: what follows is its value.
            self.set_pending(Key::NotScalar(frame.at));
            return Ok(());
        }
        self.add(Node {
            value,
            positions,
            nodes,
            null: false,
        })
    }

    /// An alias: a copy of its anchor's node, within the alias budget.
    fn alias(&mut self, id: usize, at: Position) -> Result<(), Halt> {
        let Some(nodes) = self.anchors.get(&id).map(|a| a.nodes) else {
            // The parser knows every anchor name it met; an anchor whose
            // node is not finished yet (`&a [*a]`) is not ours yet.
            return self.file_error(at, "unknown alias, expected an anchor defined earlier");
        };
        if let Err(exceeded) = self.budget.alias(nodes, at) {
            return self.exceeded(exceeded);
        }
        let anchor = &self.anchors[&id];
        if self.expects_key() {
            return match anchor.key.clone() {
                Some(text) => self.key(text, at),
                None if self.positioned => {
                    self.set_pending(Key::NotScalar(at));
                    Ok(())
                }
                None => Err(Halt::GiveUp),
            };
        }
        if !anchor.problems.is_empty() {
            let base = self.path(true);
            let refused = self.next_refused();
            let again: Vec<Problem> = anchor
                .problems
                .iter()
                .map(|(at, path, message)| Problem {
                    at: *at,
                    path: [&base[..], path].concat(),
                    message,
                    refused,
                })
                .collect();
            self.problems.extend(again);
        }
        let anchor = &self.anchors[&id];
        let node = Node {
            value: anchor.value.clone(),
            positions: Pos {
                at,
                body: anchor.positions.body.clone(),
            },
            nodes: anchor.nodes,
            null: false,
        };
        self.add(node)
    }

    /// A scalar key of the mapping on top of the stack.
    fn key(&mut self, mut text: String, at: Position) -> Result<(), Halt> {
        text.shrink_to_fit(); // the parser's spare capacity: a label key is kept
        let Some(Frame {
            body: FrameBody::Map(map, _, pending),
            ..
        }) = self.stack.last_mut()
        else {
            return Ok(());
        };
        *pending = Some(if !map.contains_key(&text) {
            Key::Text(text, at)
        } else if self.positioned {
            Key::Duplicate(text, at)
        } else {
            return Err(Halt::GiveUp);
        });
        Ok(())
    }

    fn set_pending(&mut self, key: Key) {
        if let Some(Frame {
            body: FrameBody::Map(_, _, pending),
            ..
        }) = self.stack.last_mut()
        {
            *pending = Some(key);
        }
    }

    /// Puts a finished node into its parent (or makes it the root). A
    /// refused key is reported when its value is complete, as a key
    /// without a value is not an entry.
    fn add(&mut self, node: Node) -> Result<(), Halt> {
        let Some(frame) = self.stack.last_mut() else {
            self.root = Some(node);
            return Ok(());
        };
        frame.nodes += node.nodes;
        let refused = frame.refused;
        let problem = match &mut frame.body {
            FrameBody::Seq(items, positions) => {
                items.push(node.value);
                if self.positioned {
                    positions.push(node.positions);
                }
                None
            }
            FrameBody::Map(map, positions, pending) => match pending.take() {
                Some(Key::Text(key, key_at)) => {
                    if self.positioned {
                        positions.push((key.clone(), key_at, node.positions));
                    }
                    map.insert(key, node.value);
                    None
                }
                Some(Key::Duplicate(key, at)) => Some((
                    at,
                    Some(key),
                    "duplicate key, expected each key once per mapping",
                )),
                Some(Key::NotScalar(at)) => Some((
                    at,
                    None,
                    "a key must be a plain scalar, expected a field name",
                )),
                // Not reached: a key is never added as a node.
                None => None,
            },
        };
        if let Some((at, key, message)) = problem {
            let mut path = self.path(false);
            path.extend(key.map(Segment::Key));
            self.problems.push(Problem {
                at,
                path,
                message,
                refused,
            });
        }
        Ok(())
    }

    fn end_document(&mut self) -> Result<(), Halt> {
        let Some(root) = self.root.take() else {
            return Ok(());
        };
        if root.null {
            return Ok(());
        }
        let problems = std::mem::take(&mut self.problems)
            .into_iter()
            .filter(|p| p.refused.is_none())
            .map(|p| self.error(p.at, &p.path, p.message))
            .collect();
        if let Some(each) = self.each.as_mut() {
            let index = self.index.unwrap_or(0);
            return each(index, root.value).then_some(()).ok_or(Halt::GiveUp);
        }
        self.docs.push(Tree {
            index: self.index.unwrap_or(0),
            value: root.value,
            positions: root.positions,
            problems,
        });
        Ok(())
    }

    /// The field path to the mapping or sequence on top of the stack, or
    /// with `next` to the node that comes next in it: the keys and indexes
    /// of the open mappings and sequences.
    fn path(&self, next: bool) -> Vec<Segment> {
        let frames = if next {
            &self.stack[..]
        } else {
            &self.stack[..self.stack.len().saturating_sub(1)]
        };
        let mut path = Vec::new();
        for frame in frames {
            match &frame.body {
                FrameBody::Seq(items, _) => path.push(Segment::Index(items.len())),
                FrameBody::Map(_, _, Some(Key::Text(key, _) | Key::Duplicate(key, _))) => {
                    path.push(Segment::Key(key.clone()))
                }
                FrameBody::Map(..) => {}
            }
        }
        path
    }

    fn error(&self, at: Position, path: &[Segment], message: impl Into<String>) -> ManifestError {
        ManifestError {
            file: self.file.to_string(),
            document: self.index.unwrap_or(0),
            line: at.line,
            column: at.column,
            path: render_path(path),
            message: message.into(),
        }
    }

    /// A problem of the file as YAML; reading goes on.
    fn file_error(&mut self, at: Position, message: &str) -> Result<(), Halt> {
        if !self.positioned {
            return Err(Halt::GiveUp);
        }
        let e = self.error(at, &[], message);
        self.errors.push(e);
        Ok(())
    }

    /// A problem after which the file is not read further.
    fn fatal(&mut self, at: Position, message: String) -> Result<(), Halt> {
        if !self.positioned {
            return Err(Halt::GiveUp);
        }
        let e = self.error(at, &[], message);
        self.errors.push(e);
        Err(Halt::Stop)
    }

    /// A limit of [`Budget`] passed: the file is not read further.
    fn exceeded(&mut self, (at, message): Exceeded) -> Result<(), Halt> {
        self.fatal(at, message)
    }
}
