//! docs/api.md's "Limits" table and `pam_manifests::limits` are one list:
//! every constant in limits.rs has a row naming it, and that row states its
//! value. Fix the table (or the constant) when this fails.

use pam_manifests::limits::*;

/// Every limit constant with its value. A constant added to limits.rs and
/// missing here fails [`every_constant_is_listed_here`].
const LIMITS: &[(&str, usize)] = &[
    ("FILE_MAX_BYTES", FILE_MAX_BYTES),
    ("DOCUMENT_MAX_BYTES", DOCUMENT_MAX_BYTES),
    ("NESTING_MAX_DEPTH", NESTING_MAX_DEPTH),
    ("ALIAS_EXPANSION_MAX_NODES", ALIAS_EXPANSION_MAX_NODES),
    ("NAME_MAX_BYTES", NAME_MAX_BYTES),
    ("LABEL_KEY_PREFIX_MAX_BYTES", LABEL_KEY_PREFIX_MAX_BYTES),
    ("LABELS_MAX_COUNT", LABELS_MAX_COUNT),
    ("ANNOTATIONS_MAX_BYTES", ANNOTATIONS_MAX_BYTES),
    ("RESOURCE_VERSION_MAX_BYTES", RESOURCE_VERSION_MAX_BYTES),
    ("TITLE_MAX_BYTES", TITLE_MAX_BYTES),
    ("DISPLAY_NAME_MAX_BYTES", DISPLAY_NAME_MAX_BYTES),
    ("ASSIGNEE_MAX_BYTES", ASSIGNEE_MAX_BYTES),
    ("DESCRIPTION_MAX_BYTES", DESCRIPTION_MAX_BYTES),
    ("PROMPT_MAX_BYTES", PROMPT_MAX_BYTES),
    ("CWD_MAX_BYTES", CWD_MAX_BYTES),
    ("DEPENDS_ON_MAX", DEPENDS_ON_MAX),
    ("COMMAND_MAX_ARGS", COMMAND_MAX_ARGS),
    ("COMMAND_MAX_BYTES", COMMAND_MAX_BYTES),
    ("TOKEN_NAME_MAX_BYTES", TOKEN_NAME_MAX_BYTES),
    ("WORKER_VERSION_MAX_BYTES", WORKER_VERSION_MAX_BYTES),
    ("SIGNAL_BATCH_MAX_SIGNALS", SIGNAL_BATCH_MAX_SIGNALS),
    ("SIGNAL_TEXT_MAX_BYTES", SIGNAL_TEXT_MAX_BYTES),
    ("HEARTBEAT_MAX_SESSIONS", HEARTBEAT_MAX_SESSIONS),
    ("SNAPSHOT_TEXT_MAX_BYTES", SNAPSHOT_TEXT_MAX_BYTES),
];

fn read(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `1048576` as the docs write it: `1,048,576`.
fn with_commas(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The numbers written in a table cell (`16 MiB (16,777,216 bytes)` →
/// 16, 16777216).
fn numbers(cell: &str) -> Vec<usize> {
    cell.split(|c: char| !(c.is_ascii_digit() || c == ','))
        .map(|t| t.trim_matches(','))
        .filter(|t| !t.is_empty())
        .filter_map(|t| t.replace(',', "").parse().ok())
        .collect()
}

#[test]
fn every_constant_is_listed_here() {
    let src = read("src/limits.rs");
    for line in src.lines() {
        if let Some(rest) = line.strip_prefix("pub const ") {
            let name = rest.split(':').next().unwrap().trim();
            assert!(
                LIMITS.iter().any(|(n, _)| *n == name),
                "{name} is in limits.rs but not in this test (and maybe not in docs/api.md)"
            );
        }
    }
}

#[test]
fn the_docs_table_states_every_limit() {
    let doc = read("../docs/api.md");
    let section = doc
        .split("## Limits")
        .nth(1)
        .expect("docs/api.md has a Limits section");
    let rows: Vec<&str> = section
        .lines()
        .take_while(|l| !l.starts_with("## "))
        .filter(|l| l.starts_with('|'))
        .collect();
    for (name, value) in LIMITS {
        let row = rows
            .iter()
            .find(|r| r.contains(&format!("`{name}`")))
            .unwrap_or_else(|| panic!("docs/api.md, Limits: no row names `{name}`"));
        let cells: Vec<&str> = row.split('|').collect();
        let stated = numbers(cells[2]);
        assert!(
            stated.contains(value),
            "docs/api.md, Limits: the row of `{name}` says {:?}, expected {} ({value})",
            cells[2].trim(),
            with_commas(*value)
        );
    }
}
