//! The controller's layers (docs/architecture.md, "Layers"): every module
//! may import only from layers below its own, never from a sibling or
//! above — so there is no import cycle. The crates below (pam-store,
//! pam-manifests) are kept below by the compiler; inside pam-controller this
//! test reads the sources and fails when a `crate::…` path points the wrong
//! way, naming the file, the line and the two layers. SQL stays in
//! pam-store: this crate does not even depend on sqlx.

use std::path::{Path, PathBuf};

/// Top-level modules by layer, lowest first. Modules on one line are
/// siblings: they may not import each other.
const LAYERS: &[&[&str]] = &[
    &["clock"],
    &["events"],
    &["metrics"],
    &["rules"],
    &["ctx"],
    &["reconcile", "apply"],
    &["sync"],
    &["api"],
    &["config"],
    &["server", "main"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a source file belongs to (`src/api/runs.rs` →
/// `api`, `src/clock.rs` → `clock`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// Every `crate::<module>` a line of code names, comments left out.
fn crate_refs(line: &str) -> Vec<String> {
    let code = line.split("//").next().unwrap_or("");
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let tail = &rest[i + "crate::".len()..];
        let name: String = tail
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        } else if let Some(braced) = tail.strip_prefix('{') {
            // `use crate::{a, b::c}`: every top-level name in the braces.
            let inner = braced.split('}').next().unwrap_or("");
            out.extend(
                inner
                    .split(',')
                    .map(|s| s.trim().split("::").next().unwrap_or("").to_string())
                    .filter(|s| !s.is_empty()),
            );
        }
        rest = tail;
    }
    out
}

#[test]
fn every_import_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" {
            continue;
        }
        let Some(own) = layer_of(&module) else {
            violations.push(format!(
                "{}: module `{module}` has no layer; add it to LAYERS and docs/architecture.md",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for target in crate_refs(line) {
                if target == module {
                    continue;
                }
                match layer_of(&target) {
                    Some(l) if l < own => {}
                    Some(l) => violations.push(format!(
                        "{}:{}: `{module}` (layer {own}) imports `{target}` (layer {l}); \
                         imports must point to a lower layer",
                        file.display(),
                        n + 1
                    )),
                    None => violations.push(format!(
                        "{}:{}: `{target}` is not a module with a layer",
                        file.display(),
                        n + 1
                    )),
                }
            }
        }
    }
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn the_scanner_sees_paths_and_brace_lists() {
    assert_eq!(
        crate_refs("use crate::rules::runs; let x = crate::api::f(); // crate::server"),
        ["rules", "api"]
    );
    assert_eq!(
        crate_refs("use crate::{ctx::Ctx, events};"),
        ["ctx", "events"]
    );
    assert!(crate_refs("use super::x;").is_empty());
}

#[test]
fn no_sql_in_the_controller() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    let deps = manifest
        .split("[dev-dependencies]")
        .next()
        .unwrap_or_default();
    assert!(
        !deps.contains("sqlx"),
        "pam-controller must not depend on sqlx: SQL lives in pam-store"
    );
}
