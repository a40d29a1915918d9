//! `--database-url` as a first-class mode. The test starts a
//! PostgreSQL server of its own on a free TCP port (initdb + postgres in a
//! temp dir, as an unprivileged user when root: pam-store's embedded-cluster
//! code with a TCP port), not pamd's embedded one; real pamd connects to it
//! by URL, objects persist across a pamd restart; a variant whose server
//! requires TLS, which pamd verifies (sslmode=verify-full).

use std::path::Path;

use pam_controller::server::tls::certs::Ca;
use pam_store::embedded::{EmbeddedPg, Options};
use pam_tests::git::git;
use pam_tests::{free_port, ok, Pamd, PamdOptions};
use sqlx::Connection;

const PROJECT: &str =
    "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: ext\nspec:\n  displayName: External\n";

/// A server on 127.0.0.1:`port` with a role and database `pamapp` owned by it.
async fn server(dir: &Path, options: Options) -> EmbeddedPg {
    let dir = dir.to_path_buf();
    let pg = tokio::task::spawn_blocking(move || {
        let mut pg = EmbeddedPg::new(&dir, options)?;
        pg.start()?;
        anyhow::Ok(pg)
    })
    .await
    .unwrap()
    .expect("start the external PostgreSQL");
    let mut admin = sqlx::PgConnection::connect(&pg.url("postgres"))
        .await
        .unwrap();
    for sql in [
        "CREATE ROLE pamapp LOGIN PASSWORD 'secret'",
        "CREATE DATABASE pamapp OWNER pamapp",
    ] {
        sqlx::query(sql).execute(&mut admin).await.unwrap();
    }
    pg
}

/// [`server`] in `dir`/pg on a free TCP port (plain): it and the port.
async fn tcp_server(dir: &Path) -> (EmbeddedPg, u16) {
    let port = free_port();
    let options = Options {
        ephemeral: true,
        tcp_port: Some(port),
        ..Options::default()
    };
    (server(&dir.join("pg"), options).await, port)
}

fn stop(mut pg: EmbeddedPg) {
    pg.stop().unwrap();
}

async fn persists_across_restart(url: String) -> Pamd {
    let mut pamd = Pamd::start(PamdOptions {
        database_url: Some(url),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(PROJECT)));
    pamd.restart().await.unwrap();
    // The admin token is stored (hashed) in that database too.
    let out = ok(&pamd.pamctl(&["get", "projects"]));
    assert!(out.contains("ext"), "{out}");
    assert!(
        !pamd.data_dir.join("postgres").exists(),
        "no embedded cluster"
    );
    pamd
}

#[tokio::test]
async fn pamd_runs_on_an_external_postgresql_over_tcp() {
    let tmp = tempfile::tempdir().unwrap();
    let (pg, port) = tcp_server(tmp.path()).await;
    let url = format!("postgresql://pamapp:secret@127.0.0.1:{port}/pamapp");
    let pamd = persists_across_restart(url).await;
    drop(pamd);
    tokio::task::spawn_blocking(move || stop(pg)).await.unwrap();
}

#[tokio::test]
async fn pamd_verifies_an_external_postgresql_that_requires_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let cluster = root.join("pg/postgres");
    let ca = Ca::new("pam test PostgreSQL CA").unwrap();
    let issued = ca
        .issue(&["localhost".to_string(), "127.0.0.1".to_string()])
        .unwrap();
    let ca_file = root.join("pg-ca.pem");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let port = free_port();
    let in_cluster = |f: &str| cluster.join(f).display().to_string();
    let pg = server(
        &root.join("pg"),
        Options {
            ephemeral: true,
            tcp_port: Some(port),
            // TCP only with TLS: plain TCP has no hba line.
            extra_conf: format!(
                "ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nhba_file = '{}'\n",
                in_cluster("server.crt"),
                in_cluster("server.key"),
                in_cluster("pam_hba.conf"),
            ),
            private_files: vec![
                ("server.crt".into(), issued.cert_pem),
                ("server.key".into(), issued.key_pem),
                (
                    "pam_hba.conf".into(),
                    "local all all trust\nhostssl all all 127.0.0.1/32 scram-sha-256\n".into(),
                ),
            ],
        },
    )
    .await;
    let base = format!("postgresql://pamapp:secret@127.0.0.1:{port}/pamapp");
    // Plain TCP is refused by the server: TLS is required.
    let plain = sqlx::PgConnection::connect(&format!("{base}?sslmode=disable")).await;
    assert!(plain.is_err(), "plain TCP was accepted");
    // verify-full with the wrong CA is refused by pamd's side.
    let other = Ca::new("another CA").unwrap();
    let other_file = root.join("other-ca.pem");
    std::fs::write(&other_file, other.cert_pem()).unwrap();
    let wrong = sqlx::PgConnection::connect(&format!(
        "{base}?sslmode=verify-full&sslrootcert={}",
        other_file.display()
    ))
    .await;
    assert!(wrong.is_err(), "an unknown CA was accepted");

    let url = format!(
        "{base}?sslmode=verify-full&sslrootcert={}",
        ca_file.display()
    );
    let pamd = persists_across_restart(url).await;
    drop(pamd);
    tokio::task::spawn_blocking(move || stop(pg)).await.unwrap();
}

