//! A Source's tree: its manifest files, each with a content id, and a
//! revision. Read from a directory here ([`read_dir`]); from a git
//! revision by [`super::fetch`].
//!
//! Which files are manifests is the one rule `pamctl apply -f DIR -R`
//! reads a directory by ([`pam_manifests::load::is_manifest_file`]:
//! `*.yaml`, `*.yml`, `*.json`, recursively, hidden files and directories
//! left out). A directory's content id is a SHA-256 of the bytes,
//! its revision a SHA-256 over every path and content id.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use sha2::{Digest, Sha256};

/// Most bytes one manifest file may have (a bigger one is reported, not
/// read).
pub const MAX_FILE_BYTES: u64 = 8 << 20;
/// Most manifest files in one tree.
pub const MAX_FILES: usize = 50_000;
/// Most entries (files of any kind and directories) one walk of a
/// directory Source visits — reading it or polling it: a Source's
/// directory holds manifests, and a path like `/` must not cost a
/// filesystem walk.
pub const MAX_ENTRIES: usize = 2 * MAX_FILES;
/// Most bytes of manifest files one directory tree may hold.
pub const MAX_TREE_BYTES: u64 = 256 << 20;
/// One manifest file of a tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeFile {
    /// The path relative to the source's root (`/`-separated), as errors
    /// name it.
    pub path: String,
    /// A content id: equal ids mean equal content.
    pub id: String,
    pub content: String,
}

/// A tree at a revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    pub revision: String,
    /// Sorted by path.
    pub files: Vec<TreeFile>,
}

/// Whether a file named `name` in a directory being walked (whose hidden
/// directories the walk skips) is a manifest: the one rule of
/// [`pam_manifests::load::is_manifest_file`].
pub(super) fn is_manifest(name: &str) -> bool {
    pam_manifests::load::is_manifest_file(name)
}

/// The revision of a directory tree: a SHA-256 over each file's path and
/// content id.
fn dir_revision(files: &[TreeFile]) -> String {
    let mut h = Sha256::new();
    for f in files {
        h.update(f.path.as_bytes());
        h.update([0]);
        h.update(f.id.as_bytes());
        h.update([0]);
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

/// Reads the manifest files under `root` (blocking: call it on a blocking
/// thread). A file that is not UTF-8 or too big is an error naming it.
pub fn read_dir(root: &Path) -> anyhow::Result<Tree> {
    let meta = std::fs::metadata(root).with_context(|| format!("read {}", root.display()))?;
    if !meta.is_dir() {
        bail!("{} is not a directory", root.display());
    }
    let mut files = Vec::new();
    let mut stack: Vec<PathBuf> = vec![root.to_path_buf()];
    let (mut seen, mut bytes_total) = (0usize, 0u64);
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).with_context(|| format!("read {}", dir.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("read {}", dir.display()))?;
            seen += 1;
            if seen > MAX_ENTRIES {
                bail!(
                    "more than {MAX_ENTRIES} entries under {}: a Source's directory should hold its manifests",
                    root.display()
                );
            }
            let name = entry.file_name().to_string_lossy().to_string();
            let path = entry.path();
            // Symlinks are not followed: a tree must not reach outside
            // its root.
            let ft = entry.file_type()?;
            if ft.is_dir() {
                if !pam_manifests::load::is_hidden(&name) {
                    stack.push(path);
                }
                continue;
            }
            if !ft.is_file() || !is_manifest(&name) {
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .expect("under the root")
                .to_string_lossy()
                .replace('\\', "/");
            let len = entry.metadata()?.len();
            if len > MAX_FILE_BYTES {
                bail!(
                    "{rel}: {len} bytes, over the {MAX_FILE_BYTES}-byte limit of a manifest file"
                );
            }
            bytes_total += len;
            if bytes_total > MAX_TREE_BYTES {
                bail!(
                    "more than {MAX_TREE_BYTES} bytes of manifest files under {}",
                    root.display()
                );
            }
            let bytes = std::fs::read(&path).with_context(|| format!("read {rel}"))?;
            let id = hex::encode(Sha256::digest(&bytes));
            let content =
                String::from_utf8(bytes).map_err(|_| anyhow::anyhow!("{rel}: not UTF-8 text"))?;
            files.push(TreeFile {
                path: rel,
                id,
                content,
            });
            if files.len() > MAX_FILES {
                bail!(
                    "more than {MAX_FILES} manifest files under {}",
                    root.display()
                );
            }
        }
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(Tree {
        revision: dir_revision(&files),
        files,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Writes `text` to `root/rel`, making its directories.
    pub(crate) fn write(root: &Path, rel: &str, text: &str) {
        let p = root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn a_directory_tree_is_its_manifest_files_and_a_content_revision() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), "a.yaml", "x: 1\n");
        write(d.path(), "sub/b.yml", "y: 2\n");
        write(d.path(), "sub/c.json", "{}\n");
        write(d.path(), "README.md", "no\n");
        write(d.path(), ".hidden/d.yaml", "no\n");
        write(d.path(), "sub/.e.yaml", "no\n");
        let t = read_dir(d.path()).unwrap();
        let paths: Vec<_> = t.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["a.yaml", "sub/b.yml", "sub/c.json"]);
        assert!(t.revision.starts_with("sha256:"));
        assert_eq!(read_dir(d.path()).unwrap().revision, t.revision);
        write(d.path(), "a.yaml", "x: 2\n");
        assert_ne!(read_dir(d.path()).unwrap().revision, t.revision);
    }
}
