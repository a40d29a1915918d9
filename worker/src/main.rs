//! `pam-worker`: the agent (`--server … --token-file … --name …`) and the
//! per-run wrapper (`pam-worker wrap …`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use pam_worker::agent::{self, AgentOptions};
use pam_worker::config::Config;
use pam_worker::providers::ProviderKind;
use pam_worker::wrap::{wrap, WrapArgs};
use pam_worker::{instance, spawn};
use uuid::Uuid;

/// Runs AI coding-agent CLIs in tmux sessions for a pam controller.
#[derive(Debug, Parser)]
#[command(name = "pam-worker", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    /// The controller's URL, e.g. http://pamd.example:7700; several pamd
    /// replicas comma-separated (one that does not answer is skipped).
    #[arg(long, env = "PAM_SERVER")]
    server: Option<String>,
    /// A file holding this worker's token.
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// This host's name in the fleet.
    #[arg(long)]
    name: Option<String>,
    /// Where the worker keeps its instance id, outbox and run logs
    /// [default: ~/.local/share/pam/worker].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// worker.toml.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Trust only the CA certificates in this PEM file for an https://
    /// server (overrides worker.toml's `ca_file`) [default: the bundled
    /// public roots].
    #[arg(long, env = "PAM_CA_FILE", value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// The tmux socket (overrides worker.toml's `tmux_socket`): a name
    /// (`tmux -L`) or, with a `/`, a path (`tmux -S`).
    #[arg(long)]
    tmux_socket: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run one attempt of a run (the worker starts this inside the run's
    /// tmux session): tee output to the run's log, write signals to the
    /// outbox.
    Wrap(WrapCli),
}

#[derive(Debug, clap::Args)]
struct WrapCli {
    /// The run id.
    #[arg(long = "run")]
    run: Uuid,
    /// The attempt stamped on every signal.
    #[arg(long)]
    attempt: i32,
    /// The worker's data dir.
    #[arg(long)]
    data_dir: PathBuf,
    /// Whose structured stream the command prints (claude, codex, gemini,
    /// grok, exec).
    #[arg(long, default_value = "exec")]
    provider: ProviderKind,
    /// The tmux session name, reported with `started`.
    #[arg(long)]
    session: Option<String>,
    /// Seconds between a forwarded stop signal and SIGKILL.
    #[arg(long, default_value_t = 10)]
    stop_grace_seconds: u64,
    /// A JSON env file to read (and delete) for the command's environment.
    #[arg(long)]
    env_file: Option<PathBuf>,
    /// The attempt's workspace: committed and measured when the
    /// command exits, the result sent with `finished`.
    #[arg(long)]
    workspace_file: Option<PathBuf>,
    /// The command to run.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PAM_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("pam-worker: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = match cli.command {
        Some(Cmd::Wrap(w)) => rt.block_on(run_wrap(w)),
        None => rt.block_on(run_agent(cli)),
    };
    // Do not wait for blocking work (a long-poll's DNS, an fsync) at exit.
    rt.shutdown_timeout(Duration::from_millis(200));
    code
}

async fn run_wrap(w: WrapCli) -> ExitCode {
    let env = match w.env_file.as_deref().map(spawn::take_env_file).transpose() {
        Ok(env) => env.unwrap_or_default(),
        Err(e) => {
            eprintln!("pam-worker wrap: {e:#}");
            return ExitCode::from(2);
        }
    };
    let args = WrapArgs {
        run_id: w.run,
        attempt: w.attempt,
        data_dir: w.data_dir,
        provider: w.provider,
        session_name: w.session,
        stop_grace: Duration::from_secs(w.stop_grace_seconds),
        env,
        command: w.command,
        workspace_file: w.workspace_file,
    };
    match wrap(args).await {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(255)),
        Err(e) => {
            eprintln!("pam-worker wrap: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn run_agent(cli: Cli) -> ExitCode {
    let (Some(server), Some(token_file), Some(name)) = (cli.server, cli.token_file, cli.name)
    else {
        Cli::command()
            .error(
                clap::error::ErrorKind::MissingRequiredArgument,
                "the agent needs --server URL --token-file FILE --name HOST (or use `pam-worker wrap`)",
            )
            .exit();
    };
    // SIGTERM/SIGINT end the agent at once: in-flight long-polls are
    // dropped, sessions keep running and are adopted on the next start.
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("pam-worker: cannot listen for SIGTERM: {e}");
            return ExitCode::from(1);
        }
    };
    let result = (|| -> anyhow::Result<AgentOptions> {
        let mut config = Config::load(cli.config.as_deref())?;
        if let Some(s) = cli.tmux_socket {
            config.tmux_socket = s;
        }
        let data_dir = match cli.data_dir {
            Some(d) => d,
            None => default_data_dir()?,
        };
        let token = std::fs::read_to_string(&token_file)
            .map_err(|e| anyhow::anyhow!("read token file {}: {e}", token_file.display()))?;
        anyhow::ensure!(
            !token.trim().is_empty(),
            "token file {} is empty",
            token_file.display()
        );
        let ca_certs = match cli.ca_file.as_ref().or(config.ca_file.as_ref()) {
            Some(f) => Some(pam_tls::read_ca_file(f).map_err(anyhow::Error::msg)?),
            None => None,
        };
        pam_worker::private::data_dir(&data_dir)
            .map_err(|e| anyhow::anyhow!("make data dir {} private: {e}", data_dir.display()))?;
        let instance_id = instance::load_or_create(&data_dir)?;
        let worker_exe = std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find my own executable: {e}"))?;
        tracing::info!(%server, %name, %instance_id, socket = ?config.socket(), "worker configured");
        Ok(AgentOptions {
            server,
            token: token.trim().to_string(),
            name,
            data_dir,
            config,
            worker_exe,
            instance_id,
            ca_certs,
        })
    })();
    let opts = match result {
        Ok(o) => o,
        Err(e) => {
            eprintln!("pam-worker: {e:#}");
            return ExitCode::from(2);
        }
    };
    tokio::select! {
        r = agent::run(opts) => match r {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("pam-worker: {e:#}");
                ExitCode::from(1)
            }
        },
        _ = term.recv() => {
            tracing::info!("SIGTERM: exiting");
            ExitCode::SUCCESS
        }
        _ = tokio::signal::ctrl_c() => {
            tracing::info!("SIGINT: exiting");
            ExitCode::SUCCESS
        }
    }
}

fn default_data_dir() -> anyhow::Result<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(x).join("pam/worker"));
    }
    let home = std::env::var_os("HOME")
        .ok_or_else(|| anyhow::anyhow!("HOME is not set; pass --data-dir"))?;
    Ok(PathBuf::from(home).join(".local/share/pam/worker"))
}
