//! The code's shape (docs/architecture.md, "Layers"). Inside
//! pam-controller every module may import only from layers below its own,
//! never from a sibling or above; and in every crate of the workspace no
//! files import each other in a loop (a circle), whichever folder they
//! sit in. The crates below (pam-store, pam-manifests) are kept below by
//! the compiler; these tests read the sources with syn
//! (`common/imports.rs`) and fail naming the file, the line and what ties
//! the files. SQL stays in pam-store: this crate does not even depend on
//! sqlx.

use std::path::{Path, PathBuf};

#[path = "common/imports.rs"]
mod imports;
#[path = "common/rust_files.rs"]
mod rust_files;
use imports::{circles, Crate};

/// Top-level modules by layer, lowest first. Modules on one line are
/// siblings: they may not import each other.
const LAYERS: &[&[&str]] = &[
    &["clock", "batch", "retry"],
    &["events"],
    &["metrics"],
    &["rules"],
    &["ctx"],
    &["reconcile", "apply", "fleet"],
    &["sync"],
    &["api"],
    &["config"],
    &["server", "main", "bin"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// Every import in the controller-shaped tree at `src` that points the
/// wrong way, as `file:line: …`.
fn violations(src: &Path) -> Vec<String> {
    let krate = Crate::read(src);
    let mut violations = Vec::new();
    let mut files = Vec::new();
    rust_files::rust_files(src, &mut files);
    files.sort();
    for file in &files {
        match krate.module_of(file) {
            Some(m) if !m.is_empty() && layer_of(&m[0]).is_none() => violations.push(format!(
                "{}: module `{}` has no layer; add it to LAYERS and docs/architecture.md",
                file.display(),
                m[0]
            )),
            _ => {}
        }
    }
    // One line per file and layer it wrongly imports: the first.
    let mut seen = std::collections::HashSet::new();
    for e in krate.edges() {
        let (Some(from), Some(to)) = (krate.module_of(&e.from), krate.module_of(&e.to)) else {
            continue;
        };
        let (Some(module), Some(target)) = (from.first(), to.first()) else {
            // The crate root declares the modules; what it defines is
            // below them all.
            continue;
        };
        if module == target {
            continue;
        }
        let (Some(own), Some(l)) = (layer_of(module), layer_of(target)) else {
            continue;
        };
        if l >= own && seen.insert((e.from.clone(), target.clone())) {
            violations.push(format!(
                "{}:{}: `{module}` (layer {own}) imports `{target}` (layer {l}); \
                 imports must point to a lower layer",
                e.from.display(),
                e.line,
            ));
        }
    }
    violations.sort();
    violations
}

/// The import circles of the crate at `src`, each as its files and what
/// ties them (`file:line -> file: name`).
fn circles_in(src: &Path) -> Vec<String> {
    let krate = Crate::read(src);
    let rel = |p: &PathBuf| p.strip_prefix(src).unwrap_or(p).display().to_string();
    circles(&krate.edges())
        .into_iter()
        .map(|(files, ties)| {
            let names: Vec<String> = files.iter().map(rel).collect();
            let mut text = format!("{}: {}", src.display(), names.join(" <-> "));
            for t in ties {
                text.push_str(&format!(
                    "\n    {}:{} -> {}: {}",
                    rel(&t.from),
                    t.line,
                    rel(&t.to),
                    t.name
                ));
            }
            text
        })
        .collect()
}

/// The `src` folder of each member of the workspace.
fn workspace_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let members = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("the workspace lists its members on one line");
    let list = &members[members.find('[').unwrap() + 1..members.rfind(']').unwrap()];
    let sources: Vec<PathBuf> = list
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| root.join(m).join("src"))
        .collect();
    assert!(sources.len() >= 8, "{sources:?}");
    sources
}

#[test]
fn every_import_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let violations = violations(&src);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
}

#[test]
fn no_crate_has_an_import_circle() {
    let found: Vec<String> = workspace_sources()
        .iter()
        .flat_map(|s| circles_in(s))
        .collect();
    assert!(
        found.is_empty(),
        "files that import each other in a loop; move what both need below both:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_planted_violation_is_found() {
    // tests/fixtures/layers/src: `rules` imports `api` inside a nested,
    // multi-line `use crate::{…}` list, and `events` names `server` in a
    // path; the comments and strings there name layers too and must not
    // count.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/layers/src");
    let found = violations(&src);
    let names: Vec<&str> = found
        .iter()
        .map(|v| v.rsplit('/').next().unwrap_or(v))
        .collect();
    assert_eq!(
        names,
        [
            "events.rs:4: `events` (layer 1) imports `server` (layer 9); imports must point to a lower layer",
            "mod.rs:7: `rules` (layer 3) imports `api` (layer 7); imports must point to a lower layer",
        ],
        "{found:#?}"
    );
}

#[test]
fn a_planted_circle_is_found() {
    // tests/fixtures/circles/src: `load/typing.rs` and `load/yaml.rs`
    // take from each other (and from their folder's mod.rs, which holds
    // them: no arrow);
    // `kinds` names `limits` only inside a macro's tokens and `limits`
    // takes `Manifest` from `kinds` in a brace list. `face/` is a folder
    // whose mod.rs only hands names on, whose children reach each other
    // through it, and whose one loop is test code: no circle.
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/circles/src");
    let found = circles_in(&src);
    let text = found.join("\n");
    let rel = |c: &str| {
        c.split_once(": ")
            .map(|(_, r)| r.to_string())
            .unwrap_or_default()
    };
    assert_eq!(
        found
            .iter()
            .map(|c| rel(c.lines().next().unwrap()))
            .collect::<Vec<_>>(),
        ["kinds.rs <-> limits.rs", "load/typing.rs <-> load/yaml.rs"],
        "{text}"
    );
    for tie in [
        "kinds.rs:4 -> limits.rs: MAX",
        "limits.rs:3 -> kinds.rs: Manifest",
        "load/typing.rs:4 -> load/yaml.rs: Tree",
        "load/yaml.rs:6 -> load/typing.rs: check",
    ] {
        assert!(text.contains(tie), "{tie} in\n{text}");
    }
}

/// A transaction is committed only through `Ctx::commit`, which fences,
/// queues webhook deliveries and publishes the journaled events after the
/// commit. A raw `Tx::commit` elsewhere could commit an event nobody
/// publishes, or a write without its event.
#[test]
fn only_ctx_commits() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let krate = Crate::read(&src);
    let raw: Vec<String> = krate
        .commits
        .iter()
        .filter(|(file, _)| !file.ends_with("ctx.rs"))
        .flat_map(|(file, lines)| lines.iter().map(move |l| format!("{}:{l}", file.display())))
        .collect();
    assert!(
        raw.is_empty(),
        "commit through Ctx::commit, not Tx::commit:\n{}",
        raw.join("\n")
    );
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
