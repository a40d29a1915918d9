//! The committed `schemas/` match what the types generate.

use std::path::Path;

#[test]
fn committed_schemas_are_current() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../schemas");
    let mut stale = Vec::new();
    for (name, generated) in pam_manifests::schema::all_schema_files() {
        let committed = std::fs::read_to_string(dir.join(&name)).unwrap_or_default();
        if committed != generated {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "schemas/ is stale ({}); regenerate from the workspace root with:\n    {}",
        stale.join(", "),
        pam_manifests::schema::REGENERATE_COMMAND
    );
}
