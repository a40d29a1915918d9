//! The embedded default: a private PostgreSQL cluster made with the
//! machine's own `initdb`/`pg_ctl`, kept in a data dir and listening on a
//! Unix socket only. pamd uses it when no `--database-url` is given; tests
//! use the same code for their shared throwaway cluster (`pam_testkit::testdb`).
//!
//! Layout under the data dir:
//! - `postgres/` — the cluster (PGDATA), mode 0700;
//! - `run/` — the socket directory, mode 0700 (authentication is `trust`,
//!   so the directory's mode is what keeps other local users out);
//! - `postgres.log` — the server's log.
//!
//! # Guarantees
//! - [`EmbeddedPg::start`] is idempotent: it creates the cluster on first
//!   use, reuses it later, and reuses a server that is already running on
//!   this cluster with our socket dir (a pamd that was `kill -9`'d leaves
//!   its postmaster behind) once it accepts connections.
//! - [`EmbeddedPg::start`] comes up after any crash, whatever
//!   the cluster was left in: lock files (`postmaster.pid`, the socket
//!   lock) naming a pid that is gone, a zombie or another process are
//!   removed ([`leftovers`]); it waits, up to [`START_WAIT`], for a server
//!   in crash recovery or shutting down, and for backends of a killed
//!   postmaster to exit (PostgreSQL refuses to start while they hold its
//!   shared memory). It never reuses a server that does not accept
//!   connections ([`ping`]).
//! - Every failure is one line saying what to do: install PostgreSQL, pick a
//!   shorter data dir, stop a foreign server, which lock file to remove, or
//!   which pids to kill.
//!
//! # Caveats
//! - PostgreSQL refuses to run as root. As root, the cluster is owned by and
//!   run as the system user `pam` (created with `useradd` when missing,
//!   falling back to `nobody`), and the data dir's ancestors get the search
//!   bit (o+x) when they lack it, so that user can reach the cluster.
//!   Each change is logged at info level (docs/operations.md).
//! - Telling our server from a stale lock file reads `/proc` (Linux); see
//!   [`leftovers`] for elsewhere.

mod leftovers;
mod ping;
mod system;

use system::*;
pub use system::{euid, find_bin_dir};

use anyhow::{bail, Context};
use std::fs;
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use leftovers::{LockFile, Observed, Wait};

/// The server binaries the cluster needs, all from one directory.
const BINARIES: [&str; 3] = ["initdb", "pg_ctl", "postgres"];
/// When set, the only directory searched for [`BINARIES`] (operators with
/// an unusual install; tests of the "not installed" error).
pub const BIN_DIR_ENV: &str = "PAM_PG_BIN_DIR";
/// The role every embedded cluster is initialised with.
pub const ROLE: &str = "pam";
/// The port only names the socket file (`.s.PGSQL.<port>`); no TCP listens.
const PORT: u16 = 5432;
/// `sun_path` is 108 bytes including the terminating NUL.
const MAX_SOCKET_PATH: usize = 107;
/// How long [`EmbeddedPg::start`] waits for what an earlier server left
/// running (crash recovery, a shutdown, orphaned backends) before it gives
/// up; `pg_ctl start` gets as long.
pub const START_WAIT: Duration = Duration::from_secs(120);

/// How the cluster is tuned.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// A throwaway cluster (tests): no fsync, no synchronous commit. A crash
    /// may lose or corrupt data, which is fine for data nobody keeps.
    pub ephemeral: bool,
    /// Also listen on 127.0.0.1 at this TCP port (the socket file follows
    /// the port): tests of `--database-url` against a server that is not
    /// pamd's own. `None`: the Unix socket only.
    pub tcp_port: Option<u16>,
    /// Lines added to the rewritten settings (e.g. `ssl = on`).
    pub extra_conf: String,
    /// Files (name, contents) written into the cluster dir at each start,
    /// owned by the server's user with mode 0600: a TLS key, an hba file.
    pub private_files: Vec<(String, String)>,
}

/// The unprivileged account the cluster runs as when pamd is root.
#[derive(Debug, Clone)]
struct RunAs {
    name: String,
    uid: u32,
    gid: u32,
}

