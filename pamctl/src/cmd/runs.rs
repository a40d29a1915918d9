//! `run start`, `stop`, `signal`, `logs`.

use std::time::Duration;

use pam_manifests::protocol::SignalName;
use pam_manifests::{Kind, Manifest};
use serde_json::{json, Map, Value};

use crate::cli::RunStart;
use crate::error::{CliError, Exit, Result};
use crate::{object_path, render, term, Ctx};

/// `TASK-YYYYMMDD-HHMMSS`, kept within a DNS label.
fn default_name(task: &str, now: chrono::DateTime<chrono::Utc>) -> String {
    let stamp = now.format("%Y%m%d-%H%M%S").to_string();
    let keep = 63 - stamp.len() - 1;
    let base: String = task.chars().take(keep).collect();
    format!("{}-{stamp}", base.trim_end_matches('-'))
}

/// The Run manifest `run start` applies, checked with pam-manifests.
pub(crate) fn run_manifest(
    s: &RunStart,
    project: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Value> {
    let name = s.name.clone().unwrap_or_else(|| default_name(&s.task, now));
    let mut spec = Map::new();
    spec.insert("task".into(), json!(s.task));
    spec.insert("provider".into(), json!(s.provider));
    spec.insert("cwd".into(), json!(s.cwd));
    if let Some(p) = &s.prompt {
        spec.insert("prompt".into(), json!(p));
    }
    if let Some(h) = &s.target_host {
        spec.insert("target".into(), json!({ "host": h }));
    } else if !s.selector.is_empty() {
        let mut labels = Map::new();
        for kv in &s.selector {
            let Some((k, v)) = kv.split_once('=') else {
                return Err(CliError::usage(format!("--selector {kv:?}: expected k=v")));
            };
            labels.insert(k.to_string(), json!(v));
        }
        spec.insert("target".into(), json!({ "selector": labels }));
    }
    if let Some(n) = s.max_attempts {
        spec.insert("restartPolicy".into(), json!({ "maxAttempts": n }));
    }
    let run = json!({
        "apiVersion": render::API_VERSION,
        "kind": "Run",
        "metadata": { "name": name, "project": project },
        "spec": spec,
    });
    Manifest::from_json(run.clone()).map_err(|e| CliError::usage(format!("invalid run: {e}")))?;
    Ok(run)
}

pub(crate) fn start(ctx: &mut Ctx, s: RunStart) -> Result<Exit> {
    let project = ctx.project()?;
    let run = run_manifest(&s, &project, chrono::Utc::now())?;
    let client = ctx.client()?;
    let answer = client.post(
        "/api/v1/apply",
        &json!({ "objects": [run], "dryRun": false, "prune": false }),
    )?;
    for line in super::apply::result_lines(&answer) {
        term::outln(&line);
    }
    Ok(Exit::Ok)
}

pub(crate) fn stop(ctx: &mut Ctx, run: &str) -> Result<Exit> {
    let project = ctx.project()?;
    let client = ctx.client()?;
    client.post(
        &format!("{}/stop", object_path(Kind::Run, Some(&project), run)),
        &json!({}),
    )?;
    term::outln(&format!(
        "{} stop requested",
        render::qualified(Kind::Run, run)
    ));
    Ok(Exit::Ok)
}

pub(crate) fn signal(ctx: &mut Ctx, run: &str, signal: SignalName) -> Result<Exit> {
    let project = ctx.project()?;
    let client = ctx.client()?;
    client.post(
        &format!("{}/signal", object_path(Kind::Run, Some(&project), run)),
        &json!({ "signal": signal.as_str() }),
    )?;
    term::outln(&format!(
        "{} signalled {}",
        render::qualified(Kind::Run, run),
        signal.as_str()
    ));
    Ok(Exit::Ok)
}

/// What to print of snapshot `next` after `prev` was printed. Snapshots
/// may be a moving window over the output (the start dropped), so this
/// finds the longest end of `prev` that `next` starts with and returns the
/// rest; `None` when they do not overlap at all (print all of `next`).
pub(crate) fn new_output<'a>(prev: &str, next: &'a str) -> Option<&'a str> {
    if let Some(rest) = next.strip_prefix(prev) {
        return Some(rest);
    }
    // KMP: run `next` as the pattern over `prev` as the text; the state at
    // the end is the longest prefix of `next` that is a suffix of `prev`.
    let (p, t) = (next.as_bytes(), prev.as_bytes());
    let mut fail = vec![0usize; p.len()];
    let mut k = 0;
    for i in 1..p.len() {
        while k > 0 && p[i] != p[k] {
            k = fail[k - 1];
        }
        if p[i] == p[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut state = 0;
    for &c in t {
        while state > 0 && (state == p.len() || c != p[state]) {
            state = fail[state - 1];
        }
        if state < p.len() && c == p[state] {
            state += 1;
        }
    }
    // A valid UTF-8 `next` cannot start inside a character, and the match
    // ends where `prev` ends, so `state` is a character boundary.
    (state > 0).then(|| &next[state..])
}

/// Whether a run will not produce more output.
fn finished(run: &Value) -> bool {
    let phase = run
        .pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("");
    match phase {
        "exited" | "stopped" => true,
        "failed" => {
            let attempt = run
                .pointer("/status/attempt")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let max = run
                .pointer("/spec/restartPolicy/maxAttempts")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            let reason = run
                .pointer("/status/failureReason")
                .and_then(Value::as_str)
                .unwrap_or("");
            let stopped = run
                .pointer("/spec/stopped")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            stopped
                || attempt >= max
                || matches!(
                    reason,
                    "dispatch_timeout" | "no_eligible_host" | "restart_exhausted"
                )
        }
        _ => false,
    }
}

pub(crate) fn logs(ctx: &mut Ctx, run: &str, follow: bool) -> Result<Exit> {
    let project = ctx.project()?;
    let client = ctx.client()?;
    let run_path = object_path(Kind::Run, Some(&project), run);
    let out_path = format!("{run_path}/output");
    if !follow {
        let snap = client.get_optional(&out_path)?.ok_or_else(|| {
            CliError::new(Exit::Refused, format!("run {run:?} has no output yet"))
                .hint("follow it with `pamctl logs -f`")
        })?;
        term::out(snap.get("text").and_then(Value::as_str).unwrap_or(""));
        return Ok(Exit::Ok);
    }
    let mut printed = String::new();
    let mut attempt: Option<u64> = None;
    loop {
        // Read the run first: output read after seeing it finished is final.
        let state = client.get(&run_path)?;
        if let Some(snap) = client.get_optional(&out_path)? {
            let a = snap.get("attempt").and_then(Value::as_u64);
            let text = snap.get("text").and_then(Value::as_str).unwrap_or("");
            if attempt.is_some() && a != attempt {
                term::note(&format!(
                    "--- attempt {} ---",
                    a.map_or("?".into(), |a| a.to_string())
                ));
                printed.clear();
            }
            attempt = a;
            match new_output(&printed, text) {
                Some(new) => term::out(new),
                None => {
                    term::note("--- output skipped ahead; showing the latest snapshot ---");
                    term::out(text);
                }
            }
            printed = text.to_string();
        }
        if finished(&state) {
            return Ok(Exit::Ok);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// What the attach loop hears from its helper threads.
enum AttachEvent {
    Line(String),
    Eof,
    Interrupt,
}

/// `pamctl attach RUN`: acquire the lease, then stream the pane and relay
/// typed lines until Ctrl-D, Ctrl-C or the run ends; release on the way out.
pub(crate) fn attach(ctx: &mut Ctx, run: &str, ttl: u64) -> Result<Exit> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn start_args() -> RunStart {
        RunStart {
            task: "build".into(),
            provider: "claude".into(),
            cwd: "/src/web".into(),
            prompt: Some("make it build".into()),
            name: None,
            target_host: None,
            selector: vec!["gpu=true".into(), "os=linux".into()],
            max_attempts: Some(3),
        }
    }

    #[test]
    fn run_start_builds_a_valid_run() {
        let now = crate::render::samples::now();
        let run = run_manifest(&start_args(), "web", now).unwrap();
        assert_eq!(
            run,
            json!({"apiVersion": "pam.dev/v1", "kind": "Run",
                "metadata": {"name": "build-20260301-120000", "project": "web"},
                "spec": {"task": "build", "provider": "claude", "cwd": "/src/web", "prompt": "make it build",
                    "target": {"selector": {"gpu": "true", "os": "linux"}},
                    "restartPolicy": {"maxAttempts": 3}}})
        );
        let bad = RunStart {
            provider: "vim".into(),
            ..start_args()
        };
        let e = run_manifest(&bad, "web", now).unwrap_err();
        assert_eq!(e.exit, Exit::Usage);
        assert!(e.message.contains("vim"), "{}", e.message);
        let long = RunStart {
            task: "a".repeat(63),
            ..start_args()
        };
        let name = default_name(&long.task, now);
        assert!(
            name.len() <= 63 && pam_manifests::Name::parse(&name).is_ok(),
            "{name}"
        );
    }

    #[test]
    fn follow_prints_only_what_is_new() {
        assert_eq!(new_output("", "a\n"), Some("a\n"));
        assert_eq!(new_output("a\n", "a\nb\n"), Some("b\n"));
        // A moving window: the start dropped, the end of what was printed is still there.
        assert_eq!(
            new_output("line1\nline2\n", "line2\nline3\n"),
            Some("line3\n")
        );
        assert_eq!(new_output("ab\nab\n", "ab\nab\nc\n"), Some("c\n"));
        assert_eq!(new_output("xab\nab\n", "ab\nab\nc\n"), Some("c\n"));
        assert_eq!(new_output("same\n", "same\n"), Some(""));
        assert_eq!(new_output("old", "entirely new"), None);
        assert_eq!(new_output("é€x", "€xé"), Some("é"));
    }

    #[test]
    fn when_a_run_is_finished() {
        assert!(finished(&json!({"status": {"phase": "exited"}})));
        assert!(!finished(&json!({"status": {"phase": "running"}})));
        assert!(!finished(
            &json!({"spec": {"restartPolicy": {"maxAttempts": 3}}, "status": {"phase": "failed", "attempt": 1}})
        ));
        assert!(finished(
            &json!({"spec": {"restartPolicy": {"maxAttempts": 3}}, "status": {"phase": "failed", "attempt": 3}})
        ));
    }
}
