//! `pamd`: the pam controller. See ARCHITECTURE.md ("Contracts") for the
//! command line and docs/operations.md for running it.

use clap::Parser;
use pam_controller::clock::{FileClock, SharedClock, SystemClock};
use pam_controller::config::{Cli, Config, LogFormat};
use std::sync::Arc;

/// jemalloc, not the system allocator: glibc keeps what requests freed in
/// its per-thread arenas (after the apply-growth load: 185 MB held, 4 MB in
/// use) and returns it only from the top of a heap; jemalloc's background
/// thread purges freed pages after its decay time (10 s) even while pamd
/// is idle (docs/benchmarks.md, "pamd's memory").
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc reads its options from this symbol at start. Without
/// `background_thread` it purges only while allocating, so an idle pamd
/// would keep the pages of its last big request. One arena, and freed
/// pages purged after 250 ms instead of 10 s: a big apply
/// parses on threads of its own and lets the documents go on the
/// request's thread as it writes them; with an arena per thread their
/// pages could not be reused for the journal and results that grow
/// meanwhile, and were still resident at the apply's peak — 13× the
/// body instead of 9× for small documents (bench-apply-memory,
/// docs/benchmarks.md). The lint is about
/// `export_name` (a symbol clash would be undefined behaviour): this name
/// belongs to the jemalloc that tikv-jemalloc-sys links in, with its
/// `_rjem_` prefix, and to nothing else.
#[allow(unsafe_code)]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: &[u8; 52] = b"background_thread:true,narenas:1,dirty_decay_ms:250\0";

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let clock: SharedClock = match &cli.clock_file {
        Some(file) => {
            tracing::warn!(
                file = %file.display(),
                "--clock-file: the time comes from this file, not the wall clock (a test hook, never for production)"
            );
            Arc::new(FileClock::new(file))
        }
        None => Arc::new(SystemClock),
    };
    let result = match Config::load(&cli) {
        Ok(config) => pam_controller::server::run(config, clock).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        // One line: the whole context chain, outermost first.
        eprintln!("pamd: error: {e:#}");
        std::process::exit(1);
    }
}

/// Logs to stderr; filter from `PAM_LOG`, else `RUST_LOG`, else `info`;
/// as text, or as one JSON object a line (`--log-format json`).
fn init_logging(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = std::env::var("PAM_LOG")
        .or_else(|_| std::env::var("RUST_LOG"))
        .unwrap_or_else(|_| "info".to_string());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_new(&filter).unwrap_or_else(|_| EnvFilter::new("info")))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder
            .with_ansi(
                std::io::IsTerminal::is_terminal(&std::io::stderr())
                    && std::env::var_os("NO_COLOR").is_none(),
            )
            .init(),
    }
}
