//! Writes `schemas/<kind>.schema.json` for every manifest kind.
//!
//! Usage: `cargo run -p pam-manifests --bin pam-schemas -- schemas/`

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: pam-schemas DIR");
        return ExitCode::from(2);
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("pam-schemas: create {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for (name, text) in pam_manifests::schema::all_schema_files() {
        let path = dir.join(&name);
        if let Err(e) = std::fs::write(&path, text) {
            eprintln!("pam-schemas: write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        eprintln!("wrote {}", path.display());
    }
    ExitCode::SUCCESS
}
