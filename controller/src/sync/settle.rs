//! Whether a directory Source's files are settled ("data loss
//! from a watched directory"): a generator writing into the directory
//! (`gen > dir/all.yaml`, a file written in chunks) leaves a file that
//! parses as fewer objects than it will hold; a sync that read it then
//! pruned the rest, and re-created them (new uids, runs run again) once
//! the file was whole.
//!
//! The rule (docs/gitops.md, "Files still being written"):
//! - no sync applies anything while a manifest file of the tree is open
//!   for writing ([`open_for_writing`]);
//! - a sync that would prune (or release) objects also needs every file
//!   and directory of the tree unchanged for the settle window
//!   ([`newest_change`]) and a second read of the whole tree, just before
//!   it commits, identical to the one it applied ([`before_prune`]).
//!
//! Otherwise the sync is deferred — nothing applied, nothing pruned, the
//! status says what it waits for — and tried again shortly.

use std::collections::BTreeSet;
use std::path::{Component, Path};
use std::time::{Duration, SystemTime};

use super::fetch;

/// Manifest files under `root` (canonical) that a process pamd may look
/// at holds open for writing: `/proc/<pid>/fd` links into the tree whose
/// `fdinfo` flags say write-only or read-write (Linux; elsewhere, and for
/// other users' processes pamd cannot see, the settle window alone
/// applies). Sorted; relative `/`-separated paths.
pub fn open_for_writing(root: &Path) -> Vec<String> {
    let mut out = BTreeSet::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for p in procs.flatten() {
        if !p
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Ok(rel) = target.strip_prefix(root) else {
                continue;
            };
            if !in_tree(rel) {
                continue;
            }
            let info = p.path().join("fdinfo").join(fd.file_name());
            let Ok(text) = std::fs::read_to_string(info) else {
                continue;
            };
            let flags = text
                .lines()
                .find_map(|l| l.strip_prefix("flags:"))
                .and_then(|v| u32::from_str_radix(v.trim(), 8).ok());
            // O_ACCMODE: 1 is O_WRONLY, 2 is O_RDWR.
            if flags.is_some_and(|f| f & 3 != 0) {
                out.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.into_iter().collect()
}

/// Whether a path relative to the root is one a tree reads: the one
/// rule of [`pam_manifests::load::is_manifest_file`].
fn in_tree(rel: &Path) -> bool {
    rel.components().all(|c| matches!(c, Component::Normal(_)))
        && pam_manifests::load::is_manifest_file(&rel.to_string_lossy())
}

/// The file or directory of the tree under `root` that changed last (its
/// ctime: a write, a file renamed in or removed from a directory — and
/// unlike the mtime no tool sets it back), and how long ago. `.` is the
/// root. Walks at most [`fetch::MAX_ENTRIES`] entries.
pub fn newest_change(root: &Path) -> Option<(String, Duration)> {
    use std::os::unix::fs::MetadataExt;
    let now = SystemTime::now();
    let ctime = |m: &std::fs::Metadata| {
        SystemTime::UNIX_EPOCH
            + Duration::new(
                m.ctime().max(0) as u64,
                m.ctime_nsec().clamp(0, 999_999_999) as u32,
            )
    };
    let mut newest: Option<(String, SystemTime)> = None;
    let mut consider = |rel: String, t: SystemTime| {
        if newest.as_ref().is_none_or(|(_, n)| t > *n) {
            newest = Some((rel, t));
        }
    };
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let rel = dir
            .strip_prefix(root)
            .map(|r| r.to_string_lossy().replace('\\', "/"))
            .unwrap_or_default();
        if let Ok(m) = std::fs::metadata(&dir) {
            consider(if rel.is_empty() { ".".into() } else { rel }, ctime(&m));
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > fetch::MAX_ENTRIES {
                break;
            }
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() && !name.starts_with('.') {
                stack.push(e.path());
            } else if ft.is_file() && super::tree::is_manifest(&name) {
                if let Ok(m) = e.metadata() {
                    let rel = e
                        .path()
                        .strip_prefix(root)
                        .map_or(name, |r| r.to_string_lossy().replace('\\', "/"));
                    consider(rel, ctime(&m));
                }
            }
        }
    }
    newest.map(|(rel, t)| (rel, now.duration_since(t).unwrap_or_default()))
}

/// Why a sync of `root` may not apply anything yet: a manifest file is
/// open for writing.
pub fn before_apply(root: &Path) -> Result<(), String> {
    match open_for_writing(root).first() {
        Some(f) => Err(format!("{f} is open for writing")),
        None => Ok(()),
    }
}

/// Why a sync that read the tree at `revision` from `root` may not prune
/// by it yet: a file open for writing, a change within `window`, or a
/// second read that differs. Blocking: call it on a blocking thread.
pub fn before_prune(root: &Path, revision: &str, window: Duration) -> Result<(), String> {
    before_apply(root)?;
    if let Some((what, ago)) = newest_change(root) {
        if ago < window {
            let what = if what == "." {
                "the directory listing".to_string()
            } else {
                what
            };
            return Err(format!("{what} changed {:.1} s ago", ago.as_secs_f64()));
        }
    }
    match fetch::read_dir(root) {
        Ok(again) if again.revision == revision => Ok(()),
        Ok(_) => Err("the files changed while the sync ran".into()),
        Err(e) => Err(format!("{e:#}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    #[test]
    fn a_file_held_open_for_writing_is_seen_and_a_closed_one_is_not() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("a.yaml"), "x: 1\n").unwrap();
        assert_eq!(open_for_writing(&root), Vec::<String>::new());
        let mut f = std::fs::File::create(root.join("sub/b.yaml")).unwrap();
        f.write_all(b"x: ").unwrap();
        // Read-only handles and files that are no manifests do not count.
        let _r = std::fs::File::open(root.join("a.yaml")).unwrap();
        let _log = std::fs::File::create(root.join("log.txt")).unwrap();
        assert_eq!(open_for_writing(&root), ["sub/b.yaml"]);
        assert_eq!(
            before_apply(&root).unwrap_err(),
            "sub/b.yaml is open for writing"
        );
        drop(f);
        assert_eq!(open_for_writing(&root), Vec::<String>::new());
        // Just written: not settled for a prune; the listing names it.
        let (what, ago) = newest_change(&root).unwrap();
        assert!(ago < Duration::from_secs(5), "{what} {ago:?}");
        let tree = fetch::read_dir(&root).unwrap();
        let err = before_prune(&root, &tree.revision, Duration::from_secs(60)).unwrap_err();
        assert!(err.contains("changed"), "{err}");
        assert!(before_prune(&root, &tree.revision, Duration::ZERO).is_ok());
        std::fs::write(root.join("a.yaml"), "x: 2\n").unwrap();
        assert_eq!(
            before_prune(&root, &tree.revision, Duration::ZERO).unwrap_err(),
            "the files changed while the sync ran"
        );
    }
}