/// One embedded cluster, identified by its data dir.
#[derive(Debug)]
pub struct EmbeddedPg {
    bin_dir: PathBuf,
    data_dir: PathBuf,
    cluster_dir: PathBuf,
    socket_dir: PathBuf,
    log_file: PathBuf,
    run_as: Option<RunAs>,
    options: Options,
}

impl EmbeddedPg {
    /// Locates the binaries and lays out the paths; touches nothing yet
    /// except creating `data_dir` (its absolute path is needed).
    pub fn new(data_dir: &Path, options: Options) -> anyhow::Result<Self> {
        let bin_dir = find_bin_dir()?;
        fs::create_dir_all(data_dir)
            .with_context(|| format!("create data dir {}", data_dir.display()))?;
        let data_dir = fs::canonicalize(data_dir)
            .with_context(|| format!("resolve data dir {}", data_dir.display()))?;
        let socket_dir = data_dir.join("run");
        let socket = socket_path(&socket_dir, options.tcp_port.unwrap_or(PORT));
        let len = socket.as_os_str().len();
        if len > MAX_SOCKET_PATH {
            bail!(
                "the embedded PostgreSQL socket path {} is {len} bytes, more than the {MAX_SOCKET_PATH} a Unix socket allows; use a shorter --data-dir",
                socket.display()
            );
        }
        Ok(Self {
            bin_dir,
            cluster_dir: data_dir.join("postgres"),
            log_file: data_dir.join("postgres.log"),
            socket_dir,
            data_dir,
            run_as: None,
            options,
        })
    }

    pub fn cluster_dir(&self) -> &Path {
        &self.cluster_dir
    }

    pub fn socket_dir(&self) -> &Path {
        &self.socket_dir
    }

    pub fn log_file(&self) -> &Path {
        &self.log_file
    }

    /// The connection URL for database `db` on this cluster. The user goes
    /// in the query: sqlx refuses `postgresql://pam@/db` (a user with an
    /// empty host); both sqlx and libpq (psql) read this form.
    pub fn url(&self, db: &str) -> String {
        let host = percent_encode(&self.socket_dir.to_string_lossy());
        let port = self.port();
        format!("postgresql:///{db}?host={host}&port={port}&user={ROLE}")
    }

    fn port(&self) -> u16 {
        self.options.tcp_port.unwrap_or(PORT)
    }

