//! Every size and shape limit on manifests, as named constants, and the
//! per-document checks that enforce the field limits.
//!
//! Hostile input is normal input: a manifest comes from a file anyone may
//! have written, or from a program posting JSON. These limits keep one
//! request from exhausting pamd's stack, memory or CPU, and keep text that
//! PostgreSQL cannot store (NUL) out of the store. `docs/api.md`, "Limits",
//! lists them for operators; keep the two in step.
//!
//! Where each is enforced:
//! - The loader ([`crate::load`]) enforces the YAML limits while it reads:
//!   [`FILE_MAX_BYTES`], [`DOCUMENT_MAX_BYTES`], [`NESTING_MAX_DEPTH`] and
//!   [`ALIAS_EXPANSION_MAX_NODES`]. [`crate::Manifest::from_json`] enforces
//!   [`NESTING_MAX_DEPTH`] on JSON objects.
//! - Names, label keys and label values are bounded by their newtypes
//!   ([`crate::names`]): [`NAME_MAX_BYTES`], [`LABEL_KEY_PREFIX_MAX_BYTES`].
//! - [`check_document`], run by [`crate::validate::validate_batch`] on every
//!   document of every batch (YAML files and JSON objects alike), enforces
//!   the rest: text sizes, label counts, and no NUL in any free text.
//!
//! A JSON object has no YAML text to measure; the field limits bound it
//! (all of them together stay under [`DOCUMENT_MAX_BYTES`]).

use crate::kinds::Manifest;
use crate::load::{Document, Segment};
use crate::names::{Annotations, Labels};
use crate::ManifestError;

/// Bytes in one YAML file (16 MiB). Larger files are refused before they
/// are parsed.
pub const FILE_MAX_BYTES: usize = 16 << 20;

/// Bytes in one YAML document of a file (1 MiB).
pub const DOCUMENT_MAX_BYTES: usize = 1 << 20;

/// Mappings and sequences nested in one another (64 levels; the root
/// mapping is level 1). A manifest needs 4; deeper input is refused as it
/// is read, so no code path recurses deeper than this.
pub const NESTING_MAX_DEPTH: usize = 64;

/// Nodes that YAML aliases may add to one file, beyond the nodes the file
/// writes out (10,000 more). An alias copies its anchor's whole subtree, so
/// a few hundred bytes of nested aliases ("billion laughs") would otherwise
/// expand to billions of nodes.
pub const ALIAS_EXPANSION_MAX_NODES: usize = 10_000;

/// Bytes in a name (`metadata.name`, `metadata.project`, a Task's parent, a
/// Run's task), a label value, and the name part of a label key: a DNS
/// label's 63.
pub const NAME_MAX_BYTES: usize = 63;

/// Bytes in the DNS-subdomain prefix of a label key (`example.com/`): 253.
pub const LABEL_KEY_PREFIX_MAX_BYTES: usize = 253;

/// Labels in one map (`metadata.labels`, a Host's `spec.labels`, a Run's
/// `spec.target.selector`): 64.
pub const LABELS_MAX_COUNT: usize = 64;

/// Bytes of `metadata.annotations`, keys and values together (256 KiB).
pub const ANNOTATIONS_MAX_BYTES: usize = 256 << 10;

/// Bytes in `metadata.resourceVersion` (an integer as text needs 20).
pub const RESOURCE_VERSION_MAX_BYTES: usize = 64;

/// Bytes in a Task's `spec.title`.
pub const TITLE_MAX_BYTES: usize = 512;

/// Bytes in a Project's `spec.displayName`.
pub const DISPLAY_NAME_MAX_BYTES: usize = 512;

/// Bytes in a Task's `spec.assignee`.
pub const ASSIGNEE_MAX_BYTES: usize = 256;

/// Bytes in a Project's or Task's `spec.description` (64 KiB).
pub const DESCRIPTION_MAX_BYTES: usize = 64 << 10;

/// Bytes in a Run's `spec.prompt` (256 KiB).
pub const PROMPT_MAX_BYTES: usize = 256 << 10;

/// Bytes in a Run's `spec.cwd` (Linux's `PATH_MAX`).
pub const CWD_MAX_BYTES: usize = 4096;

/// Names in a Task's `spec.dependsOn`.
pub const DEPENDS_ON_MAX: usize = 256;

/// Arguments in a Run's `spec.command`.
pub const COMMAND_MAX_ARGS: usize = 1024;

/// Bytes of a Run's `spec.command`, all arguments together (256 KiB).
pub const COMMAND_MAX_BYTES: usize = 256 << 10;

/// Bytes in an operator token's name (as a name: [`NAME_MAX_BYTES`]).
pub const TOKEN_NAME_MAX_BYTES: usize = NAME_MAX_BYTES;

/// Bytes in a worker's reported `version` at registration.
pub const WORKER_VERSION_MAX_BYTES: usize = 128;

