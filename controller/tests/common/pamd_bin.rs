//! Starting the real `pamd` binary on a temp data dir, shared by the tests
//! that do (`#[path = "common/pamd_bin.rs"] mod pamd_bin;`): they differ in
//! how they wait for it and what they kill, not in how it is started.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A new, empty temp dir named `{prefix}-{random}`.
pub fn scratch_root(prefix: &str) -> PathBuf {
    let id = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let root = std::env::temp_dir().join(format!("{prefix}-{id}"));
    std::fs::create_dir_all(&root).unwrap();
    root
}

/// A temp dir holding `data/` (pamd's data dir) and pamd's logs. On drop,
/// `cleanup` stops what a failed test left running in it (each test file
/// knows what it starts), then the dir is removed.
pub struct Scratch {
    pub root: PathBuf,
    cleanup: fn(&Scratch),
}

impl Scratch {
    pub fn with_cleanup(prefix: &str, cleanup: fn(&Scratch)) -> Self {
        Scratch {
            root: scratch_root(prefix),
            cleanup,
        }
    }

    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// The embedded cluster's `postmaster.pid`.
    pub fn pid_file(&self) -> PathBuf {
        self.data_dir().join("postgres/postmaster.pid")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        (self.cleanup)(self);
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// pamd with a clean environment (no DATABASE_URL and no PAM_* leaking in),
/// its stderr in `log`.
pub fn pamd_command(log: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pamd"));
    for var in [
        "DATABASE_URL",
        "PAM_DATABASE_URL",
        "PAM_CONFIG",
        "PAM_LISTEN",
        "PAM_DATA_DIR",
        "PAM_LOCAL_WORKER",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("PAM_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap());
    cmd
}

/// pamd on `data_dir`, listening on a free port of 127.0.0.1: the child
/// and its port.
pub fn spawn_pamd(data_dir: &Path, log: &Path) -> (Child, u16) {
    let port = free_port();
    let child = pamd_command(log)
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .spawn()
        .unwrap();
    (child, port)
}