    /// Creates the cluster if needed and starts it unless our server is
    /// already running on it. Blocking: call it from `spawn_blocking`.
    pub fn start(&mut self) -> anyhow::Result<()> {
        if is_root() {
            self.run_as = Some(pg_user()?);
        }
        self.prepare_dirs()?;
        if !self.cluster_dir.join("PG_VERSION").exists() {
            self.initdb()?;
        }
        self.write_conf()?;
        let deadline = Instant::now() + START_WAIT;
        let mut logged: Option<String> = None;
        loop {
            let wait = match self.observe()? {
                Observed::Accepting => {
                    tracing::info!(cluster = %self.cluster_dir.display(), "reusing the running embedded PostgreSQL");
                    return Ok(());
                }
                Observed::Down => match self.pg_ctl_start()? {
                    None => {
                        tracing::info!(cluster = %self.cluster_dir.display(), socket_dir = %self.socket_dir.display(), "embedded PostgreSQL started");
                        return Ok(());
                    }
                    Some(wait) => wait,
                },
                Observed::Wait(wait) => wait,
            };
            if Instant::now() >= deadline {
                bail!(
                    "{} (waited {} s); {}",
                    wait.what,
                    START_WAIT.as_secs(),
                    wait.remedy
                );
            }
            if logged.as_deref() != Some(&wait.what) {
                tracing::warn!(cluster = %self.cluster_dir.display(), "waiting: {}", wait.what);
                logged = Some(wait.what);
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// `pg_ctl start`; `Some` when a process of an earlier server still
    /// holds the cluster's shared memory (worth waiting for).
    fn pg_ctl_start(&self) -> anyhow::Result<Option<Wait>> {
        let log_start = fs::metadata(&self.log_file).map(|m| m.len()).unwrap_or(0);
        let mut cmd = self.command("pg_ctl");
        cmd.arg("start")
            .arg("-w")
            .args(["-t", &START_WAIT.as_secs().to_string()])
            .arg("-D")
            .arg(&self.cluster_dir)
            .arg("-l")
            .arg(&self.log_file);
        let out = cmd.output().context("run pg_ctl start")?;
        if out.status.success() {
            return Ok(None);
        }
        let failure = self.diagnose_start_failure(&out, log_start);
        if failure.contains("pre-existing shared memory block") {
            return Ok(Some(Wait {
                what: failure,
                remedy: "a process of an earlier server still uses its shared memory: find it with `ipcs -mp` and kill it, then start pamd again".to_string(),
            }));
        }
        bail!("{failure}")
    }

    /// Stops the server (fast shutdown: open transactions are rolled back)
    /// if it is running. Blocking.
    pub fn stop(&mut self) -> anyhow::Result<()> {
        if self.run_as.is_none() && is_root() {
            self.run_as = Some(pg_user()?);
        }
        let pid_file = LockFile::read(&self.cluster_dir.join("postmaster.pid"));
        if self.live_postmaster(pid_file.as_ref()).is_none() {
            return Ok(());
        }
        let mut cmd = self.command("pg_ctl");
        cmd.arg("stop")
            .args(["-m", "fast", "-w", "-t", "120", "-D"])
            .arg(&self.cluster_dir);
        self.checked(&mut cmd, "pg_ctl stop")?;
        tracing::info!(cluster = %self.cluster_dir.display(), "embedded PostgreSQL stopped");
        Ok(())
    }

    /// A running server is ours when it listens in our socket dir
    /// (line 5 of `postmaster.pid`).
    fn check_ours(&self) -> anyhow::Result<()> {
        let pid_file = self.cluster_dir.join("postmaster.pid");
        let text = fs::read_to_string(&pid_file).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let pid = lines.first().copied().unwrap_or("?");
        let socket_dir = lines.get(4).copied().unwrap_or("");
        if Path::new(socket_dir) != self.socket_dir {
            bail!(
                "a PostgreSQL server not started by pamd (pid {pid}, socket dir {socket_dir:?}) is running on {}; stop it, or remove {} if that process is gone",
                self.cluster_dir.display(),
                pid_file.display()
            );
        }
        Ok(())
    }

    fn prepare_dirs(&self) -> anyhow::Result<()> {
        for dir in [&self.cluster_dir, &self.socket_dir] {
            fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
            fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
                .with_context(|| format!("chmod 0700 {}", dir.display()))?;
        }
        // The server's log records failed statements' text: its owner's
        // only.
        {
            fs::OpenOptions::new()
                .create(true)
                .append(true)
                .mode(0o600)
                .open(&self.log_file)
                .with_context(|| format!("create {}", self.log_file.display()))?;
            fs::set_permissions(&self.log_file, fs::Permissions::from_mode(0o600))
                .with_context(|| format!("chmod 0600 {}", self.log_file.display()))?;
        }
        let Some(user) = &self.run_as else {
            return Ok(());
        };
        for path in [&self.cluster_dir, &self.socket_dir, &self.log_file] {
            if fs::metadata(path)?.uid() != user.uid {
                chown_tree(path, user.uid, user.gid)?;
                tracing::info!(path = %path.display(), user = %user.name, "gave the embedded PostgreSQL's files to its user");
            }
        }
        // The user must be able to reach the cluster: add only the search
        // bit where an ancestor lacks it (e.g. /root is 0700).
        for dir in self.data_dir.ancestors() {
            let meta = fs::metadata(dir).with_context(|| format!("stat {}", dir.display()))?;
            let mode = meta.permissions().mode();
            if mode & 0o001 == 0 {
                fs::set_permissions(dir, fs::Permissions::from_mode((mode | 0o001) & 0o7777))
                    .with_context(|| format!("chmod o+x {}", dir.display()))?;
                tracing::info!(dir = %dir.display(), user = %user.name, "added o+x so the embedded PostgreSQL's user can reach its data dir");
            }
        }
        Ok(())
    }

    fn initdb(&self) -> anyhow::Result<()> {
        if fs::read_dir(&self.cluster_dir)?.next().is_some() {
            bail!(
                "{} is not empty but holds no PostgreSQL cluster (no PG_VERSION); move it away",
                self.cluster_dir.display()
            );
        }
        tracing::info!(cluster = %self.cluster_dir.display(), "creating the embedded PostgreSQL cluster");
        let mut cmd = self.command("initdb");
        cmd.arg("-D").arg(&self.cluster_dir).args([
            "-U",
            ROLE,
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-locale",
        ]);
        if self.options.ephemeral {
            cmd.arg("--no-sync");
        }
        self.checked(&mut cmd, "initdb")?;
        let mut conf = fs::OpenOptions::new()
            .append(true)
            .open(self.cluster_dir.join("postgresql.conf"))?;
        writeln!(
            conf,
            "\n# pamd's settings (rewritten at every start)\ninclude_if_exists = 'pam.conf'"
        )?;
        Ok(())
    }

    /// Rewritten at every start, so a moved data dir still gets its socket
    /// in the right place.
    fn write_conf(&self) -> anyhow::Result<()> {
        let mut text = format!(
            "# Written by pamd at every start: edits here are lost.\n\
             # Put your own settings in postgresql.conf.\n\
             listen_addresses = '{}'\n\
             port = {}\n\
             unix_socket_directories = '{}'\n\
             unix_socket_permissions = 0700\n",
            if self.options.tcp_port.is_some() {
                "127.0.0.1"
            } else {
                ""
            },
            self.port(),
            self.socket_dir.to_string_lossy().replace('\'', "''")
        );
        text.push_str(&self.options.extra_conf);
        text.push('\n');
        for (name, contents) in &self.options.private_files {
            let path = self.cluster_dir.join(name);
            let _ = fs::remove_file(&path);
            fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .and_then(|mut f| f.write_all(contents.as_bytes()))
                .with_context(|| format!("write {}", path.display()))?;
            if let Some(user) = &self.run_as {
                std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid))?;
            }
        }
        if self.options.ephemeral {
            text.push_str("fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n");
        }
        let path = self.cluster_dir.join("pam.conf");
        fs::write(&path, text).with_context(|| format!("write {}", path.display()))?;
        if let Some(user) = &self.run_as {
            std::os::unix::fs::chown(&path, Some(user.uid), Some(user.gid))?;
        }
        Ok(())
    }

    /// Turns a failed `pg_ctl start` into one line, naming the lock file to
    /// remove when a lock is in the way. Reads the log from `log_start`
    /// (its length before this start): older lines are older failures.
    fn diagnose_start_failure(&self, out: &Output, log_start: u64) -> String {
        let mut log = String::new();
        if let Ok(mut file) = fs::File::open(&self.log_file) {
            if file.seek(std::io::SeekFrom::Start(log_start)).is_ok() {
                let _ = file.read_to_string(&mut log);
            }
        }
        let fatal = log
            .lines()
            .rev()
            .find(|l| l.contains("FATAL:"))
            .map(|l| l[l.find("FATAL:").unwrap_or(0)..].trim().to_string());
        let Some(fatal) = fatal else {
            return format!(
                "embedded PostgreSQL did not start: {} (log: {})",
                last_line(out),
                self.log_file.display()
            );
        };
        if let Some(file) = lock_file_in(&fatal) {
            let path = if Path::new(&file).is_absolute() {
                PathBuf::from(file)
            } else {
                self.cluster_dir.join(file)
            };
            return format!(
                "embedded PostgreSQL did not start: {fatal}; another PostgreSQL holds the lock: stop it, or remove {} if no such server is running",
                path.display()
            );
        }
        format!(
            "embedded PostgreSQL did not start: {fatal} (log: {})",
            self.log_file.display()
        )
    }

    /// Runs `cmd` (`what`, e.g. `initdb`) on this cluster; its failure is
    /// an error naming the cluster and the command's last line of output.
    fn checked(&self, cmd: &mut Command, what: &str) -> anyhow::Result<Output> {
        let out = cmd.output().with_context(|| format!("run {what}"))?;
        if !out.status.success() {
            bail!(
                "{what} failed for {}: {}",
                self.cluster_dir.display(),
                last_line(&out)
            );
        }
        Ok(out)
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin_dir.join(program));
        cmd.current_dir(&self.data_dir);
        for var in ["PGDATA", "PGPORT", "PGHOST", "PGUSER", "PGDATABASE"] {
            cmd.env_remove(var);
        }
        if let Some(user) = &self.run_as {
            cmd.uid(user.uid).gid(user.gid).env("HOME", &self.data_dir);
        }
        cmd
    }
}

