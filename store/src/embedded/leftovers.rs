//! What a crash leaves of a cluster, whether it is still alive, and what
//! [`EmbeddedPg::start`] does about it ([`EmbeddedPg::observe`]).
//!
//! PostgreSQL and `pg_ctl` judge the pid in `postmaster.pid` (and in the
//! socket lock file `.s.PGSQL.<port>.lock`) by `kill(pid, 0)`: a postmaster
//! that is a zombie, or a pid reused by any other process of the same
//! user, looks alive. `pg_ctl status` then says "running", and `postgres`
//! refuses to start ("lock file already exists"). After a crash of the whole
//! stack on a machine whose PID 1 is slow to reap, both happen.
//!
//! Here a lock file's pid is alive only when it is a live, non-zombie
//! `postgres` process of the data dir's owner whose working directory is
//! the data dir the lock names (a postmaster changes into its data dir
//! before it writes its pid file, and its backends inherit that; unlike its
//! command line, the working directory is absolute and symlink-free).
//!
//! # Guarantees
//! - A lock file is stale only when its process is gone, a zombie, not
//!   `postgres`, another user's, or serving another data dir. A process
//!   whose working directory cannot be read counts as alive.
//! - A stale lock file is removed only once no process of the cluster is
//!   left: PostgreSQL finds its old shared memory by a key made from the
//!   data dir's inode, not from the pid file, so it still removes an
//!   unused segment and refuses one still attached.
//! - A server of ours is reused only when it accepts connections.
//! - Without `/proc` (not Linux), alive means `kill(pid, 0)` succeeds, as
//!   in `pg_ctl`, and no other processes are found.
//!
//! # Caveats
//! - Processes in another PID namespace are invisible here; if they still
//!   hold the cluster's shared memory PostgreSQL refuses to start
//!   ("pre-existing shared memory block is still in use"), which
//!   [`EmbeddedPg::start`] waits on too.

use anyhow::Context;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::ping::{self, Ping};
use super::{lock_path, socket_path, EmbeddedPg, ROLE};

/// What [`EmbeddedPg::observe`] found.
pub(super) enum Observed {
    /// Our server runs and accepts connections: reuse it.
    Accepting,
    /// No server of ours runs and no stale lock file is in the way.
    Down,
    /// Something of an earlier server must end first.
    Wait(Wait),
}

/// What [`EmbeddedPg::start`] waits for, and what to do if it never ends.
pub(super) struct Wait {
    pub what: String,
    pub remedy: String,
}

impl EmbeddedPg {
    /// What runs on the cluster now. Removes lock files no live server
    /// holds, once no process of an earlier server is left.
    pub(super) fn observe(&self) -> anyhow::Result<Observed> {
        let pid_file = LockFile::read(&self.cluster_dir.join("postmaster.pid"));
        let cluster = self.cluster_dir.display();
        if let Some(pid) = self.live_postmaster(pid_file.as_ref()) {
            self.check_ours()?;
            let not_yet = match ping::ping(&socket_path(&self.socket_dir, self.port()), ROLE) {
                Ping::Accepting => return Ok(Observed::Accepting),
                Ping::NotYet(message) => message,
                Ping::NoAnswer(e) => format!("no answer on its socket: {e}"),
            };
            let log = self.log_file.display();
            return Ok(Observed::Wait(Wait {
                what: format!(
                    "the embedded PostgreSQL (pid {pid}) on {cluster} does not accept connections yet ({not_yet})"
                ),
                remedy: format!(
                    "see {log}; if it is stuck, stop it (kill {pid}) and start pamd again"
                ),
            }));
        }
        let left = processes_of(&self.cluster_dir);
        if !left.is_empty() {
            let pids: Vec<String> = left.iter().map(u32::to_string).collect();
            let pids = pids.join(" ");
            return Ok(Observed::Wait(Wait {
                what: format!(
                    "processes of an earlier embedded PostgreSQL on {cluster} are still running (pids {pids}); it cannot start again until they exit"
                ),
                remedy: format!("kill them (kill -9 {pids}) and start pamd again"),
            }));
        }
        // The pid file is judged against our cluster; the socket lock
        // against the data dir it names: a socket dir may be shared with
        // another cluster, whose live lock stays (`postgres` then fails
        // and we name the file).
        let socket_lock = LockFile::read(&lock_path(&self.socket_dir, self.port()));
        let judged = [
            pid_file.map(|l| (l.stale(Some(&self.cluster_dir)), l)),
            socket_lock.map(|l| (l.stale(l.data_dir.as_deref()), l)),
        ];
        for (lock, why) in judged
            .into_iter()
            .flatten()
            .filter_map(|(w, l)| Some((l, w?)))
        {
            fs::remove_file(&lock.path)
                .with_context(|| format!("remove the stale {}", lock.path.display()))?;
            tracing::warn!(file = %lock.path.display(), "removed a lock file left by a crashed PostgreSQL: {why}");
        }
        Ok(Observed::Down)
    }

