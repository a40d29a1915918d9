//! What the embedded cluster needs of the machine: the PostgreSQL server
//! binaries, and an unprivileged user to run them as when pamd is root
//! (PostgreSQL refuses to run as root).

use super::*;

/// `PAM_PG_BIN_DIR` alone when set; otherwise the first PATH entry holding
/// all of [`BINARIES`], then `/usr/lib/postgresql/<highest version>/bin`.
pub fn find_bin_dir() -> anyhow::Result<PathBuf> {
    let candidates: Vec<PathBuf> = match std::env::var_os(BIN_DIR_ENV) {
        Some(dir) => vec![PathBuf::from(dir)],
        None => {
            let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
                .map(|p| std::env::split_paths(&p).collect())
                .unwrap_or_default();
            dirs.extend(versioned_dirs(Path::new("/usr/lib/postgresql")));
            dirs
        }
    };
    candidates
        .into_iter()
        .find(|dir| BINARIES.iter().all(|b| is_executable(&dir.join(b))))
        .ok_or_else(|| {
            let searched = match std::env::var_os(BIN_DIR_ENV) {
                Some(dir) => format!("in {BIN_DIR_ENV}={}", PathBuf::from(dir).display()),
                None => "on PATH or under /usr/lib/postgresql/*/bin".to_string(),
            };
            anyhow::anyhow!(
                "PostgreSQL server binaries not found ({}) {searched}; install postgresql-15 (Debian: apt-get install postgresql-15) or pass --database-url",
                BINARIES.join(", ")
            )
        })
}

/// `<root>/<version>/bin`, highest version first.
pub(super) fn versioned_dirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let key: Option<Vec<u32>> = name.split('.').map(|p| p.parse().ok()).collect();
            key.map(|k| (k, e.path().join("bin")))
        })
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, p)| p).collect()
}

pub(super) fn is_executable(path: &Path) -> bool {
    fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// The account to run PostgreSQL as when we are root: `pam`, created when
/// missing, else `nobody`.
pub(super) fn pg_user() -> anyhow::Result<RunAs> {
    if let Some(user) = lookup_user(ROLE) {
        return Ok(user);
    }
    let created = Command::new("useradd")
        .args([
            "--system",
            "--no-create-home",
            "--shell",
            "/usr/sbin/nologin",
            ROLE,
        ])
        .output();
    match created {
        Ok(out) if out.status.success() => {
            tracing::info!(
                user = ROLE,
                "created system user for the embedded PostgreSQL"
            )
        }
        Ok(out) => tracing::warn!(user = ROLE, error = %last_line(&out), "useradd failed"),
        Err(e) => tracing::warn!(user = ROLE, error = %e, "useradd could not run"),
    }
    // A concurrent pamd or test may have created it meanwhile.
    if let Some(user) = lookup_user(ROLE) {
        return Ok(user);
    }
    tracing::warn!("running the embedded PostgreSQL as nobody");
    lookup_user("nobody").context(
        "running as root, and neither user pam nor nobody exists to run PostgreSQL as; create user pam",
    )
}

pub(super) fn lookup_user(name: &str) -> Option<RunAs> {
    let id = |flag: &str| -> Option<u32> {
        let out = Command::new("id").args([flag, name]).output().ok()?;
        if !out.status.success() {
            return None;
        }
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    Some(RunAs {
        name: name.to_string(),
        uid: id("-u")?,
        gid: id("-g")?,
    })
}

pub(super) fn chown_tree(path: &Path, uid: u32, gid: u32) -> anyhow::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
        .with_context(|| format!("chown {}", path.display()))?;
    if fs::symlink_metadata(path)?.is_dir() {
        for entry in fs::read_dir(path)? {
            chown_tree(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

#[allow(unsafe_code)]
pub(super) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// The effective uid (names the per-user test cluster).
#[allow(unsafe_code)]
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}
