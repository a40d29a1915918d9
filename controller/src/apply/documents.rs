//! A request's input as documents: YAML files parsed (a big batch on all
//! cores) and JSON objects typed, every problem positioned.

use std::collections::{HashMap, HashSet};

use pam_manifests::kinds::Manifest;
use pam_manifests::load::Document;
use pam_manifests::names::Name;
use pam_manifests::ManifestError;

use super::{ApplyError, ApplyRequest, FileIn};

/// Parses the request's files and objects into documents, or every error.
pub fn documents(req: &ApplyRequest) -> Result<Vec<Document>, ApplyError> {
    let parsed = parse_files(&req.files);
    // Sized once: a Document is several hundred bytes inline, and a vector
    // grown by doubling would hold up to twice the batch (issue 30).
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
        // The rules of a file's document, without positions (issue 16: an
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
    let parse = |f: &FileIn| pam_manifests::load::parse_documents(&f.name, &f.content);
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

/// Tasks ordered so that a parent in the batch comes before its children.
pub(super) fn parents_first(tasks: Vec<&Document>) -> Vec<&Document> {
    let key = |d: &Document| (d.manifest.project().cloned(), d.manifest.name().clone());
    let by_key: HashMap<_, &Document> = tasks.iter().map(|d| (key(d), *d)).collect();
    let mut out = Vec::with_capacity(tasks.len());
    let mut done: HashSet<(Option<Name>, Name)> = HashSet::new();
    fn visit<'a>(
        d: &'a Document,
        by_key: &HashMap<(Option<Name>, Name), &'a Document>,
        done: &mut HashSet<(Option<Name>, Name)>,
        out: &mut Vec<&'a Document>,
        depth: usize,
    ) {
        let k = (d.manifest.project().cloned(), d.manifest.name().clone());
        if done.contains(&k) || depth > 10_000 {
            return;
        }
        done.insert(k);
        if let Manifest::Task(t) = &d.manifest {
            if let Some(parent) = &t.spec.parent {
                if let Some(p) = by_key.get(&(Some(t.metadata.project.clone()), parent.clone())) {
                    visit(p, by_key, done, out, depth + 1);
                }
            }
        }
        out.push(d);
    }
    for d in &tasks {
        visit(d, &by_key, &mut done, &mut out, 0);
    }
    out
}