/// With PostgreSQL down, `/readyz`, `/metrics` and every API
/// call took 10 s and then answered 503, 503 and 500. Now readiness says
/// 503 within a second, `/metrics` keeps serving pamd's own metrics with
/// `pam_database_up 0`, and an API call answers 503 with `Retry-After`
/// (in the one JSON error shape) as fast; all recover when it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgresql_down_is_answered_fast_and_recovered_from() {
    use std::time::{Duration, Instant};
    let tmp = tempfile::tempdir().unwrap();
    let (pg, port) = tcp_server(tmp.path()).await;
    let pamd = Pamd::start(PamdOptions {
        database_url: Some(format!(
            "postgresql://pamapp:secret@127.0.0.1:{port}/pamapp"
        )),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(PROJECT)));
    assert_eq!(pamd.metric("pam_database_up").await, Some(1.0));
    let mut pg = tokio::task::spawn_blocking(move || {
        let mut pg = pg;
        pg.stop().unwrap();
        pg
    })
    .await
    .unwrap();
    let client = pamd.http();
    let timed = |path: &'static str| {
        let req = client
            .get(format!("{}{path}", pamd.url))
            .bearer_auth(&pamd.token)
            .timeout(Duration::from_secs(30));
        async move {
            let started = Instant::now();
            let r = req.send().await.unwrap();
            (r, started.elapsed())
        }
    };
    // Twice each: the first look finds the pool's connections broken, the
    // second finds none can be made.
    for _ in 0..2 {
        let (r, took) = timed("/readyz").await;
        assert_eq!(r.status().as_u16(), 503);
        assert!(took < Duration::from_millis(1500), "/readyz took {took:?}");

        let (r, took) = timed("/metrics").await;
        assert_eq!(r.status().as_u16(), 200);
        let text = r.text().await.unwrap();
        assert!(took < Duration::from_millis(1500), "/metrics took {took:?}");
        assert!(text.contains("\npam_database_up 0\n"), "{text}");
        assert!(text.contains("pam_http_request_duration_seconds"), "{text}");

        let (r, took) = timed("/api/v1/projects").await;
        assert_eq!(r.status().as_u16(), 503, "{:?}", r.text().await);
        // The pool's acquire timeout (1 s), and a loaded CI machine.
        assert!(took < Duration::from_secs(2), "the API took {took:?}");
        let retry = pam_tests::retry_after(&r);
        assert!((1..=5).contains(&retry), "{retry}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unavailable", "{body}");
    }
    let pg = tokio::task::spawn_blocking(move || {
        pg.start().unwrap();
        pg
    })
    .await
    .unwrap();
    pam_tests::eventually(Duration::from_secs(30), "pam_database_up 1", || async {
        (pamd.metric("pam_database_up").await == Some(1.0)).then_some(())
    })
    .await;
    let (r, _) = timed("/readyz").await;
    assert_eq!(r.status().as_u16(), 200);
    let out = ok(&pamd.pamctl(&["get", "projects"]));
    assert!(out.contains("ext"), "{out}");
    drop(pamd);
    tokio::task::spawn_blocking(move || stop(pg)).await.unwrap();
}

/// The layout of deploy/compose.yaml — pamd and a worker as two
/// processes with separate data dirs, the worker holding only its own
/// token, pamd on an external PostgreSQL — syncs a git Source, and the
/// run it declares runs on that worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_layout_syncs_a_git_source_and_runs_its_run_on_the_worker() {
    use pam_tests::worker::{
        create_worker_token, wait_online, wait_phase, Worker, FAST_WORKER_TOML,
    };
    let tmp = tempfile::tempdir().unwrap();
    let (pg, port) = tcp_server(tmp.path()).await;
    let pamd = Pamd::start(PamdOptions {
        database_url: Some(format!(
            "postgresql://pamapp:secret@127.0.0.1:{port}/pamapp"
        )),
        config_toml: "[hosts]\nheartbeat_seconds = 1\noffline_after_seconds = 4\n".into(),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let token = create_worker_token(&pamd, "worker1").await.unwrap();
    let worker = Worker::start_with_token(&pamd.url, &token, "worker1", FAST_WORKER_TOML).unwrap();
    assert_ne!(worker.data_dir, pamd.data_dir);
    assert!(
        !worker.data_dir.starts_with(&pamd.data_dir)
            && !pamd.data_dir.starts_with(&worker.data_dir),
        "separate data dirs"
    );
    wait_online(&pamd, "worker1").await;

    let repo = tmp.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    let out = worker.tmp().join("from-git");
    std::fs::write(
        repo.join("e2e.yaml"),
        format!(
            "apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: e2e\nspec: {{}}\n---\n\
             apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t1\n  project: e2e\nspec:\n  title: T1\n---\n\
             apiVersion: pam.dev/v1\nkind: Run\nmetadata:\n  name: from-git\n  project: e2e\nspec:\n  task: t1\n  provider: exec\n  cwd: {:?}\n  command: [sh, -c, 'echo synced > {}']\n",
            worker.tmp().display().to_string(),
            out.display()
        ),
    )
    .unwrap();
    git(&repo, &["init", "-q"]);
    pam_tests::git::commit(&repo, "e2e");
    ok(&pamd.pamctl_stdin(
        &["apply", "-f", "-"],
        Some(&format!(
            "apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: repo}}\nspec:\n  git: {{url: 'file://{}', ref: main}}\n  interval: 1m\n  projects: [e2e]\n",
            repo.display()
        )),
    ));
    wait_phase(
        &pamd,
        "from-git",
        "exited",
        std::time::Duration::from_secs(60),
    )
    .await;
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "synced\n");
    let source = pamd.get("/api/v1/sources/repo").await.unwrap();
    assert_eq!(source["status"]["sync"], "Synced", "{source}");
    // The state is in the external database: nothing embedded.
    assert!(!pamd.data_dir.join("postgres").exists());
    drop(worker);
    drop(pamd);
    stop(pg);
}
