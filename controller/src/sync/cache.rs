//! What the sync loop remembers between syncs of a Source, so that a sync
//! is fast on a big tree: each file's parsed documents by content id, and
//! the tree it last applied. A one-file change in a 10,000-object tree
//! parses that one file, and — when the last sync applied the tree before
//! it — validates and writes only the objects whose documents changed (see
//! [`Plan`]).
//!
//! The cache is memory only: after a restart (or on any doubt) the sync is
//! a full one, which is always correct. Parsing is a pure function of the
//! content, so a parsed file is reused whatever the Source's state.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use pam_manifests::load::{
    parse_documents_and_values, parse_documents_and_values_substituted, Document,
};
use pam_manifests::ManifestError;
use serde_json::Value;

use super::fetch::Tree;
use crate::apply::stored::key_of;
use crate::apply::stored::ObjectKey;

/// One file parsed: its documents with their raw values, or its problems.
pub type Parsed = Result<Vec<(Document, Value)>, Vec<ManifestError>>;

/// One Source's cache.
#[derive(Default)]
pub struct SourceCache {
    /// Parsed files by path, with the content id they were parsed from.
    files: HashMap<String, (String, Arc<Parsed>)>,
    /// The tree the last successful sync applied, as this process saw it.
    applied: Option<AppliedTree>,
    /// The substitution variables the files were parsed with:
    /// other variables parse every file again, and apply it whole.
    vars: Option<pam_manifests::load::substitute::Vars>,
}

/// A tree a sync applied: its revision, the Source's generation then,
/// each file's content id and objects, and each object's file.
#[derive(Clone)]
struct AppliedTree {
    revision: String,
    generation: i64,
    files: HashMap<String, (String, Arc<Parsed>)>,
    file_of: HashMap<ObjectKey, String>,
}

/// A tree loaded through the cache.
pub struct Loaded {
    /// Every file's documents, in tree order.
    pub files: Vec<(String, Arc<Parsed>)>,
}

impl Loaded {
    /// Every problem of every file (empty: the tree parsed).
    pub fn errors(&self) -> Vec<ManifestError> {
        self.files
            .iter()
            .filter_map(|(_, p)| p.as_ref().as_ref().err())
            .flatten()
            .cloned()
            .collect()
    }

    /// Every document of the tree.
    pub fn documents(&self) -> impl Iterator<Item = &(Document, Value)> {
        self.files
            .iter()
            .filter_map(|(_, p)| p.as_ref().as_ref().ok())
            .flatten()
    }
}

/// How a sync may apply a tree.
#[derive(Debug, PartialEq, Eq)]
pub enum Plan {
    /// Validate and write the whole tree against the whole inventory.
    Full,
    /// Only `files` changed since the tree the Source's status says is
    /// applied, and every object of the applied tree is still declared:
    /// the documents of `objects` — new, or changed as written, or moved
    /// to another file — are validated and written (against the stored
    /// state, as `pamctl apply -f` of them is); the rest is in place.
    Changed {
        files: Vec<String>,
        objects: Vec<ObjectKey>,
    },
}

impl SourceCache {
    /// Loads `tree`, parsing only the files whose content id is new (or
    /// all of them, with `vars` other than the last load's); `vars`: the
    /// Source's substitution, if it has one.
    pub fn load(
        &mut self,
        tree: &Tree,
        vars: Option<&pam_manifests::load::substitute::Vars>,
    ) -> Loaded {
        if self.vars.as_ref() != vars {
            self.files.clear();
            self.applied = None;
            self.vars = vars.cloned();
        }
        let mut files = Vec::with_capacity(tree.files.len());
        let mut seen = HashSet::with_capacity(tree.files.len());
        for f in &tree.files {
            seen.insert(f.path.as_str());
            let parsed = match self.files.get(&f.path) {
                Some((id, parsed)) if *id == f.id => parsed.clone(),
                _ => {
                    let parsed = Arc::new(match vars {
                        Some(v) => parse_documents_and_values_substituted(&f.path, &f.content, v),
                        None => parse_documents_and_values(&f.path, &f.content),
                    });
                    self.files
                        .insert(f.path.clone(), (f.id.clone(), parsed.clone()));
                    parsed
                }
            };
            files.push((f.path.clone(), parsed));
        }
        self.files.retain(|path, _| seen.contains(path.as_str()));
        Loaded { files }
    }

