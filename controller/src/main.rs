//! `pamd`: the pam controller. See ARCHITECTURE.md ("Contracts") for the
//! command line and docs/operations.md for running it.

use clap::Parser;
use pam_controller::clock::SystemClock;
use pam_controller::config::{Cli, Config};
use std::sync::Arc;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    init_logging();
    let result = match Config::load(&cli) {
        Ok(config) => pam_controller::server::run(config, Arc::new(SystemClock)).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        // One line: the whole context chain, outermost first.
        eprintln!("pamd: error: {e:#}");
        std::process::exit(1);
    }
}

/// Logs to stderr; filter from `PAM_LOG`, else `RUST_LOG`, else `info`.
fn init_logging() {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("PAM_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".to_string());
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr)
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .init();
}
