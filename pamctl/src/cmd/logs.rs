//! `logs RUN [-f] [--tail N] [--since D]`, and when a run is over for good.
//!
//! # Caveats
//!
//! pamd keeps only the latest output snapshot of a run (a moving window
//! of the pane, `receivedAt` when it arrived), not timestamped lines. So
//! `--since D` filters the snapshot as a whole: it is printed only when it
//! was received within D; `--tail N` keeps its last N lines.

use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};
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

/// The last `n` lines of `text` (a final line without a newline counts).
pub(crate) fn tail(text: &str, n: usize) -> &str {
    if n == 0 {
        return "";
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    match body.rmatch_indices('\n').nth(n - 1) {
        Some((i, _)) => &text[i + 1..],
        None => text,
    }
}

/// What `--tail` and `--since` leave of the first snapshot printed.
pub(crate) struct Filter {
    pub tail: Option<usize>,
    pub since: Option<Duration>,
}

impl Filter {
    /// The part of `text` (received at `received`) to print; `Err` with
    /// the note to print instead when `--since` rules it out.
    pub(crate) fn apply<'a>(
        &self,
        text: &'a str,
        received: Option<&str>,
        now: DateTime<Utc>,
    ) -> std::result::Result<&'a str, String> {
        if let Some(since) = self.since {
            let at = received.and_then(|r| DateTime::parse_from_rfc3339(r).ok());
            let fresh = at.is_some_and(|at| {
                let age = now.signed_duration_since(at.with_timezone(&Utc));
                age.to_std().map_or(true, |age| age <= since)
            });
            if !fresh {
                return Err(format!(
                    "no output received in the last {} (the latest snapshot arrived {})",
                    duration::format(since),
                    received.unwrap_or("at an unknown time")
                ));
            }
        }
        Ok(match self.tail {
            Some(n) => tail(text, n),
            None => text,
        })
    }
}

pub(crate) fn logs(
    ctx: &mut Ctx,
    run: &str,
    follow: bool,
    tail_lines: Option<usize>,
    since: Option<&str>,
) -> Result<Exit> {
    let filter = Filter {
        tail: tail_lines,
        since: since.map(duration::parse).transpose()?,
    };
    let project = ctx.project()?;
    let client = ctx.client()?;
    let run_path = object_path(Kind::Run, Some(&project), run);
    let out_path = format!("{run_path}/output");
    let show_first = |snap: &Value| {
        let text = snap.get("text").and_then(Value::as_str).unwrap_or("");
        let received = snap.get("receivedAt").and_then(Value::as_str);
        match filter.apply(text, received, Utc::now()) {
            Ok(part) => term::out(part),
            Err(note) => term::note(&note),
        }
    };
    if !follow {
        match client.get_optional(&out_path)? {
            Some(snap) => show_first(&snap),
            None => {
                // pamd answers 404 both for a run that does not exist and
                // for one with no snapshot yet: the run itself tells them
                // apart (its own 404 names the run and the project).
                client.get(&run_path)?;
                return Err(
                    CliError::new(Exit::Refused, format!("run {run:?} has no output yet"))
                        .hint(format!("follow it with `pamctl logs -f {run}`")),
                );
            }
        }
        return Ok(Exit::Ok);
    }
    let mut printed: Option<String> = None;
    let mut attempt: Option<u64> = None;
    loop {
        // Read the run first: output read after seeing it finished is final.
        let state = client.get(&run_path)?;
        if let Some(snap) = client.get_optional(&out_path)? {
            let a = snap.get("attempt").and_then(Value::as_u64);
            let text = snap.get("text").and_then(Value::as_str).unwrap_or("");
            match &printed {
                None => show_first(&snap),
                Some(prev) => {
                    let prev = if attempt.is_some() && a != attempt {
                        term::note(&format!(
                            "--- attempt {} ---",
                            a.map_or("?".into(), |a| a.to_string())
                        ));
                        ""
                    } else {
                        prev.as_str()
                    };
                    match new_output(prev, text) {
                        Some(new) => term::out(new),
                        None => {
                            term::note("--- output skipped ahead; showing the latest snapshot ---");
                            term::out(text);
                        }
                    }
                }
            }
            attempt = a;
            printed = Some(text.to_string());
        }
        if final_state(&state).is_some() {
            return Ok(Exit::Ok);
        }
        std::thread::sleep(Duration::from_secs(1));
    }
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

    #[test]
    fn tail_counts_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
        assert_eq!(tail("a\nb\n", 5), "a\nb\n");
        assert_eq!(tail("a\nb\n", 0), "");
        assert_eq!(tail("", 3), "");
    }

    #[test]
    fn since_filters_the_snapshot_by_when_it_arrived() {
        let now = crate::render::samples::now();
        let f = Filter {
            tail: Some(1),
            since: Some(Duration::from_secs(600)),
        };
        assert_eq!(
            f.apply("a\nb\n", Some("2026-03-01T11:55:00Z"), now),
            Ok("b\n")
        );
        assert_eq!(
            f.apply("a\nb\n", Some("2026-03-01T11:00:00Z"), now),
            Err("no output received in the last 10m (the latest snapshot arrived 2026-03-01T11:00:00Z)".into())
        );
        assert!(f.apply("a", None, now).is_err());
        let all = Filter {
            tail: None,
            since: None,
        };
        assert_eq!(all.apply("a\nb\n", None, now), Ok("a\nb\n"));
    }
}