    /// Whether `tree` can be applied by its changed files alone: the last
    /// sync of this process applied `revision` at `generation` (and the
    /// caller checked the Source still says so, Synced), every changed
    /// file parsed, no declared object left the tree (a removal prunes,
    /// which the full sync decides), and no object is declared twice (the
    /// full sync names both places). Anything else is [`Plan::Full`].
    /// Costs the changed files' objects, not the tree's.
    pub fn plan(&self, tree: &Tree, loaded: &Loaded, revision: &str, generation: i64) -> Plan {
        let Some(applied) = &self.applied else {
            return Plan::Full;
        };
        if applied.revision != revision || applied.generation != generation {
            return Plan::Full;
        }
        let changed: HashSet<&str> = tree
            .files
            .iter()
            .filter(|f| applied.files.get(&f.path).is_none_or(|(id, _)| *id != f.id))
            .map(|f| f.path.as_str())
            .collect();
        let present: HashSet<&str> = tree.files.iter().map(|f| f.path.as_str()).collect();
        // What the changed and the removed files declared, as written.
        let mut before: HashMap<ObjectKey, (&str, &Value)> = HashMap::new();
        for (path, (_, parsed)) in &applied.files {
            if changed.contains(path.as_str()) || !present.contains(path.as_str()) {
                for (d, raw) in parsed.as_ref().as_ref().into_iter().flatten() {
                    before.insert(key_of(&d.manifest), (path.as_str(), raw));
                }
            }
        }
        let mut keys: HashSet<ObjectKey> = HashSet::new();
        let mut objects = Vec::new();
        for (path, parsed) in &loaded.files {
            if !changed.contains(path.as_str()) {
                continue;
            }
            let Ok(docs) = parsed.as_ref() else {
                return Plan::Full;
            };
            for (d, raw) in docs {
                let key = key_of(&d.manifest);
                // Declared twice: in this change, or here and in a file
                // that did not change.
                let elsewhere = applied
                    .file_of
                    .get(&key)
                    .is_some_and(|f| !changed.contains(f.as_str()) && present.contains(f.as_str()));
                if elsewhere || keys.contains(&key) {
                    return Plan::Full;
                }
                if before.get(&key) != Some(&(path.as_str(), raw)) {
                    objects.push(key.clone());
                }
                keys.insert(key);
            }
        }
        // What the changed and the removed files declared is still
        // declared.
        if before.keys().any(|k| !keys.contains(k)) {
            return Plan::Full;
        }
        let mut files: Vec<String> = changed.into_iter().map(str::to_string).collect();
        files.sort();
        Plan::Changed { files, objects }
    }

    /// The sync that loaded `tree` (as `loaded`) committed it at
    /// `generation`.
    pub fn applied(&mut self, tree: &Tree, loaded: &Loaded, generation: i64) {
        let mut files = HashMap::with_capacity(tree.files.len());
        let mut file_of = HashMap::new();
        for (f, (path, parsed)) in tree.files.iter().zip(&loaded.files) {
            debug_assert_eq!(&f.path, path);
            for (d, _) in parsed.as_ref().as_ref().into_iter().flatten() {
                file_of.insert(key_of(&d.manifest), f.path.clone());
            }
            files.insert(f.path.clone(), (f.id.clone(), parsed.clone()));
        }
        self.applied = Some(AppliedTree {
            revision: tree.revision.clone(),
            generation,
            files,
            file_of,
        });
    }

    /// Forget the applied tree (a failed or unknown outcome): the next
    /// sync is a full one.
    pub fn forget(&mut self) {
        self.applied = None;
    }
}