fn socket_path(socket_dir: &Path, port: u16) -> PathBuf {
    socket_dir.join(format!(".s.PGSQL.{port}"))
}

fn lock_path(socket_dir: &Path, port: u16) -> PathBuf {
    socket_dir.join(format!(".s.PGSQL.{port}.lock"))
}

/// Creates database `name` on the server at `admin_url` unless it exists.
pub async fn ensure_database(admin_url: &str, name: &str) -> anyhow::Result<()> {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(admin_url)
        .await
        .context("connect to the embedded PostgreSQL")?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(&mut conn)
            .await?;
    if !exists {
        let created = sqlx::query(&format!("CREATE DATABASE \"{name}\""))
            .execute(&mut conn)
            .await;
        match created {
            Ok(_) => tracing::info!(database = name, "created database"),
            // Someone else created it first.
            Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => {}
            Err(e) => return Err(e).context(format!("create database {name}")),
        }
    }
    conn.close().await?;
    Ok(())
}

/// Whether [`ensure_database`] failed because the server it reached went
/// away or is not taking connections yet or any more (a reused postmaster
/// that was shutting down, or is in crash recovery): worth starting again
/// — [`EmbeddedPg::start`] then waits for it — rather than giving up.
pub fn transient(e: &anyhow::Error) -> bool {
    e.chain().any(|c| match c.downcast_ref::<sqlx::Error>() {
        Some(sqlx::Error::Io(_)) | Some(sqlx::Error::PoolTimedOut) => true,
        // cannot_connect_now (starting up, shutting down, in recovery),
        // admin_shutdown, crash_shutdown.
        Some(sqlx::Error::Database(d)) => {
            matches!(d.code().as_deref(), Some("57P03" | "57P01" | "57P02"))
        }
        _ => false,
    })
}

