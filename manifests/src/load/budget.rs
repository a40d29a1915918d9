//! The size limits a YAML read keeps as it goes ([`crate::limits`]): the
//! file, each document, and the nodes aliases add. (Nesting depth is the
//! reader's own stack: [`super::yaml`].)

use saphyr_parser::Span;

use super::positions::Position;
use crate::limits::{ALIAS_EXPANSION_MAX_NODES, DOCUMENT_MAX_BYTES, FILE_MAX_BYTES};

/// A limit passed: where (the document's start for a document, unknown for
/// the file) and what to say.
pub(super) type Exceeded = (Position, String);

/// What one read of one file has used.
pub(super) struct Budget<'a> {
    text: &'a str,
    /// The document being read: where it starts (character index,
    /// position), the character index where its last event ends, whether
    /// one is open.
    doc_start: (usize, Position),
    doc_end: usize,
    in_document: bool,
    /// A character index and its byte offset in `text`, moved forward to
    /// measure big documents in bytes.
    cursor: (usize, usize),
    /// Nodes written out in the file so far, and nodes aliases added.
    written: usize,
    aliased: usize,
}

impl<'a> Budget<'a> {
    pub(super) fn new(text: &'a str) -> Budget<'a> {
        Budget {
            text,
            doc_start: (0, Position::default()),
            doc_end: 0,
            in_document: false,
            cursor: (0, 0),
            written: 0,
            aliased: 0,
        }
    }

    /// Whether the file may be read at all (checked before parsing).
    pub(super) fn file(&self) -> Result<(), Exceeded> {
        if self.text.len() > FILE_MAX_BYTES {
            let message = format!(
                "file is {} bytes, expected at most {FILE_MAX_BYTES} bytes (16 MiB)",
                self.text.len()
            );
            return Err((Position::default(), message));
        }
        Ok(())
    }

    /// A document starts at `span`.
    pub(super) fn document_start(&mut self, span: &Span, at: Position) {
        self.doc_start = (span.start.index(), at);
        self.in_document = true;
    }

    /// An event ends at `span`. A character is at least one byte: a
    /// document past the limit in characters is past it in bytes, and is
    /// not read further (the exact check is at its end).
    pub(super) fn event(&mut self, span: &Span) -> Result<(), Exceeded> {
        self.doc_end = span.end.index();
        if self.in_document && self.doc_end - self.doc_start.0 > DOCUMENT_MAX_BYTES {
            return Err(self.document_too_big());
        }
        Ok(())
    }

    /// The document ends: its size in bytes, exactly.
    pub(super) fn document_end(&mut self) -> Result<(), Exceeded> {
        self.in_document = false;
        let (start, end) = (self.doc_start.0, self.doc_end);
        // A character is at most 4 bytes: only a big document is measured.
        if (end - start) * 4 > DOCUMENT_MAX_BYTES
            && self.byte_offset(end) - self.byte_offset(start) > DOCUMENT_MAX_BYTES
        {
            return Err(self.document_too_big());
        }
        Ok(())
    }

    /// A node is written out in the text (a scalar, a mapping, a
    /// sequence).
    pub(super) fn written(&mut self) {
        self.written += 1;
    }

    /// An alias copies `nodes` nodes. Counted before the copy is made: the
    /// budget bounds the work, not only the result.
    pub(super) fn alias(&mut self, nodes: usize, at: Position) -> Result<(), Exceeded> {
        self.aliased += nodes;
        let budget = ALIAS_EXPANSION_MAX_NODES + self.written;
        if self.aliased > budget {
            let message = format!(
                "aliases expand to more than {budget} nodes, expected at most {ALIAS_EXPANSION_MAX_NODES} more than the file writes out"
            );
            return Err((at, message));
        }
        Ok(())
    }

    fn document_too_big(&self) -> Exceeded {
        let message = format!(
            "document is larger than 1 MiB, expected at most {DOCUMENT_MAX_BYTES} bytes per document"
        );
        (self.doc_start.1, message)
    }

    /// The byte offset of a character index; documents come in file order,
    /// so the cursor mostly moves forward.
    fn byte_offset(&mut self, char_index: usize) -> usize {
        if char_index < self.cursor.0 {
            self.cursor = (0, 0);
        }
        let (chars, bytes) = self.cursor;
        let ahead: usize = self.text[bytes..]
            .chars()
            .take(char_index - chars)
            .map(char::len_utf8)
            .sum();
        self.cursor = (char_index, bytes + ahead);
        self.cursor.1
    }
}
