//! pamd's lifecycle: open the database (embedded or `--database-url`),
//! migrate, purge old events, serve the API until SIGINT/SIGTERM, then stop
//! the embedded cluster.
//!
//! # Guarantees
//! - Once the embedded cluster is started, it is stopped when pamd stops,
//!   whether serving ended by a signal or by an error.
//! - Nothing is served before migrations are applied.
//! - One pamd per data dir on the embedded cluster: a second is refused
//!   before it touches the first's cluster ([`lock_data_dir`]).

pub mod leader;
pub mod local_worker;
pub mod secrets;
pub mod tls;

use std::sync::Arc;

use anyhow::Context;
use pam_store::embedded::{self as embedded_pg, EmbeddedPg};
use pam_store::postgres::PgStore;
use tokio_util::sync::CancellationToken;

use crate::api::{self, AppState};
use crate::clock::SharedClock;
use crate::config::{Config, Tls};

/// The database pamd uses inside its embedded cluster.
pub const EMBEDDED_DATABASE: &str = "pam";

/// Runs pamd until a shutdown signal.
pub async fn run(config: Config, clock: SharedClock) -> anyhow::Result<()> {
    private_data_dir(&config.data_dir)?;
    let mut embedded = None;
    let mut held = None;
    let url = match &config.database_url {
        Some(url) => pam_store::db::sqlx_compatible_url(url),
        None => {
            // Before the cluster is touched: a second pamd on this data
            // dir would reuse the first's cluster, and stop it when it
            // fails to listen.
            held = Some(lock_data_dir(&config.data_dir)?);
            let pg = start_embedded(&config.data_dir).await?;
            let url = pg.url(EMBEDDED_DATABASE);
            embedded = Some(pg);
            url
        }
    };
    let served = serve(&config, clock, &url).await;
    if let Some(pg) = embedded {
        stop_embedded(pg).await;
    }
    drop(held);
    served
}

/// Makes the data dir pamd's own: created 0700, an existing one made so
/// (what is inside — Source mirrors, secret files, the local worker's
/// runs, the embedded cluster's log — is then out of other local users'
/// reach, whatever its own mode). As root, the embedded cluster's user
/// gets the search bit back on it (`o+x`, no listing) to reach its
/// cluster. A data dir pamd may not narrow (a volume it does not own) is left
/// as it is, with a warning.
fn private_data_dir(data_dir: &std::path::Path) -> anyhow::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(data_dir)
        .with_context(|| format!("create the data dir {}", data_dir.display()))?;
    let mode = std::fs::metadata(data_dir)?.permissions().mode() & 0o7777;
    if mode & 0o077 & !0o001 != 0 {
        let narrowed = mode & 0o700 | mode & 0o001;
        match std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(narrowed)) {
            Ok(()) => {
                tracing::info!(dir = %data_dir.display(), "made the data dir private (go-rwx)")
            }
            // A directory pamd does not own (a volume mounted for a
            // group, as Kubernetes' fsGroup does): left as it is, said.
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => tracing::warn!(
                dir = %data_dir.display(),
                mode = format!("{mode:o}"),
                "the data dir is not pamd's to narrow; other users may read what is in it"
            ),
            Err(e) => {
                return Err(e).with_context(|| format!("chmod go-rwx {}", data_dir.display()))
            }
        }
    }
    Ok(())
}

/// Holds `<data dir>/pamd.lock` (an exclusive lock the kernel releases
/// when pamd exits, however it exits): one pamd per data dir on its
/// embedded cluster. A second one is refused before it starts anything.
fn lock_data_dir(data_dir: &std::path::Path) -> anyhow::Result<std::fs::File> {
    // The data dir exists: `private_data_dir` made it.
    let path = data_dir.join("pamd.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("open {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "another pamd runs on the data dir {} (its lock {} is held): stop it first, or give this one another --data-dir",
            data_dir.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("lock {}", path.display()))
        }
    }
}

