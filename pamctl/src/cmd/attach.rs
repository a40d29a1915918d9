//! `attach RUN`: hold the run's interactive lease, stream its pane, type
//! lines into it.

use std::time::Duration;

use pam_manifests::Kind;
use serde_json::{json, Value};

use super::logs::new_output;
use crate::error::{Exit, Result};
use crate::{object_path, render, term, Ctx};

/// What the attach loop hears from its helper threads.
enum AttachEvent {
    Line(String),
    Eof,
    Interrupt,
}

/// `pamctl attach RUN`: acquire the lease, then stream the pane and relay
/// typed lines until Ctrl-D, Ctrl-C or the run ends; release on the way out.
pub(crate) fn attach(ctx: &mut Ctx, run: &str, ttl: &str) -> Result<Exit> {
    let ttl = crate::duration::parse(ttl)?.as_secs().max(1);
    use std::io::BufRead;
    use std::sync::mpsc;

    let project = ctx.project()?;
    let client = ctx.client()?;
    let run_path = object_path(Kind::Run, Some(&project), run);
    let holder = format!(
        "{}@{}",
        std::env::var("USER").unwrap_or_else(|_| "operator".into()),
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "pamctl".into())
    );
    let lease = client.post(
        &format!("{run_path}/attach"),
        &json!({ "holder": holder, "ttlSeconds": ttl }),
    )?;
    let lease_id = lease
        .get("leaseId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    term::note(&format!(
        "attached to {} (lease {lease_id}); type lines to send them, Ctrl-D or Ctrl-C to detach",
        render::qualified(Kind::Run, run)
    ));
    let (tx, rx) = mpsc::channel();
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                match line {
                    Ok(l) => {
                        if tx.send(AttachEvent::Line(l)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send(AttachEvent::Eof);
        });
    }
    std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        if rt.block_on(tokio::signal::ctrl_c()).is_ok() {
            let _ = tx.send(AttachEvent::Interrupt);
        }
    });
    let release = |why: &str| -> Result<Exit> {
        let _ = client.post(
            &format!("{run_path}/attach/release"),
            &json!({ "leaseId": lease_id }),
        );
        term::note(&format!("detached ({why})"));
        Ok(Exit::Ok)
    };
    let renew_every = Duration::from_secs((ttl / 3).max(1));
    let mut renewed = std::time::Instant::now();
    let mut printed = String::new();
    let mut last_poll = std::time::Instant::now() - Duration::from_secs(1);
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(AttachEvent::Line(l)) => {
                if let Err(e) = client.post(
                    &format!("{run_path}/attach/input"),
                    &json!({ "leaseId": lease_id, "text": l }),
                ) {
                    let _ = release("error");
                    return Err(e);
                }
            }
            Ok(AttachEvent::Eof) => return release("end of input"),
            Ok(AttachEvent::Interrupt) => return release("interrupted"),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return release("end of input"),
        }
        if renewed.elapsed() >= renew_every {
            client.post(
                &format!("{run_path}/attach/renew"),
                &json!({ "leaseId": lease_id }),
            )?;
            renewed = std::time::Instant::now();
        }
        if last_poll.elapsed() >= Duration::from_millis(500) {
            last_poll = std::time::Instant::now();
            let state = client.get(&run_path)?;
            if let Some(snap) = client.get_optional(&format!("{run_path}/output"))? {
                let text = snap.get("text").and_then(Value::as_str).unwrap_or("");
                match new_output(&printed, text) {
                    Some(new) => term::out(new),
                    None => term::out(text),
                }
                printed = text.to_string();
            }
            let phase = state
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or("");
            if !matches!(phase, "spawning" | "running") {
                return release(&format!("the run is {phase}"));
            }
        }
    }
}