/// Signals in one worker signal batch (the worker sends at most 256).
pub const SIGNAL_BATCH_MAX_SIGNALS: usize = 1024;

/// Bytes in a signal's free text (`reason`, `at`).
pub const SIGNAL_TEXT_MAX_BYTES: usize = 1024;

/// Sessions in one heartbeat's `running` list.
pub const HEARTBEAT_MAX_SESSIONS: usize = 4096;

/// Bytes of an output snapshot's `text` (the worker sends a tail of at
/// most 256 KiB; 1 MiB).
pub const SNAPSHOT_TEXT_MAX_BYTES: usize = 1 << 20;

/// The message for a nesting deeper than [`NESTING_MAX_DEPTH`].
pub(crate) fn too_deep_message() -> String {
    format!("nesting deeper than {NESTING_MAX_DEPTH} levels, expected at most {NESTING_MAX_DEPTH} mappings and sequences inside one another")
}

/// Whether `value` nests deeper than [`NESTING_MAX_DEPTH`]; walks the value
/// with an explicit stack, so a deep value cannot overflow this one.
pub(crate) fn too_deep(value: &serde_json::Value) -> bool {
    use serde_json::Value;
    // (value, its level if it is a mapping or sequence; the root is 1).
    let mut stack = vec![(value, 1usize)];
    while let Some((v, level)) = stack.pop() {
        let is_collection = matches!(v, Value::Array(_) | Value::Object(_));
        if is_collection && level > NESTING_MAX_DEPTH {
            return true;
        }
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|c| (c, level + 1))),
            Value::Object(map) => stack.extend(map.values().map(|c| (c, level + 1))),
            _ => {}
        }
    }
    false
}

/// The field limits of one document: text sizes, label counts, no NUL in
/// free text. Names and label keys and values need no check here: their
/// types only hold valid ones.
pub fn check_document(doc: &Document) -> Vec<ManifestError> {
    let mut c = Checker {
        doc,
        errors: Vec::new(),
    };
    match &doc.manifest {
        Manifest::Project(p) => {
            c.metadata(&p.metadata.labels, &p.metadata.annotations);
            c.resource_version(p.metadata.resource_version.as_deref());
            if let Some(name) = &p.spec.display_name {
                c.text("spec.displayName", name, DISPLAY_NAME_MAX_BYTES);
            }
            if let Some(repo) = &p.spec.repository {
                // A URL is a path's length at most, as a Webhook's; refs are
                // bounded by kinds::REF_MAX_BYTES.
                c.text("spec.repository.url", &repo.url, CWD_MAX_BYTES);
            }
            c.text(
                "spec.description",
                &p.spec.description,
                DESCRIPTION_MAX_BYTES,
            );
        }
        Manifest::Task(t) => {
            c.metadata(&t.metadata.labels, &t.metadata.annotations);
            c.resource_version(t.metadata.resource_version.as_deref());
            c.text("spec.title", &t.spec.title, TITLE_MAX_BYTES);
            c.text(
                "spec.description",
                &t.spec.description,
                DESCRIPTION_MAX_BYTES,
            );
            if let Some(who) = &t.spec.assignee {
                c.text("spec.assignee", who, ASSIGNEE_MAX_BYTES);
            }
            if t.spec.depends_on.len() > DEPENDS_ON_MAX {
                c.errors.push(doc.error_at(
                    "spec.dependsOn",
                    format!(
                        "{} dependencies, expected at most {DEPENDS_ON_MAX}",
                        t.spec.depends_on.len()
                    ),
                ));
            }
        }
        Manifest::Run(r) => {
            c.metadata(&r.metadata.labels, &r.metadata.annotations);
            c.resource_version(r.metadata.resource_version.as_deref());
            c.text("spec.prompt", &r.spec.prompt, PROMPT_MAX_BYTES);
            c.text("spec.cwd", &r.spec.cwd, CWD_MAX_BYTES);
            if let Some(crate::kinds::Target::Selector(labels)) = &r.spec.target {
                c.label_count("spec.target.selector", labels);
            }
            if let Some(argv) = &r.spec.command {
                c.command(argv);
            }
        }
        Manifest::Host(h) => {
            c.metadata(&h.metadata.labels, &h.metadata.annotations);
            c.resource_version(h.metadata.resource_version.as_deref());
            c.label_count("spec.labels", &h.spec.labels);
        }
        Manifest::Webhook(w) => {
            c.metadata(&w.metadata.labels, &w.metadata.annotations);
            c.resource_version(w.metadata.resource_version.as_deref());
            c.text("spec.url", &w.spec.url, CWD_MAX_BYTES);
            for t in &w.spec.topics {
                c.text("spec.topics", t, CWD_MAX_BYTES);
            }
            c.text(
                "spec.signingSecretRef.key",
                &w.spec.signing_secret_ref.key,
                CWD_MAX_BYTES,
            );
        }

        Manifest::Schedule(s) => {
            c.metadata(&s.metadata.labels, &s.metadata.annotations);
            c.resource_version(s.metadata.resource_version.as_deref());
            c.text("spec.schedule", &s.spec.schedule, NAME_MAX_BYTES * 4);
            c.text("spec.timeZone", &s.spec.time_zone, NAME_MAX_BYTES);
            c.text(
                "spec.runTemplate.prompt",
                &s.spec.run_template.prompt,
                PROMPT_MAX_BYTES,
            );
            c.text(
                "spec.runTemplate.cwd",
                &s.spec.run_template.cwd,
                CWD_MAX_BYTES,
            );
            if let Some(argv) = &s.spec.run_template.command {
                c.command(argv);
            }
        }
        Manifest::Secret(s) => {
            // Values: base64, key names, 1 MiB in all.
            c.metadata(&s.metadata.labels, &s.metadata.annotations);
            c.resource_version(s.metadata.resource_version.as_deref());
            if let Err(problems) = s.spec.values() {
                for (path, message) in problems {
                    c.errors.push(doc.error_at(&path, message));
                }
            }
        }
        Manifest::Source(s) => {
            c.metadata(&s.metadata.labels, &s.metadata.annotations);
            c.resource_version(s.metadata.resource_version.as_deref());
            if let Some(path) = &s.spec.path {
                c.text("spec.path", path, CWD_MAX_BYTES);
            }
            if let Some(git) = &s.spec.git {
                c.text("spec.git.url", &git.url, CWD_MAX_BYTES);
                c.text("spec.git.ref", &git.reference, CWD_MAX_BYTES);
                c.text("spec.git.path", &git.path, CWD_MAX_BYTES);
            }
        }
        // A generically stored kind: its metadata; its spec's
        // own rules are `Manifest::generic_problems`.
        m => {
            c.metadata(m.labels(), m.annotations());
            c.resource_version(m.resource_version());
        }
    }
    c.errors
}