/// `lock file "X" already exists` → X.
fn lock_file_in(fatal: &str) -> Option<String> {
    let rest = &fatal[fatal.find("lock file \"")? + "lock file \"".len()..];
    Some(rest[..rest.find('"')?].to_string())
}

fn last_line(out: &Output) -> String {
    let last = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .map(|l| l.trim().to_string())
    };
    last(&out.stderr)
        .or_else(|| last(&out.stdout))
        .unwrap_or_else(|| "(no output)".to_string())
}

/// Percent-encodes everything but unreserved characters and `/`.
fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_file_is_extracted_from_fatal() {
        let fatal = r#"FATAL:  lock file "/d/run/.s.PGSQL.5432.lock" already exists"#;
        assert_eq!(
            lock_file_in(fatal).as_deref(),
            Some("/d/run/.s.PGSQL.5432.lock")
        );
        assert_eq!(lock_file_in("FATAL: something else"), None);
    }

    #[test]
    fn url_encodes_the_socket_dir() {
        assert_eq!(percent_encode("/a b/c@d"), "/a%20b/c%40d");
    }

    #[test]
    fn versions_sort_highest_first() {
        let root = std::env::temp_dir().join(format!("pam-pgver-{}", uuid::Uuid::new_v4()));
        for v in ["9.6", "15", "13", "notaversion"] {
            fs::create_dir_all(root.join(v).join("bin")).unwrap();
        }
        let dirs = versioned_dirs(&root);
        let names: Vec<String> = dirs
            .iter()
            .map(|p| {
                p.parent()
                    .unwrap()
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, ["15", "13", "9.6"]);
        fs::remove_dir_all(root).unwrap();
    }
}
