//! `validate`: offline checks with pam-manifests — the same loader and
//! batch rules the server runs, against an empty existing state (so a
//! reference to an object that exists only on the server is reported).

use pam_manifests::validate::InMemoryState;
use pam_manifests::{parse_documents, validate_batch, ManifestError};

use crate::cli::FileArgs;
use crate::error::{CliError, Exit, Result};
use crate::files::InputFile;
use crate::term;

/// Every problem in the batch, in file, document and line order (files in
/// input order); `Ok(n)` is the
/// number of objects when there is none.
pub(crate) fn check(files: &[InputFile]) -> std::result::Result<usize, Vec<ManifestError>> {
    let mut docs = Vec::new();
    let mut errors = Vec::new();
    for f in files {
        match parse_documents(&f.name, &f.content) {
            Ok(d) => docs.extend(d),
            Err(e) => errors.extend(e),
        }
    }
    errors.extend(validate_batch(&docs, &InMemoryState::default()));
    let order = |name: &str| files.iter().position(|f| f.name == name);
    errors.sort_by_key(|e| (order(&e.file), e.document, e.line, e.column));
    if errors.is_empty() {
        Ok(docs.len())
    } else {
        Err(errors)
    }
}

pub(crate) fn validate(args: &FileArgs) -> Result<Exit> {
    let files = super::apply::read_files(args)?;
    match check(&files) {
        Ok(n) => {
            let noun = if n == 1 { "object" } else { "objects" };
            term::outln(&format!("{n} {noun} valid"));
            Ok(Exit::Ok)
        }
        Err(errors) => {
            let n = errors.len();
            let noun = if n == 1 { "error" } else { "errors" };
            Err(CliError::new(Exit::Failed, "")
                .details(errors.iter().map(ToString::to_string).collect())
                .hint(format!(
                    "{n} {noun} in {} file(s); nothing was sent to a server",
                    files.len()
                )))
        }
    }
}
