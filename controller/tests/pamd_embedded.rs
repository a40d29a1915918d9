//! The real `pamd` binary on its embedded PostgreSQL: starts with only a
//! data dir, keeps data across restarts, stops its cluster on SIGTERM,
//! reuses a cluster orphaned by `kill -9`, and fails in one line when
//! PostgreSQL is not installed or the config has a typo.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use pam_store::embedded::{self as embedded_pg, EmbeddedPg};
use sqlx::Connection;

#[path = "common/pamd_bin.rs"]
mod pamd_bin;
use pamd_bin::{free_port, pamd_command, spawn_pamd, Scratch};

impl Scratch {
    /// On drop, stops any cluster left in it (a failed test).
    fn new() -> Self {
        Scratch::with_cleanup("pam-pamd", |s| {
            if s.pid_file().exists() {
                if let Ok(mut pg) = EmbeddedPg::new(&s.data_dir(), embedded_pg::Options::default())
                {
                    let _ = pg.stop();
                }
            }
        })
    }

    /// The embedded cluster's `pam` database, straight on its socket.
    fn db_url(&self) -> String {
        let socket_dir = self.data_dir().join("run");
        format!(
            "postgresql:///pam?host={}&port=5432&user=pam",
            socket_dir.display()
        )
    }
}

struct Pamd {
    child: Child,
    log: PathBuf,
    port: u16,
}

impl Drop for Pamd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(scratch: &Scratch, name: &str) -> Pamd {
    let log = scratch.root.join(format!("{name}.log"));
    let (child, port) = spawn_pamd(&scratch.data_dir(), &log);
    let mut pamd = Pamd { child, log, port };
    wait_healthy(&mut pamd);
    pamd
}

fn log_of(pamd: &Pamd) -> String {
    std::fs::read_to_string(&pamd.log).unwrap_or_default()
}

