//! pamd's configuration: a TOML file (`--config FILE`), overridden by flags
//! and their environment variables (flag > env > file > default).
//!
//! Every key and its default (the seed's thresholds):
//! ```toml
//! listen = "127.0.0.1:7700"
//! data_dir = "~/.local/share/pam"
//! # database_url = "postgresql://…"   (unset: the embedded PostgreSQL)
//! [hosts]
//! heartbeat_seconds = 30
//! offline_after_seconds = 90
//! [dispatch]
//! timeout_seconds = 300
//! [retention]
//! events_days = 30
//! [tls]                 # unset: plain HTTP
//! # cert_file = "/etc/pam/tls/server.pem"   (PEM chain, leaf first)
//! # key_file = "/etc/pam/tls/server.key"
//! # self_signed = false  (true: make a CA and certificate in data_dir/tls)
//! [database]
//! max_connections = 16  # this pamd's pool (replicas: the sum is what counts)
//! # acquire_timeout_ms = 1000, idle_in_transaction_timeout_ms = 5000,
//! # lock_timeout_ms = 3000, statement_timeout_ms = 60000 (see config/database.rs)
//! [leader]
//! lease_seconds = 15    # the loops' lease among replicas
//! [loops]
//! resync_ms = 1000      # a loop pass at least this often (writes wake them sooner)
//! [git]                 # how git Sources authenticate (never a manifest)
//! # credentials_file = "/etc/pam/git-credentials"  (https://user:token@host per line)
//! # ssh_key_file = "/etc/pam/git_ed25519"
//! # known_hosts_file = "/etc/pam/known_hosts"      (then strict host checking)
//! [secrets]
//! # key_file = "/etc/pam/secrets.key"  (default: data_dir/secrets.key, made 0600 on first start)
//! [prices.claude.default]   # USD per million tokens (see config/prices.rs)
//! # input = 3.0, cached_input = 0.30, output = 15.0
//! [webhooks]                # outbound deliveries (see config/webhooks.rs)
//! # signing_keys_dir = "/etc/pam/webhook-keys"
//! # timeout_seconds = 10, retry_initial_ms = 10000, retry_max_seconds = 3600,
//! # retry_for_hours = 24, deliveries_days = 30, public_url = "https://…"
//! # allow_networks = ["127.0.0.1/32"]  (private addresses deliveries may reach)
//! [sources]                 # where directory Sources read (see config/sources.rs)
//! # allowed_roots = ["/srv/pam"]  (directory Sources: the data dir and these)
//! # settle_ms = 1000
//! [api]
//! max_body_bytes = 16777216 # apply and diff (16 MiB; sized to the deploy memory limit, docs/operations.md)
//! # admin_token_file = "/run/pam/admin/token" # the admin token from a file pamd only reads
//! [rate_limits]             # per token (see config/rate_limits.rs)
//! # operator_per_second = 100, operator_burst = 1000,
//! # worker_per_second = 50, worker_burst = 200, enabled = true
//! [metrics]
//! require_token = false     # true: /metrics needs an admin or metrics token
//! [logs]                    # runs' logs, read from the workers (see config/logs.rs)
//! # cache_bytes = 67108864, archive_dir = "/var/lib/pam/logs"
//! [oidc]                    # dashboard sign-in (see config/oidc.rs)
//! # issuer = "https://…", client_id = "pam", client_secret_file = "…",
//! # redirect_url = "https://…/auth/callback", groups_claim = "groups", session_ttl = "8h"
//! ```
//! An unknown key is an error naming it: a typo must not silently fall back
//! to a default.

use anyhow::{bail, Context};
use serde::Deserialize;
use std::path::{Path, PathBuf};

use crate::rules::runs::usage::PriceTable;
use crate::sync::fetch::GitAuth;

mod database;
pub mod logs;
mod oidc;
mod prices;
pub mod rate_limits;
mod secrets;
pub mod sources;
pub mod webhooks;

pub use database::DatabaseConfig;

pub const DEFAULT_LISTEN: &str = "127.0.0.1:7700";

