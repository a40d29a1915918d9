//! [`ManifestError`]: one problem in one document, with where it is and
//! what was expected.

use std::fmt;

/// One problem in a manifest batch.
///
/// Displays as one line:
/// `FILE: document N, line L, column C: PATH: MESSAGE`, where `N` is the
/// 0-based index of the document in its file (counting every `---`
/// document, empty ones included), `L` and `C` are 1-based, and `PATH` is
/// the field path (`spec.restartPolicy.maxAttempts`). `PATH: ` is left out
/// when the problem is not about a field (a YAML syntax error), and
/// `line L, column C` when no position is known (`line == 0`: a document
/// that did not come from YAML text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestError {
    /// The file label given to the loader (a path, or `-` for stdin).
    pub file: String,
    /// 0-based index of the document within the file.
    pub document: usize,
    /// 1-based line; 0 when unknown.
    pub line: usize,
    /// 1-based column (in characters); 0 when unknown.
    pub column: usize,
    /// Field path, dotted, with `[i]` for sequence items; empty when the
    /// problem is not about one field.
    pub path: String,
    /// What is wrong and what was expected.
    pub message: String,
}

impl fmt::Display for ManifestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: document {}", self.file, self.document)?;
        if self.line > 0 {
            write!(f, ", line {}, column {}", self.line, self.column)?;
        }
        if !self.path.is_empty() {
            write!(f, ": {}", self.path)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ManifestError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_in_the_documented_shape() {
        let e = ManifestError {
            file: "examples/app.yaml".into(),
            document: 3,
            line: 12,
            column: 11,
            path: "spec.parent".into(),
            message: "task \"build\" is in project \"other\", expected a task in project \"web\""
                .into(),
        };
        assert_eq!(
            e.to_string(),
            "examples/app.yaml: document 3, line 12, column 11: spec.parent: task \"build\" is in project \"other\", expected a task in project \"web\""
        );
        let e = ManifestError {
            line: 0,
            column: 0,
            path: String::new(),
            ..e
        };
        assert_eq!(
            e.to_string(),
            "examples/app.yaml: document 3: task \"build\" is in project \"other\", expected a task in project \"web\""
        );
    }
}
