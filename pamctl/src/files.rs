//! Reading `-f FILE|DIR|-` into the `files` of an apply request.
//!
//! A directory contributes its manifest files (with `-R`, those of its
//! subdirectories too) by the one rule a Source reads a directory with
//! ([`pam_manifests::load::is_manifest_file`]: `*.yaml`, `*.yml`,
//! `*.json`, hidden files and directories left out), in sorted path order
//! so the same tree always makes the same batch. `-` is stdin, labelled
//! `-` in errors.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{CliError, Result};

/// One input file, as sent to the server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InputFile {
    pub name: String,
    pub content: String,
}

fn walk(dir: &Path, recursive: bool, out: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| CliError::usage(format!("cannot read directory {}: {e}", dir.display())))?;
    for entry in entries {
        let entry = entry.map_err(|e| {
            CliError::usage(format!("cannot read directory {}: {e}", dir.display()))
        })?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if pam_manifests::load::is_hidden(&name) {
            continue;
        }
        let ft = std::fs::metadata(&path)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
        if ft.is_dir() {
            if recursive {
                walk(&path, true, out)?;
            }
        } else if pam_manifests::load::is_manifest_file(&name) {
            out.push(path);
        }
    }
    Ok(())
}

fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))
}

/// Reads every `-f` argument. Fails on a missing path, and on a directory
/// with no manifests in it (so a typo never means an empty apply).
pub fn collect(args: &[String], recursive: bool, stdin: &mut dyn Read) -> Result<Vec<InputFile>> {
    if args.is_empty() {
        return Err(CliError::usage("no input: pass -f FILE, -f DIR or -f -"));
    }
    let mut files = Vec::new();
    let mut stdin_used = false;
    for arg in args {
        if arg == "-" {
            if stdin_used {
                return Err(CliError::usage("-f - given more than once"));
            }
            stdin_used = true;
            let mut content = String::new();
            stdin
                .read_to_string(&mut content)
                .map_err(|e| CliError::usage(format!("cannot read stdin: {e}")))?;
            files.push(InputFile {
                name: "-".into(),
                content,
            });
            continue;
        }
        let path = Path::new(arg);
        let meta = std::fs::metadata(path)
            .map_err(|e| CliError::usage(format!("cannot read {arg}: {e}")))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            walk(path, recursive, &mut found)?;
            found.sort();
            if found.is_empty() {
                let mut err = CliError::usage(format!("no *.yaml, *.yml or *.json files in {arg}"));
                if !recursive {
                    err = err.hint("pass -R to read subdirectories too");
                }
                return Err(err);
            }
            for p in found {
                let content = read(&p)?;
                files.push(InputFile {
                    name: p.display().to_string(),
                    content,
                });
            }
        } else {
            files.push(InputFile {
                name: arg.clone(),
                content: read(path)?,
            });
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_are_sorted_filtered_and_recursive_only_with_r() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::create_dir_all(d.join(".git")).unwrap();
        // Hidden files and directories are left out and JSON is read, as
        // a directory Source reads it.
        for f in [
            "b.yaml",
            "a.yml",
            "notes.txt",
            "sub/c.yaml",
            "d.json",
            ".tmp-e.yaml",
            ".git/f.yaml",
            "sub/.g.yml",
        ] {
            std::fs::write(d.join(f), f).unwrap();
        }
        let arg = d.display().to_string();
        let names = |files: Vec<InputFile>| -> Vec<String> {
            files
                .iter()
                .map(|f| f.name.strip_prefix(&arg).unwrap().to_string())
                .collect()
        };
        let flat = collect(std::slice::from_ref(&arg), false, &mut std::io::empty()).unwrap();
        assert_eq!(names(flat), ["/a.yml", "/b.yaml", "/d.json"]);
        let deep = collect(std::slice::from_ref(&arg), true, &mut std::io::empty()).unwrap();
        assert_eq!(names(deep), ["/a.yml", "/b.yaml", "/d.json", "/sub/c.yaml"]);
    }

    #[test]
    fn stdin_missing_paths_and_empty_dirs() {
        let mut input = "kind: Project".as_bytes();
        let got = collect(&["-".into()], false, &mut input).unwrap();
        assert_eq!(
            got,
            [InputFile {
                name: "-".into(),
                content: "kind: Project".into()
            }]
        );
        let e = collect(&["/no/such/file.yaml".into()], false, &mut std::io::empty()).unwrap_err();
        assert!(
            e.message.starts_with("cannot read /no/such/file.yaml"),
            "{}",
            e.message
        );
        let dir = tempfile::tempdir().unwrap();
        let e = collect(
            &[dir.path().display().to_string()],
            false,
            &mut std::io::empty(),
        )
        .unwrap_err();
        assert!(e.message.starts_with("no *.yaml, *.yml or *.json files in"));
        assert_eq!(e.hints, ["pass -R to read subdirectories too"]);
    }
}
