//! The `.rs` files under a directory, for the tests that read the
//! controller's sources (`layers.rs`, `openapi.rs`): `#[path]`-included
//! by each, apart from `common/mod.rs` and its API helpers.

use std::path::{Path, PathBuf};

pub fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}