const NUL_MESSAGE: &str = "must not contain NUL (\\0) characters, expected text without them";

struct Checker<'a> {
    doc: &'a Document,
    errors: Vec<ManifestError>,
}

impl Checker<'_> {
    /// Free text: no NUL (PostgreSQL text cannot hold it), at most `max`
    /// bytes.
    fn text(&mut self, path: &str, text: &str, max: usize) {
        if text.contains('\0') {
            self.errors.push(self.doc.error_at(path, NUL_MESSAGE));
        } else if text.len() > max {
            self.errors.push(self.doc.error_at(
                path,
                format!("{} bytes, expected at most {max} bytes", text.len()),
            ));
        }
    }

    fn resource_version(&mut self, rv: Option<&str>) {
        if let Some(rv) = rv {
            self.text("metadata.resourceVersion", rv, RESOURCE_VERSION_MAX_BYTES);
        }
    }

    fn label_count(&mut self, path: &str, labels: &Labels) {
        if labels.len() > LABELS_MAX_COUNT {
            self.errors.push(self.doc.error_at(
                path,
                format!(
                    "{} labels, expected at most {LABELS_MAX_COUNT}",
                    labels.len()
                ),
            ));
        }
    }

    fn metadata(&mut self, labels: &Labels, annotations: &Annotations) {
        self.label_count("metadata.labels", labels);
        let mut total = 0;
        for (key, value) in annotations {
            total += key.as_str().len() + value.len();
            if value.contains('\0') {
                let path = [
                    Segment::Key("metadata".into()),
                    Segment::Key("annotations".into()),
                    Segment::Key(key.as_str().into()),
                ];
                self.errors
                    .push(self.doc.error_at_segments(&path, NUL_MESSAGE));
            }
        }
        if total > ANNOTATIONS_MAX_BYTES {
            self.errors.push(self.doc.error_at(
                "metadata.annotations",
                format!("{total} bytes of keys and values, expected at most {ANNOTATIONS_MAX_BYTES} bytes"),
            ));
        }
    }

    fn command(&mut self, argv: &[String]) {
        if argv.len() > COMMAND_MAX_ARGS {
            self.errors.push(self.doc.error_at(
                "spec.command",
                format!(
                    "{} arguments, expected at most {COMMAND_MAX_ARGS}",
                    argv.len()
                ),
            ));
            return;
        }
        for (i, arg) in argv.iter().enumerate() {
            if arg.contains('\0') {
                self.errors.push(
                    self.doc
                        .error_at(&format!("spec.command[{i}]"), NUL_MESSAGE),
                );
            }
        }
        let total: usize = argv.iter().map(String::len).sum();
        if total > COMMAND_MAX_BYTES {
            self.errors.push(self.doc.error_at(
                "spec.command",
                format!("{total} bytes of arguments, expected at most {COMMAND_MAX_BYTES} bytes"),
            ));
        }
    }
}
