//! The worker's instance id (OQ-14): a UUID v4 generated once, kept in
//! `<data_dir>/instance_id`, and presented at every registration and
//! heartbeat so the controller can tell a restart from a cloned token.
//!
//! A file that exists but does not hold a UUID is an error, never silently
//! replaced: a new id would read as a reinstall (or a clone) to the
//! controller.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use uuid::Uuid;

/// The path of the instance id file.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("instance_id")
}

/// Reads the instance id, creating it on first use. Safe against two
/// processes starting at once: the file is published with a hard link,
/// which fails if it already exists, and then the winner's id is read.
pub fn load_or_create(data_dir: &Path) -> anyhow::Result<Uuid> {
    let file = path(data_dir);
    if let Some(id) = read(&file)? {
        return Ok(id);
    }
    crate::private::data_dir(data_dir)
        .with_context(|| format!("create data dir {}", data_dir.display()))?;
    let id = Uuid::new_v4();
    let tmp = data_dir.join(format!(".instance_id.{}", Uuid::new_v4().simple()));
    {
        let mut f = crate::private::file()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .with_context(|| format!("write {}", tmp.display()))?;
        writeln!(f, "{id}")?;
        f.sync_all()?;
    }
    let linked = fs::hard_link(&tmp, &file);
    let _ = fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            fs::File::open(data_dir)?.sync_all()?;
            Ok(id)
        }
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            read(&file)?.with_context(|| format!("{} vanished while being created", file.display()))
        }
        Err(e) => Err(e).with_context(|| format!("create {}", file.display())),
    }
}

fn read(file: &Path) -> anyhow::Result<Option<Uuid>> {
    match fs::read_to_string(file) {
        Ok(text) => Uuid::parse_str(text.trim()).map(Some).map_err(|e| {
            anyhow::anyhow!(
                "{} does not hold a UUID ({e}); fix or remove it (removing it makes this worker a new instance)",
                file.display()
            )
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("read {}", file.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;

    #[test]
    fn created_once_and_reused() {
        let d = TestDir::new("instance");
        let dir = d.path().join("nested/data");
        let a = load_or_create(&dir).unwrap();
        assert_eq!(a.get_version_num(), 4);
        let b = load_or_create(&dir).unwrap();
        assert_eq!(a, b);
        assert_eq!(
            fs::read_to_string(path(&dir)).unwrap().trim(),
            a.to_string()
        );
    }

    #[test]
    fn concurrent_starts_agree() {
        let d = TestDir::new("instance");
        let ids: Vec<Uuid> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8)
                .map(|_| s.spawn(|| load_or_create(d.path()).unwrap()))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|i| *i == ids[0]), "{ids:?}");
    }

    #[test]
    fn garbage_is_an_error_not_a_new_id() {
        let d = TestDir::new("instance");
        fs::write(path(d.path()), "not-a-uuid\n").unwrap();
        let e = load_or_create(d.path()).unwrap_err().to_string();
        assert!(e.contains("does not hold a UUID"), "{e}");
        assert_eq!(fs::read_to_string(path(d.path())).unwrap(), "not-a-uuid\n");
    }
}
