//! A request's input as documents: YAML files parsed (a big batch on all
//! cores) and JSON objects typed, every problem positioned.

use std::collections::HashMap;

use pam_manifests::kinds::Manifest;
use pam_manifests::load::Document;
use pam_manifests::ManifestError;

use super::{ApplyError, ApplyRequest, FileIn};

/// Parses the request's files and objects into documents, or every error.
pub fn documents(req: &ApplyRequest) -> Result<Vec<Document>, ApplyError> {
    let parsed = parse_files(&req.files);
    // Sized once: a Document is several hundred bytes inline, and a vector
    // grown by doubling would hold up to twice the batch.
    let count = parsed
        .iter()
        .map(|p| p.as_ref().map_or(0, Vec::len))
        .sum::<usize>();
    let mut docs = Vec::with_capacity(count + req.objects.len());
    let mut errors = Vec::new();
    for parsed in parsed {
        match parsed {
            Ok(d) => docs.extend(d),
            Err(e) => errors.extend(e),
        }
    }
    for (i, obj) in req.objects.iter().enumerate() {
        // The rules of a file's document, without positions (an
        // exec run without a command is refused on both paths alike).
        match pam_manifests::load::document_from_value("<request>", i, obj.clone()) {
            Ok(d) => docs.push(d),
            Err(e) => errors.extend(e),
        }
    }
    if errors.is_empty() {
        Ok(docs)
    } else {
        Err(ApplyError::Invalid(errors))
    }
}

/// Parses files, in input order; a big batch of files on as many threads
/// as there are cores (YAML parsing is apply's main CPU cost).
fn parse_files(files: &[FileIn]) -> Vec<Result<Vec<Document>, Vec<ManifestError>>> {
    let parse =
        |f: &FileIn| pam_manifests::load::parse_documents_shared(&f.name, f.content.clone());
    let bytes: usize = files.iter().map(|f| f.content.len()).sum();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(files.len());
    if threads < 2 || bytes < 256 * 1024 {
        return files.iter().map(parse).collect();
    }
    // Contiguous chunks of files, one per thread, joined in order.
    let per_thread = files.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let handles: Vec<_> = files
            .chunks(per_thread)
            .map(|chunk| scope.spawn(move || chunk.iter().map(parse).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a parse thread panicked"))
            .collect()
    })
}

/// The tasks `tasks` (indices into `docs`) ordered so that a parent in
/// the batch comes before its children. Keyed by borrowed names and
/// indices: no copy of any name.
pub(super) fn parents_first(docs: &[Option<Document>], tasks: Vec<usize>) -> Vec<usize> {
    let key = |i: usize| -> Option<(&str, &str)> {
        match &docs[i].as_ref()?.manifest {
            Manifest::Task(t) => Some((t.metadata.project.as_str(), t.metadata.name.as_str())),
            _ => None,
        }
    };
    let by_key: HashMap<(&str, &str), usize> =
        tasks.iter().filter_map(|&i| Some((key(i)?, i))).collect();
    let mut out = Vec::with_capacity(tasks.len());
    let mut done = vec![false; docs.len()];
    // Iterative, not recursive: a chain of parents is walked up to its
    // first done (or root) ancestor, then pushed from the top down.
    let mut chain = Vec::new();
    for &start in &tasks {
        let mut at = Some(start);
        while let Some(i) = at {
            if done[i] || chain.len() > 10_000 {
                break;
            }
            done[i] = true;
            chain.push(i);
            at = match docs[i].as_ref().map(|d| &d.manifest) {
                Some(Manifest::Task(t)) => t.spec.parent.as_ref().and_then(|p| {
                    by_key
                        .get(&(t.metadata.project.as_str(), p.as_str()))
                        .copied()
                }),
                _ => None,
            };
        }
        out.extend(chain.drain(..).rev());
    }
    out
}
