//! Throwaway databases for tests: each [`fresh_pool`] call gives a fresh,
//! migrated, empty database.
//!
//! The server is `DATABASE_URL` when set; otherwise a shared embedded
//! cluster at `$TMPDIR/pam-test-pg-<uid>` (the same code as pamd's embedded
//! default, [`pam_store::embedded`]), started by the first test that needs
//! it and left running for the next ones: nextest runs every test in its
//! own process, and a cluster start costs seconds. `pam-testdb stop`
//! (`.ci/run` does it at the end) stops it.
//!
//! # Guarantees
//! - Concurrent test processes start the cluster once: a file lock
//!   (`pam-test-pg-<uid>.lock`) serialises the start.
//! - Migrations run once per migration set: a template database
//!   `pam_tmpl_<checksum>` is built under a PostgreSQL advisory lock and
//!   every fresh database is a `CREATE DATABASE … TEMPLATE` copy of it.
//! - Test databases older than 20 minutes are dropped when a template is built
//!   or at a process's first call, so the cluster does not grow without end.

use anyhow::Context;
use sha2::{Digest, Sha256};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, PgPool};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::OnceCell;

use pam_store::embedded::{self as embedded_pg, EmbeddedPg};

/// Test databases older than this are dropped: longer than any test runs
/// (CI's whole suite takes about ten minutes), short enough that parallel
/// suites on one machine do not fill its disk (an hour's worth reached
/// 17 GB with three suites running side by side).
const MAX_AGE: Duration = Duration::from_secs(20 * 60);
/// Key of the advisory lock that serialises template builds.
const TEMPLATE_LOCK: i64 = 0x7061_6d74_6d70; // "pamtmp"