/// Starts (or reuses) the embedded cluster and makes sure pamd's database
/// exists. A reused server can go away under the first connection (it
/// was shutting down) or refuse it (in recovery): then it is started
/// again — [`EmbeddedPg::start`] waits for such a server — until
/// [`embedded_pg::START_WAIT`] has passed.
async fn start_embedded(data_dir: &std::path::Path) -> anyhow::Result<EmbeddedPg> {
    let deadline = std::time::Instant::now() + embedded_pg::START_WAIT;
    loop {
        let data_dir = data_dir.to_path_buf();
        let pg = tokio::task::spawn_blocking(move || {
            let mut pg = EmbeddedPg::new(&data_dir, embedded_pg::Options::default())?;
            pg.start()?;
            anyhow::Ok(pg)
        })
        .await??;
        match embedded_pg::ensure_database(&pg.url("postgres"), EMBEDDED_DATABASE).await {
            Ok(()) => return Ok(pg),
            Err(e) if embedded_pg::transient(&e) && std::time::Instant::now() < deadline => {
                tracing::warn!(error = %format!("{e:#}"), "the embedded PostgreSQL went away under the first connection; starting it again");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => {
                stop_embedded(pg).await;
                return Err(e);
            }
        }
    }
}

async fn stop_embedded(mut pg: EmbeddedPg) {
    let stopped = tokio::task::spawn_blocking(move || pg.stop()).await;
    if let Err(e) = stopped.map_err(anyhow::Error::from).and_then(|r| r) {
        tracing::error!(error = %format!("{e:#}"), "could not stop the embedded PostgreSQL");
    }
}

async fn serve(config: &Config, clock: SharedClock, url: &str) -> anyhow::Result<()> {
    let store = PgStore::connect(url, &config.database.settings()).await?;
    let mut state = AppState::new(Arc::new(store.clone()), clock, thresholds(config));
    state.ctx.prices = Arc::new(config.prices.clone());
    state.max_body_bytes = config.api.max_body_bytes;
    state.metrics_require_token = config.metrics.require_token;
    state.logs = Arc::new(crate::api::logs::Logs::new(
        config.logs.cache_bytes,
        config.logs.archive_dir.clone(),
    ));
    if let Some(o) = &config.oidc {
        state.oidc = Some(Arc::new(
            crate::api::access::oidc::Oidc::new(o.clone()).context("[oidc]")?,
        ));
    }
    if let Some(b) = config.rate_limits.budgets() {
        state.limits = Arc::new(crate::api::access::rate_limit::Limiter::new(b));
    }
    state.ctx.secrets = Arc::new(
        crate::rules::secrets::Keyring::load_or_create(&config.secrets_key_file)
            .context("the secrets key file")?,
    );
    // Webhooks sign with a key of a project's Secret.
    let mut webhooks = config.webhooks.settings();
    webhooks.keys = Arc::new(crate::rules::webhooks::keys::SecretKeys {
        ring: state.ctx.secrets.clone(),
        files: crate::rules::webhooks::keys::KeyFiles::new(
            config.webhooks.signing_keys_dir.clone(),
        ),
    });
    state.ctx.webhooks = Arc::new(webhooks);
    let purged = crate::reconcile::retention::purge(&state.ctx, config.retention.events_days)
        .await
        .context("purge old events")?;
    tracing::info!(
        purged,
        events_days = config.retention.events_days,
        "purged old events"
    );
    let purged =
        crate::reconcile::retention::purge_deliveries(&state.ctx, config.webhooks.deliveries_days)
            .await
            .context("purge old webhook deliveries")?;
    if purged > 0 {
        tracing::info!(purged, "purged old webhook deliveries");
    }
    // Operator signals accepted before a restart whose runs are still live:
    // back from the journal, so a restart loses none.
    let signals = state
        .fleet
        .signals()
        .load(state.ctx.store.as_ref())
        .await
        .context("read operator signals back from the journal")?;
    if signals > 0 {
        tracing::info!(
            signals,
            "operator signals of live runs read back from the journal"
        );
    }
    match &config.api.admin_token_file {
        Some(file) => {
            secrets::admin_token_from_file(&state.ctx, file)
                .await
                .with_context(|| {
                    format!(
                        "the admin token of [api] admin_token_file {}",
                        file.display()
                    )
                })?;
            tracing::info!(path = %file.display(), "admin token from [api] admin_token_file");
        }
        None => {
            let token_file = secrets::ensure_admin_token(&state.ctx, &config.data_dir)
                .await
                .context("write the admin token")?;
            tracing::info!(path = %token_file.display(), "admin token (pamctl finds it there)");
        }
    }

    let listener = tokio::net::TcpListener::bind(&config.listen)
        .await
        .with_context(|| format!("listen on {}", config.listen))?;
    let https = https(config)?;
    let scheme = if https.is_some() { "https" } else { "http" };
    let local_addr = listener.local_addr()?;
    tracing::info!(
        "pamd {} listening on {scheme}://{local_addr}",
        env!("CARGO_PKG_VERSION"),
    );
    // The loops run on the replica that leads (server/leader.rs).
    let stop_loops = CancellationToken::new();
    let repos = crate::sync::fetch::Repos::new(&config.data_dir, config.git.clone())
        .with_dirs(config.sources.policy(&config.data_dir));
    state.repos = Some(repos.clone());
    let start = move |ctx: crate::ctx::Ctx, stop: CancellationToken| {
        let repos = repos.clone();
        async move {
            vec![
                tokio::spawn(crate::reconcile::run_loops(ctx.clone(), stop.clone())),
                tokio::spawn(crate::sync::runner::run(ctx.clone(), repos, stop.clone())),
                tokio::spawn(crate::reconcile::webhooks::run(ctx, stop)),
            ]
        }
    };
    let election = tokio::spawn(leader::run(
        state.ctx.clone(),
        leader::replica_id(&config.data_dir).context("the replica id")?,
        std::time::Duration::from_secs(config.leader.lease_seconds),
        start,
        stop_loops.clone(),
    ));
    // Events other replicas commit reach this one's streams; runs they
    // create wake this one's claim long-polls and loops.
    // Operator signals accepted by another replica are handed to this
    // one's workers too (the journal is their truth, fleet::signals).
    let follower = {
        let ctx = state.ctx.clone();
        let woken = ctx.clone();
        let (signals, nudge) = (
            state.fleet.signals().clone(),
            state.ctx.wakeups.nudge.clone(),
        );
        ctx.bus.on_read(move |events: &[pam_store::Event]| {
            if events.iter().any(|e| e.topic.starts_with("run.")) {
                woken.wakeups.claimable.notify_waiters();
            }
            let mut signalled = false;
            for e in events {
                signalled |= signals.push_event(e);
            }
            if signalled {
                nudge.notify_waiters();
            }
            woken.wakeups.loops.notify_one();
        });
        let stop = stop_loops.clone();
        tokio::spawn(async move {
            if let Err(e) = crate::events::follow::follow(ctx.store, ctx.bus, stop).await {
                tracing::warn!(error = %e, "cannot follow other replicas' events");
            }
        })
    };
    let bus = state.ctx.bus.clone();
    let leases = tokio::spawn(crate::api::operator::attach::expire_loop(state.clone()));
    let local_worker = if config.local_worker {
        let host = if local_addr.ip().is_unspecified() {
            std::net::IpAddr::from([127, 0, 0, 1])
        } else {
            local_addr.ip()
        };
        let url = format!(
            "{scheme}://{}",
            std::net::SocketAddr::new(host, local_addr.port())
        );
        let ca_file = https.as_ref().and_then(|h| h.ca_file.clone());
        Some(
            local_worker::LocalWorker::start(&state.ctx, &config.data_dir, url, ca_file)
                .await
                .context("start the local worker")?,
        )
    } else {
        None
    };
    let nudge = state.ctx.wakeups.nudge.clone();
    // Made a service once: served as a bare `Router`, axum calls
    // `Router::with_state(())` for every connection, which deep-copies
    // the whole route table (~135 KB) and keeps the copy for the
    // connection's life — 160 MB at 1,000 workers' keep-alive connections.
    // `IntoMakeService` hands each connection a clone of one
    // `Arc`.
    // With the client's address (ConnectInfo): failed authentications
    // are limited per address. Both listeners below are
    // `tap_io` ones, for which axum provides it.
    let app = api::router(state).into_make_service_with_connect_info::<std::net::SocketAddr>();
    // On SIGINT/SIGTERM, end the event streams too: graceful shutdown waits
    // for open connections, and an SSE stream never ends by itself.
    let shutdown = async move {
        shutdown_signal().await;
        bus.shut_down();
        // Answer the workers' claim long-polls now: graceful shutdown
        // waits for in-flight requests.
        nudge.notify_waiters();
        if let Some(w) = local_worker {
            w.stop().await;
        }
    };
    let served = match https {
        // With TLS on, the TLS listener is the only one (no plain port).
        Some(h) => {
            let listener = tls::listener::TlsListener::new(listener, h.current)?;
            // Tapped for nothing (the TLS listener sets TCP_NODELAY
            // itself): axum gives a tapped listener's connections their
            // ConnectInfo<SocketAddr>, and the TLS listener's type is
            // not one it knows.
            let listener = axum::serve::ListenerExt::tap_io(listener, |_| {});
            let served = axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await;
            drop(h.reloader);
            served
        }
        None => {
            // TCP_NODELAY: an SSE frame is a small write that must go out
            // now; with Nagle it waits for the ACK of the previous one (a
            // delayed ACK, tens of ms, since a subscriber never sends
            // anything back).
            let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                if let Err(e) = tcp.set_nodelay(true) {
                    tracing::debug!(error = %e, "could not set TCP_NODELAY");
                }
            });
            axum::serve(listener, app)
                .with_graceful_shutdown(shutdown)
                .await
        }
    }
    .context("serve HTTP");
    stop_loops.cancel();
    leases.abort();
    let _ = election.await;
    let _ = follower.await;
    store.close().await;
    served
}

