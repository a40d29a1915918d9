//! Every size and shape limit on manifests, as named constants (the
//! per-document checks that enforce the field limits are
//! [`crate::validate::limits`]).
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
//! - [`crate::validate::limits::check_document`], run by [`crate::validate::validate_batch`] on every
//!   document of every batch (YAML files and JSON objects alike), enforces
//!   the rest: text sizes, label counts, and no NUL in any free text.
//!
//! A JSON object has no YAML text to measure; the field limits bound it
//! (all of them together stay under [`DOCUMENT_MAX_BYTES`]).

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
