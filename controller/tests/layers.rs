//! The controller's layers (docs/architecture.md, "Layers"): every module
//! may import only from layers below its own, never from a sibling or
//! above — so there is no import cycle. The crates below (pam-store,
//! pam-manifests) are kept below by the compiler; inside pam-controller this
//! test reads the sources and fails when a `crate::…` path points the wrong
//! way, naming the file, the line and the two layers. SQL stays in
//! pam-store: this crate does not even depend on sqlx.

use std::path::Path;

#[path = "common/rust_files.rs"]
mod rust_files;
use rust_files::rust_files;

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
    &["server", "main", "bin"],
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
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

/// The source with comments and the contents of string and char literals
/// blanked out (newlines kept, so byte offsets still give line numbers).
fn code_only(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < b.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            rest[..end].chars().for_each(|c| blank(&mut out, c));
            i += end;
        } else if rest.starts_with("/*") {
            // Block comments nest in Rust.
            let mut depth = 0;
            let mut j = 0;
            while j < rest.len() {
                if rest[j..].starts_with("/*") {
                    depth += 1;
                    j += 2;
                } else if rest[j..].starts_with("*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += rest[j..].chars().next().unwrap().len_utf8();
                }
            }
            rest[..j].chars().for_each(|c| blank(&mut out, c));
            i += j;
        } else if let Some(hashes) = raw_string_start(rest) {
            let open = 2 + hashes;
            let close = format!("\"{}", "#".repeat(hashes));
            let end = rest[open..]
                .find(&close)
                .map(|k| open + k + close.len())
                .unwrap_or(rest.len());
            rest[..end].chars().for_each(|c| blank(&mut out, c));
            i += end;
        } else if rest.starts_with("'\"'") || rest.starts_with("'\\\"'") {
            // A char literal of a double quote opens no string.
            let end = rest[1..].find('\'').map(|k| k + 2).unwrap_or(rest.len());
            rest[..end].chars().for_each(|c| blank(&mut out, c));
            i += end;
        } else if rest.starts_with('"') {
            let mut j = 1;
            while j < rest.len() && !rest[j..].starts_with('"') {
                j += if rest[j..].starts_with('\\') { 2 } else { 1 };
                while j < rest.len() && !rest.is_char_boundary(j) {
                    j += 1;
                }
            }
            let end = (j + 1).min(rest.len());
            rest[..end].chars().for_each(|c| blank(&mut out, c));
            i += end;
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// `r"…"`, `r#"…"#`: the number of hashes, when `rest` opens a raw string.
fn raw_string_start(rest: &str) -> Option<usize> {
    let after_r = rest.strip_prefix('r')?;
    let hashes = after_r.chars().take_while(|c| *c == '#').count();
    after_r[hashes..].starts_with('"').then_some(hashes)
}

/// The text of a balanced `{…}` group starting at `open` (the `{`), and
/// the offset just past its `}`.
fn braced(code: &str, open: usize) -> (&str, usize) {
    let mut depth = 0;
    for (k, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return (&code[open + 1..open + k], open + k + 1);
                }
            }
            _ => {}
        }
    }
    (&code[open + 1..], code.len())
}

/// The first path segment of each top-level entry of a `use` brace list
/// (`ctx::Ctx, events::{a, b}` → `ctx`, `events`), with its offset in
/// `inner`. `self` names the parent itself and is left out.
fn brace_heads(inner: &str) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    let mut push = |entry_start: usize, entry: &str| {
        let lead = entry.len() - entry.trim_start().len();
        let head: String = entry
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !head.is_empty() && head != "self" {
            out.push((head, entry_start + lead));
        }
    };
    for (k, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                push(start, &inner[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    push(start, &inner[start..]);
    out
}

/// Every `crate::<module>` the code names — paths, and each top-level
/// entry of a `use crate::{…}` list however it is wrapped or nested —
/// with its 1-based line. Comments and string literals are left out.
fn crate_refs(text: &str) -> Vec<(String, usize)> {
    let code = code_only(text);
    let line_of = |offset: usize| code[..offset].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("crate::") {
        let at = from + i;
        // `pam_crate::x` or `my_crate::` are other names.
        let before = code[..at].chars().next_back();
        let tail_at = at + "crate::".len();
        from = tail_at;
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let tail = &code[tail_at..];
        let skip = tail.len() - tail.trim_start().len();
        if tail.trim_start().starts_with('{') {
            let (inner, end) = braced(&code, tail_at + skip);
            let inner_at = tail_at + skip + 1;
            for (head, k) in brace_heads(inner) {
                out.push((head, line_of(inner_at + k)));
            }
            from = end;
        } else {
            let name: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((name, line_of(at)));
            }
        }
    }
    out
}

/// Every import in the tree at `src` that points the wrong way, as
/// `file:line: …`.
fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    for file in &files {
        let module = module_of(src, file);
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
        for (target, line) in crate_refs(&text) {
            if target == module {
                continue;
            }
            match layer_of(&target) {
                Some(l) if l < own => {}
                Some(l) => violations.push(format!(
                    "{}:{line}: `{module}` (layer {own}) imports `{target}` (layer {l}); \
                     imports must point to a lower layer",
                    file.display(),
                )),
                None => violations.push(format!(
                    "{}:{line}: `{target}` is not a module with a layer",
                    file.display(),
                )),
            }
        }
    }
    violations
}

#[test]
fn every_import_points_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let violations = violations(&src);
    assert!(violations.is_empty(), "{}", violations.join("\n"));
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
fn the_scanner_sees_paths_and_brace_lists() {
    let names = |t: &str| -> Vec<String> { crate_refs(t).into_iter().map(|(n, _)| n).collect() };
    assert_eq!(
        names("use crate::rules::runs; let x = crate::api::f(); // crate::server"),
        ["rules", "api"]
    );
    assert_eq!(names("use crate::{ctx::Ctx, events};"), ["ctx", "events"]);
    assert_eq!(
        names("use crate::{\n    ctx::Ctx,\n    rules::{runs::{self, gate}, meta},\n    self,\n};"),
        ["ctx", "rules"]
    );
    assert_eq!(
        crate_refs("use crate::{\n    clock,\n    api::x,\n};"),
        [("clock".to_string(), 2), ("api".to_string(), 3)]
    );
    assert!(names("let s = \"crate::api\"; /* crate::server */ use super::x;").is_empty());
    assert!(names("let s = r#\"crate::api\"#; use pam_crate::api;").is_empty());
    assert_eq!(names("if c == '\"' { crate::api::f() }"), ["api"]);
}

/// A transaction is committed only through `Ctx::commit`, which
/// fences, queues webhook deliveries and publishes the journaled events
/// after the commit. A raw `Tx::commit` elsewhere could commit an event
/// nobody publishes, or a write without its event.
#[test]
fn only_ctx_commits() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut raw = Vec::new();
    for file in files.iter().filter(|f| !f.ends_with("ctx.rs")) {
        let code = code_only(&std::fs::read_to_string(file).unwrap());
        for (n, line) in code.lines().enumerate() {
            if line.contains(".commit()") {
                raw.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
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