/// HTTPS as configured: the served pair (reloaded while it runs) and the
/// CA file a local worker trusts.
struct Https {
    current: tls::Current,
    reloader: tls::Reloader,
    ca_file: Option<std::path::PathBuf>,
}

fn https(config: &Config) -> anyhow::Result<Option<Https>> {
    let (pair, ca_file) = match &config.tls {
        Tls::Off => return Ok(None),
        Tls::Files {
            cert_file,
            key_file,
        } => {
            let pair = tls::Pair {
                cert_file: cert_file.clone(),
                key_file: key_file.clone(),
            };
            // An operator's own CA, when they keep it where
            // --tls-self-signed would; else the local worker trusts the
            // bundled public roots.
            let ca = tls::self_signed_dir(&config.data_dir).join("ca.pem");
            (pair, ca.exists().then_some(ca))
        }
        Tls::SelfSigned => {
            let dir = tls::self_signed_dir(&config.data_dir);
            let made =
                tls::certs::ensure_self_signed(&dir, &tls::certs::server_names(&config.listen))
                    .context("make the self-signed TLS certificate")?;
            let ca = made.ca_file.display();
            if made.created {
                tracing::info!(%ca, "made a self-signed CA and server certificate");
            }
            tracing::info!(
                "HTTPS with a self-signed certificate: trust it with `pamctl --ca-file {ca}` \
                 (or PAM_CA_FILE={ca}, or `ca-file: {ca}` in a pamctl context); \
                 workers: --ca-file {ca}"
            );
            (made.pair, Some(made.ca_file))
        }
    };
    let (current, reloader) = tls::start(pair)?;
    Ok(Some(Https {
        current,
        reloader,
        ca_file,
    }))
}

/// The loops' thresholds from the config (the seed's defaults live there).
pub fn thresholds(config: &Config) -> crate::ctx::Thresholds {
    use std::time::Duration as D;
    crate::ctx::Thresholds {
        heartbeat: D::from_secs(config.hosts.heartbeat_seconds),
        offline_after: D::from_secs(config.hosts.offline_after_seconds),
        dispatch_timeout: D::from_secs(config.dispatch.timeout_seconds),
        resync: D::from_millis(config.loops.resync_ms),
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for SIGTERM");
            std::future::pending::<()>().await;
            return;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT: shutting down"),
        _ = term.recv() => tracing::info!("SIGTERM: shutting down"),
    }
}
