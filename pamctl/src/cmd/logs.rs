//! `logs RUN [--attempt N] [--tail N] [--since D] [-f]`: a run's whole raw
//! log, read by pamd from the worker that keeps it (`GET
//! …/runs/{name}/log`); and when a run is over for good.
//!
//! `-f` follows the log as it grows and, when the run is restarted, the
//! next attempt's, until the run is over for good ([`final_state`]) and
//! its last attempt's log is whole. A cut connection (pamd restarted, a
//! replica gone) is taken up again at the byte it got to, so nothing is
//! printed twice or lost.

use std::str::FromStr;
use std::time::Duration;

use pam_manifests::state::{FailureReason, RunStatus};
use pam_manifests::Kind;
use serde_json::Value;

use crate::error::{CliError, Exit, Result};
use crate::{duration, object_path, term, Ctx};

/// Why a run will not change again, or `None` while it may: `exited` and
/// `stopped` are terminal; `failed` is final when the restart policy
/// cannot requeue it. pamd does not expose a pending requeue, so this is
/// its rule read from the object: the run is being stopped
/// (`spec.stopped`), its attempts are used up, or the reason is one that
/// never restarts ([`FailureReason::restartable`]: dispatch_timeout,
/// no_eligible_host, restart_exhausted, dependency_cancelled,
/// budget_exceeded).
pub(crate) fn final_state(run: &Value) -> Option<String> {
    let phase = run.pointer("/status/phase").and_then(Value::as_str)?;
    match RunStatus::from_str(phase).ok()? {
        RunStatus::Exited | RunStatus::Stopped => Some(format!("phase {phase:?}")),
        RunStatus::Failed => {
            let attempt = run
                .pointer("/status/attempt")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            let max = run
                .pointer("/spec/restartPolicy/maxAttempts")
                .and_then(Value::as_u64)
                .unwrap_or(1);
            let reason_text = run.pointer("/status/failureReason").and_then(Value::as_str);
            let reason = reason_text.and_then(|r| FailureReason::from_str(r).ok());
            let stopped = run
                .pointer("/spec/stopped")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            let why = match reason_text {
                Some(r) => format!("failureReason {r}"),
                None => "non-zero exit".to_string(),
            };
            if stopped {
                Some(format!(
                    "phase \"failed\" ({why}; stopped, never restarted)"
                ))
            } else if !FailureReason::restartable(reason) {
                Some(format!("phase \"failed\" ({why}; not restarted)"))
            } else if attempt >= max {
                Some(format!(
                    "phase \"failed\" ({why}; attempt {attempt} of {max}, no restart left)"
                ))
            } else {
                None
            }
        }
        RunStatus::Pending | RunStatus::Spawning | RunStatus::Running => None,
    }
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

/// What `logs` and `transcript` read of a run.
pub(crate) struct Read<'a> {
    pub run: &'a str,
    /// The route's last segment: `log` or `transcript`.
    pub file: &'a str,
    /// The pamctl command reading it (`logs`, `transcript`), for hints.
    pub command: &'a str,
    /// The attempt asked for (default: the run's current, and with
    /// `follow` each next one).
    pub attempt: Option<u32>,
    /// Where the first answer starts (`tail`, `since`), as query pairs.
    pub start: Vec<(&'static str, String)>,
    pub follow: bool,
}

/// How long a follow keeps trying to reach pamd again (a restart, a
/// replica gone) before it gives up.
const RECONNECT_FOR: u32 = 120;

/// Reads `r`, handing the bytes to `sink` as they come (see the module
/// doc for `follow`).
pub(crate) fn read(ctx: &mut Ctx, r: Read, sink: &mut dyn FnMut(&[u8])) -> Result<Exit> {
    use std::io::Read as _;
    let project = ctx.project()?;
    let client = ctx.client()?;
    let run_path = object_path(Kind::Run, Some(&project), r.run);
    let mut attempt = r.attempt;
    // Where the next request starts: `None` for the first (`r.start`).
    let mut offset: Option<u64> = None;
    let mut unreachable = 0;
    let ask = |attempt: Option<u32>, at: Option<u64>, extra: &[(&str, &str)]| {
        let attempt = attempt.map(|a| a.to_string());
        let at = at.map(|o| o.to_string());
        let mut q: Vec<(&str, Option<&str>)> = vec![("attempt", attempt.as_deref())];
        match &at {
            Some(o) => q.push(("offset", Some(o))),
            None => q.extend(r.start.iter().map(|(k, v)| (*k, Some(v.as_str())))),
        }
        q.extend(extra.iter().map(|(k, v)| (*k, Some(*v))));
        format!("{run_path}/{}{}", r.file, crate::client::query(&q))
    };
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let follow: &[(&str, &str)] = if r.follow { &[("follow", "true")] } else { &[] };
        let mut resp = match client.open_bytes(&ask(attempt, offset, follow)) {
            Ok(resp) => resp,
            Err(e) if r.follow && e.exit == Exit::Unreachable && unreachable < RECONNECT_FOR => {
                unreachable += 1;
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            // Not started yet (pending, or requeued and waiting for a
            // host): followed once it starts, unless it never will.
            Err(e) if r.follow && e.status == Some(404) => {
                let run = client.get(&run_path)?;
                if final_state(&run).is_some() {
                    return Err(e);
                }
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            Err(e) if e.status == Some(404) && e.message.ends_with("it never started") => {
                return Err(e.hint(format!(
                    "follow it with `pamctl {} -f {}`",
                    r.command, r.run
                )));
            }
            Err(e) => return Err(e),
        };
        unreachable = 0;
        let a = header(&resp, "x-pam-attempt").unwrap_or(1) as u32;
        let mut pos = header(&resp, "x-pam-offset").unwrap_or(0);
        let before = pos;
        attempt = attempt.or(Some(a));
        loop {
            match resp.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    sink(&buf[..n]);
                    pos += n as u64;
                }
                // Cut (pamd went away): taken up again where it got to.
                Err(_) => break,
            }
        }
        offset = Some(pos);
        if !r.follow {
            return Ok(Exit::Ok);
        }
        // The stream ended: the attempt is over, or the connection was cut.
        let run = client.get(&run_path)?;
        let current = run
            .pointer("/status/attempt")
            .and_then(Value::as_u64)
            .unwrap_or(0) as u32;
        if r.attempt.is_none() && current > a {
            term::note(&format!("--- attempt {current} ---"));
            (attempt, offset) = (Some(current), Some(0));
            continue;
        }
        if r.attempt.is_some() || final_state(&run).is_some() {
            // Over for good once the attempt's file is whole.
            let probe = client.open_bytes(&ask(attempt, offset, &[("limit", "0")]))?;
            let done = probe
                .headers()
                .get("x-pam-done")
                .is_some_and(|v| v.as_bytes() == b"true");
            if done && header(&probe, "x-pam-size").is_some_and(|s| s <= pos) {
                return Ok(Exit::Ok);
            }
        }
        if pos == before {
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// A number pamd sent in a header.
fn header(resp: &reqwest::blocking::Response, name: &str) -> Option<u64> {
    resp.headers().get(name)?.to_str().ok()?.parse().ok()
}

pub(crate) fn logs(
    ctx: &mut Ctx,
    run: &str,
    follow: bool,
    tail_lines: Option<usize>,
    since: Option<&str>,
    attempt: Option<u32>,
) -> Result<Exit> {
    let mut start = Vec::new();
    if let Some(n) = tail_lines {
        start.push(("tail", n.to_string()));
    }
    if let Some(s) = since {
        // Checked here for the usage error; pamd reads the same Go
        // durations (and RFC 3339 times).
        if chrono::DateTime::parse_from_rfc3339(s).is_err() {
            duration::parse(s)?;
        }
        start.push(("since", s.to_string()));
    }
    if tail_lines.is_some() && since.is_some() {
        return Err(CliError::usage(
            "--tail and --since both say where to start: give one",
        ));
    }
    let r = Read {
        run,
        file: "log",
        command: "logs",
        attempt,
        start,
        follow,
    };
    read(ctx, r, &mut |b| term::out_bytes(b))
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
    fn when_a_run_is_final() {
        let run = |spec: Value, status: Value| json!({"spec": spec, "status": status});
        assert!(final_state(&run(json!({}), json!({"phase": "exited"}))).is_some());
        assert!(final_state(&run(json!({}), json!({"phase": "stopped"}))).is_some());
        assert!(final_state(&run(json!({}), json!({"phase": "running"}))).is_none());
        let policy = json!({"restartPolicy": {"maxAttempts": 3}});
        // A restartable failure with attempts left will be requeued.
        assert!(final_state(&run(
            policy.clone(),
            json!({"phase": "failed", "attempt": 1})
        ))
        .is_none());
        assert!(final_state(&run(
            policy.clone(),
            json!({"phase": "failed", "attempt": 1, "failureReason": "host_lost"})
        ))
        .is_none());
        assert_eq!(
            final_state(&run(
                policy.clone(),
                json!({"phase": "failed", "attempt": 3})
            ))
            .unwrap(),
            "phase \"failed\" (non-zero exit; attempt 3 of 3, no restart left)"
        );
        assert_eq!(
            final_state(&run(
                policy.clone(),
                json!({"phase": "failed", "attempt": 1, "failureReason": "no_eligible_host"})
            ))
            .unwrap(),
            "phase \"failed\" (failureReason no_eligible_host; not restarted)"
        );
        let stopped = json!({"stopped": true, "restartPolicy": {"maxAttempts": 3}});
        assert!(final_state(&run(stopped, json!({"phase": "failed", "attempt": 1}))).is_some());
        // The default policy is one attempt.
        assert!(final_state(&run(json!({}), json!({"phase": "failed", "attempt": 1}))).is_some());
    }
}