/// The command line (ARCHITECTURE.md, "Contracts that scripts rely on").
#[derive(Debug, Clone, Default, clap::Parser)]
#[command(
    name = "pamd",
    version,
    about = "The pam controller: API, store and reconcile loops"
)]
pub struct Cli {
    /// TOML config file.
    #[arg(long, env = "PAM_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Where pamd keeps its state (and the embedded PostgreSQL)
    /// [default: ~/.local/share/pam].
    #[arg(long, env = "PAM_DATA_DIR", value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Address the HTTP API listens on [default: 127.0.0.1:7700].
    #[arg(long, env = "PAM_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// Use this PostgreSQL instead of the embedded one.
    #[arg(long, env = "PAM_DATABASE_URL", value_name = "URL")]
    pub database_url: Option<String>,
    /// Also run a worker for this machine.
    #[arg(long, env = "PAM_LOCAL_WORKER")]
    pub local_worker: bool,
    /// Serve HTTPS with this certificate (PEM chain, leaf first); re-read
    /// when the file changes. Needs --tls-key.
    #[arg(long, env = "PAM_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The private key (PEM) of --tls-cert.
    #[arg(long, env = "PAM_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// Serve HTTPS with a CA and certificate pamd makes once in
    /// <data dir>/tls (clients trust <data dir>/tls/ca.pem).
    #[arg(long, env = "PAM_TLS_SELF_SIGNED", conflicts_with_all = ["tls_cert", "tls_key"])]
    pub tls_self_signed: bool,
    /// The key file Secrets are sealed with (AES-256-GCM; made, mode
    /// 0600, when absent) [default: <data dir>/secrets.key].
    #[arg(long, env = "PAM_SECRETS_KEY_FILE", value_name = "FILE")]
    pub secrets_key_file: Option<PathBuf>,
    /// How pamd logs to stderr: `text` (for people) or `json` (one
    /// object a line, for log collectors).
    #[arg(
        long,
        env = "PAM_LOG_FORMAT",
        value_name = "FORMAT",
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// A test hook: read the time from FILE (one RFC 3339 time) instead of
    /// the wall clock (clock.rs, `FileClock`). Hidden: for tests only.
    #[arg(long, env = "PAM_CLOCK_FILE", value_name = "FILE", hide = true)]
    pub clock_file: Option<PathBuf>,
}

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// How pamd serves: plain HTTP, or HTTPS from files or self-signed.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Tls {
    #[default]
    Off,
    Files {
        cert_file: PathBuf,
        key_file: PathBuf,
    },
    SelfSigned,
}

/// The `[tls]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct TlsFile {
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
    self_signed: bool,
}

/// The resolved configuration pamd runs with.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub listen: String,
    pub data_dir: PathBuf,
    /// `None`: the embedded PostgreSQL in `data_dir`.
    pub database_url: Option<String>,
    pub local_worker: bool,
    pub tls: Tls,
    pub hosts: HostsConfig,
    pub dispatch: DispatchConfig,
    pub retention: RetentionConfig,
    /// How git Sources authenticate.
    pub git: GitAuth,
    pub leader: LeaderConfig,
    pub loops: LoopsConfig,
    pub database: DatabaseConfig,
    /// What tokens cost where a provider reports no cost.
    pub prices: PriceTable,
    /// Outbound webhooks.
    pub webhooks: webhooks::WebhooksConfig,
    /// Per-token rate limits.
    pub rate_limits: rate_limits::RateLimitsConfig,
    /// The key file Secrets are sealed with.
    pub secrets_key_file: PathBuf,
    /// What directory Sources may read.
    pub sources: sources::SourcesConfig,
    /// The API's request limits.
    pub api: ApiConfig,
    /// Dashboard sign-in with OIDC; None: tokens only.
    pub oidc: Option<crate::api::access::oidc::Settings>,
    pub metrics: MetricsConfig,
    /// How runs' logs are served (`[logs]`).
    pub logs: logs::LogsConfig,
}

/// The `[metrics]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MetricsConfig {
    /// `/metrics` needs an admin or `metrics` token. Off by default: a
    /// scraper set up before `/metrics` could ask for one (the Helm
    /// ServiceMonitor) has none.
    pub require_token: bool,
}