fn wait_healthy(pamd: &mut Pamd) {
    let deadline = Instant::now() + Duration::from_secs(90);
    let url = format!("http://127.0.0.1:{}/healthz", pamd.port);
    loop {
        if let Some(status) = pamd.child.try_wait().unwrap() {
            panic!("pamd exited ({status}) before serving:\n{}", log_of(pamd));
        }
        if let Ok(body) = blocking_get(&url) {
            assert_eq!(body, r#"{"status":"ok"}"#);
            return;
        }
        assert!(
            Instant::now() < deadline,
            "pamd not healthy within 90 s:\n{}",
            log_of(pamd)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A minimal HTTP/1.0 GET (the test needs nothing more).
fn blocking_get(url: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").unwrap();
    let (addr, path) = rest.split_at(rest.find('/').unwrap());
    let mut stream = std::net::TcpStream::connect(addr)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    if !response.starts_with("HTTP/1.0 200") && !response.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(response));
    }
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default())
}

fn signal(pamd: &Pamd, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pamd.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_exit(pamd: &mut Pamd) -> ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = pamd.child.try_wait().unwrap() {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "pamd did not exit:\n{}",
            log_of(pamd)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn insert_project(url: &str, slug: &str) {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query(
        "INSERT INTO projects (id, name, slug, status, created_at, updated_at) \
         VALUES ($1, $2, $2, 'active', now(), now())",
    )
    .bind(uuid::Uuid::new_v4())
    .bind(slug)
    .execute(&mut conn)
    .await
    .unwrap();
    conn.close().await.unwrap();
}

async fn project_slugs(url: &str) -> Vec<String> {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let slugs = sqlx::query_scalar("SELECT slug FROM projects ORDER BY slug")
        .fetch_all(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    slugs
}

#[tokio::test(flavor = "multi_thread")]
async fn embedded_cluster_survives_restarts_and_stops_with_pamd() {
    let scratch = Scratch::new();

    // First start: creates the cluster; the data is really in it.
    let mut pamd = start(&scratch, "first");
    assert!(scratch.pid_file().exists());
    insert_project(&scratch.db_url(), "kept").await;
    signal(&pamd, "-TERM");
    let status = wait_exit(&mut pamd);
    assert!(status.success(), "{status}:\n{}", log_of(&pamd));
    assert!(
        !scratch.pid_file().exists(),
        "SIGTERM must stop the embedded cluster:\n{}",
        log_of(&pamd)
    );

    // Second start: same cluster, the row is still there.
    let mut pamd = start(&scratch, "second");
    assert_eq!(project_slugs(&scratch.db_url()).await, ["kept"]);

    // kill -9 leaves the postmaster running; the next pamd reuses it.
    signal(&pamd, "-KILL");
    wait_exit(&mut pamd);
    assert!(
        scratch.pid_file().exists(),
        "the orphaned postmaster keeps running"
    );
    let mut pamd = start(&scratch, "third");
    assert!(
        log_of(&pamd).contains("reusing the running embedded PostgreSQL"),
        "{}",
        log_of(&pamd)
    );
    insert_project(&scratch.db_url(), "more").await;
    assert_eq!(project_slugs(&scratch.db_url()).await, ["kept", "more"]);
    signal(&pamd, "-TERM");
    assert!(wait_exit(&mut pamd).success(), "{}", log_of(&pamd));
    assert!(!scratch.pid_file().exists());
}

#[test]
fn missing_postgres_is_one_line_saying_what_to_install() {
    let scratch = Scratch::new();
    let empty = scratch.root.join("no-postgres-here");
    std::fs::create_dir_all(&empty).unwrap();
    let log = scratch.root.join("missing.log");
    let status = pamd_command(&log)
        .env(embedded_pg::BIN_DIR_ENV, &empty)
        .arg("--data-dir")
        .arg(scratch.data_dir())
        .args(["--listen", &format!("127.0.0.1:{}", free_port())])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let stderr = std::fs::read_to_string(&log).unwrap();
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    let line = errors[0];
    assert!(
        line.contains("PostgreSQL server binaries not found"),
        "{line}"
    );
    assert!(line.contains("apt-get install postgresql-15"), "{line}");
    assert!(line.contains("--database-url"), "{line}");
}

#[test]
fn an_unknown_config_key_is_named() {
    let scratch = Scratch::new();
    let config = scratch.root.join("pamd.toml");
    std::fs::write(&config, "[retention]\nevents_dayz = 3\n").unwrap();
    let log = scratch.root.join("config.log");
    let status = pamd_command(&log)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(scratch.data_dir())
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let stderr = std::fs::read_to_string(&log).unwrap();
    assert!(stderr.contains("events_dayz"), "{stderr}");
    assert!(stderr.contains("pamd.toml"), "{stderr}");
    assert!(
        !scratch.data_dir().join("postgres").exists(),
        "nothing starts on a bad config"
    );
}

/// `--database-url` (here given through the config file, with `listen`):
/// no embedded cluster is made; pamd migrates and serves on that server.
#[tokio::test(flavor = "multi_thread")]
async fn config_file_listen_and_database_url() {
    let scratch = Scratch::new();
    let admin = pam_testkit::testdb::admin_url().await.unwrap();
    let db = format!(
        "pam_url_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    embedded_pg::ensure_database(&admin, &db).await.unwrap();
    let url = admin.replacen("/postgres?", &format!("/{db}?"), 1);
    assert_ne!(url, admin, "admin URL names the postgres database: {admin}");

    let port = free_port();
    let config = scratch.root.join("pamd.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\ndatabase_url = \"{url}\"\n[retention]\nevents_days = 7\n"
        ),
    )
    .unwrap();
    let log = scratch.root.join("url.log");
    let child = pamd_command(&log)
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(scratch.data_dir())
        .spawn()
        .unwrap();
    let mut pamd = Pamd { child, log, port };
    wait_healthy(&mut pamd);
    let ready = blocking_get(&format!("http://127.0.0.1:{port}/readyz")).unwrap();
    assert_eq!(ready, r#"{"status":"ready"}"#);
    assert!(log_of(&pamd).contains("events_days=7"), "{}", log_of(&pamd));
    assert!(!scratch.data_dir().join("postgres").exists());
    signal(&pamd, "-TERM");
    assert!(wait_exit(&mut pamd).success(), "{}", log_of(&pamd));
}

/// Two clusters sharing a socket dir (here through a symlink): the second
/// fails in one line naming the lock file to remove.
#[test]
fn a_lock_conflict_names_the_file_to_remove() {
    let first = Scratch::new();
    let second = Scratch::new();
    let mut a = EmbeddedPg::new(
        &first.data_dir(),
        embedded_pg::Options {
            ephemeral: true,
            ..Default::default()
        },
    )
    .unwrap();
    a.start().unwrap();
    std::fs::create_dir_all(second.data_dir()).unwrap();
    std::os::unix::fs::symlink(first.data_dir().join("run"), second.data_dir().join("run"))
        .unwrap();
    let mut b = EmbeddedPg::new(
        &second.data_dir(),
        embedded_pg::Options {
            ephemeral: true,
            ..Default::default()
        },
    )
    .unwrap();
    let err = format!("{:#}", b.start().unwrap_err());
    a.stop().unwrap();
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(err.contains("remove"), "{err}");
    assert!(err.contains(".s.PGSQL.5432.lock"), "{err}");
}

/// As root, PostgreSQL runs as user `pam`, which must traverse the data
/// dir's ancestors: one that lacks the search bit gets o+x (only that).
#[test]
fn ancestors_get_only_the_search_bit() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = Scratch::new();
    let locked = scratch.root.join("locked");
    std::fs::create_dir_all(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    let data_dir = locked.join("data");
    let mut pg = EmbeddedPg::new(
        &data_dir,
        embedded_pg::Options {
            ephemeral: true,
            ..Default::default()
        },
    )
    .unwrap();
    pg.start().unwrap();
    pg.stop().unwrap();
    let mode = std::fs::metadata(&locked).unwrap().permissions().mode() & 0o777;
    if embedded_pg::euid() == 0 {
        assert_eq!(mode, 0o701);
    } else {
        assert_eq!(mode, 0o700, "not root: nothing to change");
    }
}