    /// The pid of the server running on our cluster, if one does.
    pub(super) fn live_postmaster(&self, pid_file: Option<&LockFile>) -> Option<u32> {
        let lock = pid_file?;
        lock.stale(Some(&self.cluster_dir))
            .is_none()
            .then_some(lock.pid?)
    }
}

/// A PostgreSQL lock file: `postmaster.pid` or the socket lock. Line 1 is
/// the pid, line 2 the data dir, line 5 the socket dir.
#[derive(Debug)]
pub(super) struct LockFile {
    path: PathBuf,
    /// None: the file is empty or garbled (a server crashed while writing
    /// it, or one is writing it now).
    pid: Option<u32>,
    data_dir: Option<PathBuf>,
}

impl LockFile {
    /// None when `path` does not exist.
    pub fn read(path: &Path) -> Option<Self> {
        let text = fs::read_to_string(path).ok()?;
        let mut lines = text.lines();
        let pid = lines.next().and_then(|l| l.trim().parse().ok());
        let data_dir = lines.next().filter(|l| !l.is_empty()).map(PathBuf::from);
        Some(Self {
            path: path.to_path_buf(),
            pid,
            data_dir,
        })
    }

    /// Why no live server on `data_dir` holds this lock; None when one
    /// does.
    fn stale(&self, data_dir: Option<&Path>) -> Option<String> {
        match (self.pid, data_dir) {
            (Some(pid), Some(dir)) => server_alive(pid, dir).err(),
            _ => Some(format!("{} names no pid and data dir", self.path.display())),
        }
    }
}

/// Is `pid` a server on `data_dir`? `Err` says why not.
fn server_alive(pid: u32, data_dir: &Path) -> Result<(), String> {
    if !has_proc() {
        return if kill_0(pid) {
            Ok(())
        } else {
            Err(format!("process {pid} is gone"))
        };
    }
    let Some(p) = Proc::read(pid) else {
        return Err(format!("process {pid} is gone"));
    };
    if p.is_zombie() {
        return Err(format!(
            "process {pid} is a zombie (its parent has not reaped it)"
        ));
    }
    if !p.is_postgres() {
        return Err(format!(
            "pid {pid} now belongs to another program ({})",
            p.comm
        ));
    }
    let owner = fs::metadata(data_dir).map(|m| m.uid()).ok();
    if owner.is_some_and(|owner| p.uid != Some(owner)) {
        return Err(format!("pid {pid} is a PostgreSQL of another user"));
    }
    match cwd(pid) {
        Some(dir) if dir != canonical(data_dir) => Err(format!(
            "pid {pid} is a PostgreSQL of another data dir ({})",
            dir.display()
        )),
        _ => Ok(()),
    }
}