/// The `[api]` table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ApiConfig {
    /// The largest request body apply and diff accept: an apply holds
    /// several times its body in memory while it runs (docs/operations.md,
    /// "Memory"), so this is what bounds pamd's peak.
    pub max_body_bytes: usize,
    /// The admin token comes from this file (e.g. a Kubernetes Secret,
    /// read-only), the same for every replica, instead of one minted per
    /// replica into the data dir (`server::secrets::admin_token_from_file`).
    pub admin_token_file: Option<PathBuf>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            max_body_bytes: crate::api::routes::DEFAULT_MAX_BODY_BYTES,
            admin_token_file: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LeaderConfig {
    /// The loops' lease (replicas): renewed every third of it; a
    /// dead leader's loops move within twice it.
    pub lease_seconds: u64,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        Self { lease_seconds: 15 }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoopsConfig {
    /// The loops' resync period: a pass at least this often without a
    /// wake-up (tests shorten it).
    pub resync_ms: u64,
}

impl Default for LoopsConfig {
    fn default() -> Self {
        Self { resync_ms: 1000 }
    }
}

/// The `[git]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct GitFile {
    credentials_file: Option<PathBuf>,
    ssh_key_file: Option<PathBuf>,
    known_hosts_file: Option<PathBuf>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HostsConfig {
    /// How often workers heartbeat.
    pub heartbeat_seconds: u64,
    /// An online host silent this long goes offline (3 missed beats).
    pub offline_after_seconds: u64,
}

impl Default for HostsConfig {
    fn default() -> Self {
        Self {
            heartbeat_seconds: 30,
            offline_after_seconds: 90,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchConfig {
    /// A pending run fails after this long without a host (OQ-15).
    pub timeout_seconds: u64,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        Self {
            timeout_seconds: 300,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionConfig {
    /// Events older than this are purged at start.
    pub events_days: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        Self { events_days: 30 }
    }
}

/// The file's shape: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    data_dir: Option<PathBuf>,
    database_url: Option<String>,
    hosts: HostsConfig,
    dispatch: DispatchConfig,
    retention: RetentionConfig,
    tls: TlsFile,
    git: GitFile,
    leader: LeaderConfig,
    loops: LoopsConfig,
    database: DatabaseConfig,
    prices: prices::PricesFile,
    webhooks: webhooks::WebhooksConfig,
    rate_limits: rate_limits::RateLimitsConfig,
    secrets: secrets::SecretsFile,
    sources: sources::SourcesConfig,
    api: ApiConfig,
    oidc: Option<oidc::OidcFile>,
    metrics: MetricsConfig,
    logs: logs::LogsConfig,
}

impl Config {
    /// Reads `--config` (if any) and applies the command line over it.
    pub fn load(cli: &Cli) -> anyhow::Result<Self> {
        let text = match &cli.config {
            Some(path) => Some(
                std::fs::read_to_string(path)
                    .with_context(|| format!("read config file {}", path.display()))?,
            ),
            None => None,
        };
        let home = std::env::var_os("HOME").map(PathBuf::from);
        Self::resolve(
            text.as_deref().map(|t| (cli.config.as_deref().unwrap(), t)),
            cli,
            home.as_deref(),
        )
    }

    /// Pure resolution: `file` is (path, contents), `home` is `$HOME`.
    pub fn resolve(
        file: Option<(&Path, &str)>,
        cli: &Cli,
        home: Option<&Path>,
    ) -> anyhow::Result<Self> {
        let parsed: FileConfig = match file {
            Some((path, text)) => toml::from_str(text)
                .map_err(|e| anyhow::anyhow!("{}:{}", path.display(), one_line(&e, text)))?,
            None => FileConfig::default(),
        };
        let data_dir = match cli.data_dir.clone().or(parsed.data_dir) {
            Some(dir) => expand_home(&dir, home)?,
            None => default_data_dir(home)?,
        };
        let secrets_key_file =
            parsed
                .secrets
                .key_file(cli.secrets_key_file.clone(), &data_dir, |f| {
                    expand_home(f, home)
                })?;
        let tls = tls_mode(cli, parsed.tls, home)?;
        let oidc = match parsed.oidc {
            Some(o) => Some(o.settings(tls != Tls::Off, |f| expand_home(f, home))?),
            None => None,
        };
        let config = Config {
            secrets_key_file,
            oidc,
            metrics: parsed.metrics,
            listen: cli
                .listen
                .clone()
                .or(parsed.listen)
                .unwrap_or_else(|| DEFAULT_LISTEN.to_string()),
            data_dir,
            database_url: cli.database_url.clone().or(parsed.database_url),
            local_worker: cli.local_worker,
            tls,
            hosts: parsed.hosts,
            dispatch: parsed.dispatch,
            retention: parsed.retention,
            git: git_auth(parsed.git, home)?,
            leader: parsed.leader,
            loops: parsed.loops,
            database: parsed.database,
            prices: parsed.prices.table(),
            webhooks: parsed.webhooks,
            rate_limits: parsed.rate_limits,
            sources: parsed.sources.expanded(|r| expand_home(r, home))?,
            api: parsed.api,
            logs: parsed.logs.expanded(|d| expand_home(d, home))?,
        };
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> anyhow::Result<()> {
        let h = &self.hosts;
        if h.heartbeat_seconds == 0 {
            bail!("[hosts] heartbeat_seconds must be at least 1");
        }
        if h.offline_after_seconds <= h.heartbeat_seconds {
            bail!(
                "[hosts] offline_after_seconds ({}) must exceed heartbeat_seconds ({})",
                h.offline_after_seconds,
                h.heartbeat_seconds
            );
        }
        if self.dispatch.timeout_seconds == 0 {
            bail!("[dispatch] timeout_seconds must be at least 1");
        }
        self.database.validate()?;
        if self.leader.lease_seconds < 3 {
            bail!("[leader] lease_seconds must be at least 3");
        }
        if self.loops.resync_ms < 50 {
            bail!("[loops] resync_ms must be at least 50");
        }
        if self.retention.events_days == 0 {
            bail!("[retention] events_days must be at least 1");
        }
        if self.api.max_body_bytes < 2 << 20 {
            bail!("[api] max_body_bytes must be at least 2097152 (2 MiB, what every other route accepts)");
        }
        self.webhooks.validate()?;
        self.sources.validate()?;
        self.rate_limits.validate()
    }
}

/// Flags over the `[tls]` table; a flag replaces the whole table, so a
/// file's pair and a flag's self-signed never mix.
fn tls_mode(cli: &Cli, file: TlsFile, home: Option<&Path>) -> anyhow::Result<Tls> {
    let (cert, key, self_signed) =
        if cli.tls_cert.is_some() || cli.tls_key.is_some() || cli.tls_self_signed {
            (
                cli.tls_cert.clone(),
                cli.tls_key.clone(),
                cli.tls_self_signed,
            )
        } else {
            (file.cert_file, file.key_file, file.self_signed)
        };
    match (cert, key, self_signed) {
        (None, None, false) => Ok(Tls::Off),
        (None, None, true) => Ok(Tls::SelfSigned),
        (Some(_), Some(_), true) => {
            bail!("[tls] self_signed cannot go with cert_file/key_file: choose one")
        }
        (Some(c), Some(k), false) => Ok(Tls::Files {
            cert_file: expand_home(&c, home)?,
            key_file: expand_home(&k, home)?,
        }),
        (Some(_), None, _) => {
            bail!("a TLS certificate needs its key: --tls-key FILE ([tls] key_file)")
        }
        (None, Some(_), _) => {
            bail!("a TLS key needs its certificate: --tls-cert FILE ([tls] cert_file)")
        }
    }
}

/// The `[git]` table, `~` expanded; each file must exist (a typo is found
/// at start, not at the first fetch).
fn git_auth(file: GitFile, home: Option<&Path>) -> anyhow::Result<GitAuth> {
    let check = |key: &str, p: Option<PathBuf>| -> anyhow::Result<Option<PathBuf>> {
        let Some(p) = p else { return Ok(None) };
        let p = expand_home(&p, home)?;
        if !p.is_file() {
            bail!("[git] {key}: {} is not a readable file", p.display());
        }
        Ok(Some(p))
    };
    Ok(GitAuth {
        credentials_file: check("credentials_file", file.credentials_file)?,
        ssh_key_file: check("ssh_key_file", file.ssh_key_file)?,
        known_hosts_file: check("known_hosts_file", file.known_hosts_file)?,
    })
}

/// `~/.local/share/pam`.
pub fn default_data_dir(home: Option<&Path>) -> anyhow::Result<PathBuf> {
    let home = home.context("HOME is not set: pass --data-dir")?;
    Ok(home.join(".local/share/pam"))
}

fn expand_home(dir: &Path, home: Option<&Path>) -> anyhow::Result<PathBuf> {
    match dir.strip_prefix("~") {
        Ok(rest) => Ok(home
            .context("HOME is not set: cannot expand ~ in data_dir")?
            .join(rest)),
        Err(_) => Ok(dir.to_path_buf()),
    }
}

/// toml's errors span several lines (a source excerpt); keep the message
/// and the position as `line:column: message` (1-based) to follow the
/// file's path.
fn one_line(e: &toml::de::Error, text: &str) -> String {
    match e.span() {
        Some(s) => {
            let before = &text[..s.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let column = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
            format!("{line}:{column}: {}", e.message())
        }
        None => format!(" {}", e.message()),
    }
}

#[cfg(test)]
mod tests;