/// A fresh migrated database; the pool is small (tests are many).
pub async fn fresh_pool() -> anyhow::Result<PgPool> {
    let admin = PgConnectOptions::from_str(&admin_url().await?)?;
    let template = template(&admin).await?;
    let secs = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let name = format!(
        "pam_test_{secs}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let mut conn = admin
        .connect()
        .await
        .context("connect to the test server")?;
    create_from_template(&mut conn, &name, template).await?;
    conn.close().await?;
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .connect_with(admin.database(&name))
        .await?;
    Ok(pool)
}

/// A fresh migrated database, as a URL (for processes such as a pamd
/// started by an end-to-end test).
pub async fn fresh_database_url() -> anyhow::Result<String> {
    let pool = fresh_pool().await?;
    let name: String = sqlx::query_scalar("SELECT current_database()")
        .fetch_one(&pool)
        .await?;
    pool.close().await;
    let admin = admin_url().await?;
    let (base, query) = admin.split_once('?').unwrap_or((&admin, ""));
    let (prefix, _db) = base
        .rsplit_once('/')
        .context("the admin URL has no database path")?;
    let q = if query.is_empty() {
        String::new()
    } else {
        format!("?{query}")
    };
    Ok(format!("{prefix}/{name}{q}"))
}

/// The URL of the test server's maintenance database: `DATABASE_URL`, or
/// the shared embedded test cluster (started if needed).
pub async fn admin_url() -> anyhow::Result<String> {
    static URL: OnceCell<String> = OnceCell::const_new();
    URL.get_or_try_init(|| async {
        if let Ok(url) = std::env::var("DATABASE_URL") {
            return Ok(pam_store::db::sqlx_compatible_url(&url));
        }
        tokio::task::spawn_blocking(start_test_cluster).await?
    })
    .await
    .cloned()
}

/// Where the shared test cluster lives.
pub fn test_cluster_dir() -> PathBuf {
    std::env::temp_dir().join(format!("pam-test-pg-{}", embedded_pg::euid()))
}

/// Starts (or reuses) the shared test cluster and returns its admin URL.
/// Blocking.
pub fn start_test_cluster() -> anyhow::Result<String> {
    let dir = test_cluster_dir();
    let _lock = lock_file(&dir)?;
    let mut pg = EmbeddedPg::new(
        &dir,
        embedded_pg::Options {
            ephemeral: true,
            ..Default::default()
        },
    )?;
    pg.start().context("start the test cluster")?;
    Ok(pg.url("postgres"))
}

/// Stops the shared test cluster if it runs. Blocking.
pub fn stop_test_cluster() -> anyhow::Result<()> {
    let dir = test_cluster_dir();
    if !dir.exists() {
        return Ok(());
    }
    let _lock = lock_file(&dir)?;
    EmbeddedPg::new(
        &dir,
        embedded_pg::Options {
            ephemeral: true,
            ..Default::default()
        },
    )?
    .stop()
}

/// An exclusive `flock` on `<dir>.lock`, released when the file closes.
fn lock_file(dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    let path = dir.with_extension("lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    flock_exclusive(&file).with_context(|| format!("lock {}", path.display()))?;
    Ok(file)
}

#[allow(unsafe_code)]
fn flock_exclusive(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is open for the duration of the call (we borrow
    // the File); flock has no other preconditions.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `pam_tmpl_<checksum of the migration set>`, built once per server.
async fn template(admin: &PgConnectOptions) -> anyhow::Result<&'static str> {
    static NAME: OnceCell<String> = OnceCell::const_new();
    NAME.get_or_try_init(|| async {
        let name = format!("pam_tmpl_{}", migrations_checksum());
        let mut conn = admin
            .connect()
            .await
            .context("connect to the test server")?;
        if !database_exists(&mut conn, &name).await? {
            build_template(&mut conn, admin, &name).await?;
        }
        drop_old_test_databases(&mut conn).await;
        conn.close().await?;
        anyhow::Ok(name)
    })
    .await
    .map(String::as_str)
}

async fn build_template(
    conn: &mut PgConnection,
    admin: &PgConnectOptions,
    name: &str,
) -> anyhow::Result<()> {
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(TEMPLATE_LOCK)
        .execute(&mut *conn)
        .await?;
    let built = async {
        if database_exists(conn, name).await? {
            return anyhow::Ok(()); // another process built it while we waited
        }
        // Built under a scratch name and renamed when complete, so a crash
        // mid-migration never leaves a half-built template behind.
        let wip = format!("{name}_wip");
        // A wip left by a process that died mid-build is nobody's (this
        // process holds the lock): FORCE past a connection still on it
        // (an autovacuum worker, say).
        sqlx::query(&format!("DROP DATABASE IF EXISTS {wip} WITH (FORCE)"))
            .execute(&mut *conn)
            .await?;
        sqlx::query(&format!("CREATE DATABASE {wip}"))
            .execute(&mut *conn)
            .await?;
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .connect_with(admin.clone().database(&wip))
            .await?;
        pam_store::db::MIGRATOR
            .run(&pool)
            .await
            .context("migrate the template")?;
        pool.close().await;
        // The migrating backend may still be exiting, or still connected:
        // sqlx's `close` has been seen to leave the migrating connection
        // open under a multi-threaded runtime (bench-fleet's first run on
        // a fresh cluster waited 500 s on it). The wip is this process's
        // (it holds the lock), so end whatever is still on it, then retry
        // while busy.
        sqlx::query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE datname = $1 AND pid <> pg_backend_pid()",
        )
        .bind(&wip)
        .execute(&mut *conn)
        .await?;
        retry_while_busy(conn, &format!("ALTER DATABASE {wip} RENAME TO {name}")).await?;
        anyhow::Ok(())
    }
    .await;
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(TEMPLATE_LOCK)
        .execute(&mut *conn)
        .await?;
    built
}

async fn create_from_template(
    conn: &mut PgConnection,
    name: &str,
    template: &str,
) -> anyhow::Result<()> {
    retry_while_busy(conn, &format!("CREATE DATABASE {name} TEMPLATE {template}"))
        .await
        .with_context(|| format!("create test database {name}"))
}

/// Runs `sql`, retrying for up to 10 s on 55006 ("database is being
/// accessed by other users"): a concurrent clone of the same template, or a
/// backend that is still exiting after its client disconnected.
async fn retry_while_busy(conn: &mut PgConnection, sql: &str) -> anyhow::Result<()> {
    let mut tries = 0;
    loop {
        match sqlx::query(sql).execute(&mut *conn).await {
            Ok(_) => return Ok(()),
            Err(sqlx::Error::Database(e))
                if e.code().as_deref() == Some("55006") && tries < 100 =>
            {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

async fn database_exists(conn: &mut PgConnection, name: &str) -> anyhow::Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(name)
            .fetch_one(conn)
            .await?,
    )
}

/// Best effort: a concurrent process may be dropping the same ones.
async fn drop_old_test_databases(conn: &mut PgConnection) {
    let Ok(names) = sqlx::query_scalar::<_, String>(
        r"SELECT datname FROM pg_database WHERE datname LIKE 'pam\_test\_%'",
    )
    .fetch_all(&mut *conn)
    .await
    else {
        return;
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    for name in names {
        let created: Option<u64> = name.split('_').nth(2).and_then(|s| s.parse().ok());
        if created.is_some_and(|c| now.saturating_sub(c) > MAX_AGE.as_secs()) {
            let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .execute(&mut *conn)
                .await;
        }
    }
}

/// Hex prefix of SHA-256 over every migration's version and checksum.
fn migrations_checksum() -> String {
    let mut hash = Sha256::new();
    for m in pam_store::db::MIGRATOR.iter() {
        hash.update(m.version.to_le_bytes());
        hash.update(&*m.checksum);
    }
    hex::encode(&hash.finalize()[..8])
}