/// Live `postgres` processes working in `data_dir`: a postmaster and its
/// backends, or backends a killed postmaster left behind. Sorted by pid.
fn processes_of(data_dir: &Path) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    let data_dir = canonical(data_dir);
    let mut pids: Vec<u32> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&pid| {
            Proc::read(pid).is_some_and(|p| !p.is_zombie() && p.is_postgres())
                && cwd(pid).is_some_and(|dir| dir == data_dir)
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// One line of `/proc/<pid>/stat` and the owner of `/proc/<pid>`.
struct Proc {
    comm: String,
    state: char,
    uid: Option<u32>,
}

impl Proc {
    fn read(pid: u32) -> Option<Self> {
        let dir = PathBuf::from(format!("/proc/{pid}"));
        let stat = fs::read_to_string(dir.join("stat")).ok()?;
        // `pid (comm) state …`: comm may hold spaces and parentheses.
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let state = stat.get(close + 1..)?.split_whitespace().next()?;
        Some(Self {
            comm: stat.get(open + 1..close)?.to_string(),
            state: state.chars().next()?,
            uid: fs::metadata(&dir).map(|m| m.uid()).ok(),
        })
    }

    fn is_zombie(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }

    /// `postmaster` is the old name of the same binary.
    fn is_postgres(&self) -> bool {
        self.comm == "postgres" || self.comm == "postmaster"
    }
}

/// Absolute and symlink-free, as the kernel reports it.
fn cwd(pid: u32) -> Option<PathBuf> {
    fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

/// `path` as [`cwd`] would report it (itself if it does not exist).
fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

fn has_proc() -> bool {
    Path::new("/proc/self/stat").exists()
}

#[allow(unsafe_code)]
fn kill_0(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_but_not_a_postgres() {
        let me = std::process::id();
        let here = std::env::current_dir().unwrap();
        let err = server_alive(me, &here).unwrap_err();
        assert!(err.contains("another program"), "{err}");
    }

    #[test]
    fn a_missing_pid_is_gone() {
        // Above the kernel's pid_max (at most 2^22).
        let err = server_alive(5_000_000, Path::new("/")).unwrap_err();
        assert!(err.contains("gone"), "{err}");
    }

    #[test]
    fn a_garbled_lock_file_has_no_pid() {
        let path = std::env::temp_dir().join(format!("pam-lock-{}", uuid::Uuid::new_v4()));
        fs::write(&path, "not a pid\n").unwrap();
        let lock = LockFile::read(&path).unwrap();
        fs::remove_file(&path).unwrap();
        assert_eq!(lock.pid, None);
        assert!(LockFile::read(&path).is_none());
    }

    fn kill(signal: &str, pid: u32) {
        let status = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill {signal} {pid}");
    }

    fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// On a real cluster: a server on it with a socket dir that is not
    /// ours is refused (check_ours); a backend left by a killed
    /// postmaster is waited on, and the give-up advice names its pid; once
    /// it is gone the stale lock files go and the cluster starts.
    #[test]
    fn a_foreign_server_is_refused_and_an_orphan_is_named() {
        use super::super::Options;
        let root = std::env::temp_dir().join(format!(
            "pam-left-{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        let mut pg = EmbeddedPg::new(
            &root,
            Options {
                ephemeral: true,
                ..Options::default()
            },
        )
        .unwrap();
        pg.start().unwrap();
        pg.stop().unwrap();

        let other = root.join("other-sockets");
        fs::create_dir_all(&other).unwrap();
        if let Some(user) = &pg.run_as {
            std::os::unix::fs::chown(&other, Some(user.uid), Some(user.gid)).unwrap();
        }
        let out = pg
            .command("pg_ctl")
            .args(["start", "-w", "-D"])
            .arg(&pg.cluster_dir)
            .arg("-l")
            .arg(&pg.log_file)
            .arg("-o")
            .arg(format!("-k {}", other.display()))
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let refused = pg.observe().err().map(|e| e.to_string());
        pg.stop().unwrap();
        let refused = refused.expect("a foreign server is refused");
        assert!(refused.contains("not started by pamd"), "{refused}");

        pg.start().unwrap();
        let pid_file = LockFile::read(&pg.cluster_dir.join("postmaster.pid")).unwrap();
        let postmaster = pid_file.pid.unwrap();
        let backend = processes_of(&pg.cluster_dir)
            .into_iter()
            .find(|&p| p != postmaster)
            .expect("a backend");
        kill("-STOP", backend);
        kill("-KILL", postmaster);
        wait_until("postmaster dies", || {
            Proc::read(postmaster).is_none_or(|p| p.is_zombie())
        });
        let Ok(Observed::Wait(wait)) = pg.observe() else {
            panic!("an orphaned backend is waited on");
        };
        kill("-KILL", backend);
        assert!(wait.what.contains(&backend.to_string()), "{}", wait.what);
        assert!(
            wait.remedy.contains(&format!("kill -9 {backend}")),
            "{}",
            wait.remedy
        );
        wait_until("old backends exit", || {
            processes_of(&pg.cluster_dir).is_empty()
        });
        assert!(matches!(pg.observe(), Ok(Observed::Down)));
        assert!(!pg.cluster_dir.join("postmaster.pid").exists());
        assert!(!lock_path(&pg.socket_dir, pg.port()).exists());
        pg.start().unwrap();
        pg.stop().unwrap();
        fs::remove_dir_all(&root).unwrap();
    }
}
