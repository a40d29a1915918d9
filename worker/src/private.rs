//! What the worker keeps on disk is readable by its own user only: anything a
//! run prints — a key, say — lands in its log, and the outbox holds the run's
//! signals. Directories are 0700 and files 0600, whatever the umask; the data
//! dir is made private at start.
//!
//! Not the provider's own files: the agent works in the operator's
//! directory with the umask it was given.

use std::fs::{DirBuilder, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Creates `path` (and missing parents) as 0700 directories; an existing
/// `path` is made 0700.
pub fn dir(path: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(path)?;
    let mode = std::fs::metadata(path)?.mode() & 0o7777;
    if mode != 0o700 {
        std::fs::set_permissions(path, Permissions::from_mode(0o700))?;
    }
    Ok(())
}

/// Open options for a file only its owner may read (0600 when created).
pub fn file() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(0o600);
    o
}

/// `std::fs::write` with a 0600 file.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write;
    let mut f = file().write(true).create(true).truncate(true).open(path)?;
    f.write_all(bytes)
}

/// Makes the worker's data dir private: created 0700, or an existing one
/// owned by this user narrowed to 0700. A directory that is not the
/// worker's own to narrow (another owner, or a sticky shared one such as
/// `/tmp`) is left alone with a warning: its subdirectories are private
/// anyway.
pub fn data_dir(path: &Path) -> io::Result<()> {
    if !path.exists() {
        return dir(path);
    }
    let meta = std::fs::metadata(path)?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    let mine = meta.uid() == nix::unistd::Uid::effective().as_raw();
    if mine && mode & 0o1000 == 0 {
        std::fs::set_permissions(path, Permissions::from_mode(0o700))
    } else {
        tracing::warn!(
            dir = %path.display(),
            mode = format!("{mode:o}"),
            "the worker's data dir is open to other users and not the worker's to narrow; its runs/, outbox/ and sessions/ are 0700"
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o7777
    }

    #[test]
    fn dirs_and_files_are_private_whatever_was_there() {
        let tmp = crate::testdir::TestDir::new("private");
        let d = tmp.path().join("a/b");
        dir(&d).unwrap();
        assert_eq!((mode(&tmp.path().join("a")), mode(&d)), (0o700, 0o700));
        std::fs::set_permissions(&d, Permissions::from_mode(0o755)).unwrap();
        dir(&d).unwrap();
        assert_eq!(mode(&d), 0o700);
        let f = d.join("x.log");
        write(&f, b"secret").unwrap();
        assert_eq!(mode(&f), 0o600);
        let open = tmp.path().join("data");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, Permissions::from_mode(0o755)).unwrap();
        data_dir(&open).unwrap();
        assert_eq!(mode(&open), 0o700);
    }
}
