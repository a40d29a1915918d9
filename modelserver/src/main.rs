//! `pam-model-server --listen 127.0.0.1:PORT --script FILE.json [--log FILE.jsonl]`
//!
//! Serves one script until interrupted, for pointing an agent CLI at it by
//! hand. With `--log`, each request is appended as one JSON line within
//! 100 ms of its arrival (a held request before it is answered). Held
//! requests are released, and progress waited for, over HTTP: see the
//! `/_pam/` endpoints (`control.rs`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use pam_model_server::{ModelServer, Script};
use tokio::io::AsyncWriteExt;

struct Args {
    listen: SocketAddr,
    script: Option<PathBuf>,
    log: Option<PathBuf>,
}

const USAGE: &str =
    "usage: pam-model-server [--listen 127.0.0.1:PORT] [--script FILE.json] [--log FILE.jsonl]";

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        listen: "127.0.0.1:0".parse()?,
        script: None,
        log: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .with_context(|| format!("{flag} needs a value\n{USAGE}"))
        };
        match flag.as_str() {
            "--listen" => args.listen = value()?.parse().context("--listen")?,
            "--script" => args.script = Some(value()?.into()),
            "--log" => args.log = Some(value()?.into()),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other}\n{USAGE}"),
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    let script: Script = match &args.script {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => Script::default(),
    };
    let server = ModelServer::bind(args.listen, script).await?;
    // The first line is the address, so a wrapper script can read the port.
    println!("{}", server.base_url());

    let mut log = match &args.log {
        Some(path) => Some(
            tokio::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .await
                .with_context(|| format!("opening {}", path.display()))?,
        ),
        None => None,
    };
    let mut written = 0;
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        // Flushing once more after a signal keeps the last requests, which
        // are often the interesting ones (the CLI's final turn).
        let stop = tokio::select! {
            _ = tokio::signal::ctrl_c() => true,
            _ = term.recv() => true,
            _ = tick.tick() => false,
        };
        let requests = server.requests();
        for request in &requests[written..] {
            let line = serde_json::to_string(request)?;
            match log.as_mut() {
                Some(file) => file.write_all(format!("{line}\n").as_bytes()).await?,
                None => eprintln!(
                    "{} {} -> {:?}",
                    request.method, request.path, request.served
                ),
            }
        }
        written = requests.len();
        if stop {
            break;
        }
    }
    server.shutdown().await;
    Ok(())
}
