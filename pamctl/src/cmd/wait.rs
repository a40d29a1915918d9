//! `wait KIND/NAME… --for=…`: event-driven like `get -w`; ends at once
//! when a run is over for good in another phase than the one waited for.

use std::time::Instant;

use pam_manifests::Kind;
use serde_json::Value;

use super::logs::final_state;
use super::watch::{name_of, next_batch, watch_stream, RESYNC};
use crate::error::{CliError, Exit, Result};
use crate::{duration, object_path, parse_kind, render, term, Ctx};

/// What `wait --for` waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum For {
    /// `condition=X[=true|false]`: `status.conditions[type=X].status`.
    Condition { type_: String, status: bool },
    /// `phase=Y`: `status.phase` (case-insensitive).
    Phase(String),
    /// `delete`: the object is gone.
    Delete,
}

impl For {
    pub(crate) fn parse(text: &str) -> Result<For> {
        let bad = || {
            CliError::usage(format!(
                "--for={text}: expected condition=X[=true|false], phase=Y or delete"
            ))
        };
        if text == "delete" {
            return Ok(For::Delete);
        }
        let (what, rest) = text.split_once('=').ok_or_else(bad)?;
        match what {
            "phase" if !rest.is_empty() => Ok(For::Phase(rest.to_string())),
            "condition" => {
                let (type_, status) = match rest.split_once('=') {
                    None => (rest, true),
                    Some((t, s)) => match s.to_ascii_lowercase().as_str() {
                        "true" => (t, true),
                        "false" => (t, false),
                        _ => return Err(bad()),
                    },
                };
                if type_.is_empty() {
                    return Err(bad());
                }
                Ok(For::Condition {
                    type_: type_.to_string(),
                    status,
                })
            }
            _ => Err(bad()),
        }
    }

    /// Why `obj` can never meet a phase condition: a run in a final state
    /// ([`final_state`]) that is not the phase waited for.
    pub(crate) fn unreachable(&self, kind: Kind, obj: Option<&Value>) -> Option<String> {
        match (self, kind, obj) {
            (For::Phase(_), Kind::Run, Some(o)) => final_state(o),
            _ => None,
        }
    }

    /// Refuses a phase the kind never has (a typo would wait in vain).
    pub(crate) fn check_kind(&self, kind: Kind) -> Result<()> {
        let For::Phase(p) = self else { return Ok(()) };
        let phases = kind.info().phases;
        if phases.iter().any(|x| x.eq_ignore_ascii_case(p)) {
            return Ok(());
        }
        Err(CliError::usage(format!(
            "--for=phase={p}: a {} has no phase {p:?}",
            kind.singular()
        ))
        .hint(format!("{} phases: {}", kind.singular(), phases.join(", "))))
    }

    /// Whether `obj` (None: not found) meets it, and what it is now.
    pub(crate) fn check(&self, obj: Option<&Value>) -> (bool, String) {
        let Some(o) = obj else {
            return (*self == For::Delete, "not found".into());
        };
        match self {
            For::Delete => (false, "still exists".into()),
            For::Phase(want) => {
                let phase = o
                    .pointer("/status/phase")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                (
                    phase.eq_ignore_ascii_case(want),
                    format!("phase is {:?}", phase),
                )
            }
            For::Condition { type_, status } => {
                let cond = o
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|cs| {
                        cs.iter().find(|c| {
                            c.get("type")
                                .and_then(Value::as_str)
                                .is_some_and(|t| t.eq_ignore_ascii_case(type_))
                        })
                    });
                match cond.and_then(|c| c.get("status")).and_then(Value::as_str) {
                    None => (false, format!("no condition {type_}")),
                    Some(s) => (
                        s.eq_ignore_ascii_case(if *status { "true" } else { "false" }),
                        format!("condition {type_} is {s}"),
                    ),
                }
            }
        }
    }
}

/// The objects `wait` was given: `KIND/NAME…`, or `KIND NAME…`, or `KIND`
/// with `-l`.
fn wait_targets(args: &[String], selector: bool) -> Result<(Kind, Vec<String>)> {
    let mut kind: Option<Kind> = None;
    let mut names = Vec::new();
    let mut set_kind = |k: Kind| -> Result<()> {
        match kind {
            Some(prev) if prev != k => Err(CliError::usage(
                "wait: every object must be of the same kind",
            )),
            _ => {
                kind = Some(k);
                Ok(())
            }
        }
    };
    for (i, a) in args.iter().enumerate() {
        match a.split_once('/') {
            Some((k, n)) => {
                set_kind(parse_kind(k)?)?;
                names.push(n.to_string());
            }
            None if i == 0 => set_kind(parse_kind(a)?)?,
            None => names.push(a.clone()),
        }
    }
    let kind = kind.ok_or_else(|| CliError::usage("wait: which objects? pass KIND/NAME…"))?;
    match (names.is_empty(), selector) {
        (true, false) => Err(CliError::usage(
            "wait: which objects? pass KIND/NAME… or KIND -l SELECTOR",
        )),
        (false, true) => Err(CliError::usage("wait: pass either NAMEs or -l, not both")),
        _ => Ok((kind, names)),
    }
}

pub(crate) fn wait(
    ctx: &mut Ctx,
    args: &[String],
    for_: &str,
    timeout: &str,
    selector: Option<&str>,
) -> Result<Exit> {
    let cond = For::parse(for_)?;
    let timeout = duration::parse(timeout)?;
    let (kind, mut names) = wait_targets(args, selector.is_some())?;
    cond.check_kind(kind)?;
    if let Some(s) = selector {
        super::apply::parse_selector(s)?;
    }
    let project = ctx.project_for(kind)?;
    let client = ctx.client()?;
    let deadline = Instant::now() + timeout;
    let follower = watch_stream(&client, kind, project.as_deref())?;
    if let Some(sel) = selector {
        names = client
            .list(kind, project.as_deref(), Some(sel))?
            .iter()
            .map(name_of)
            .collect();
        if names.is_empty() {
            return Err(CliError::new(
                Exit::Failed,
                format!("no {} match {sel:?}", kind.plural()),
            ));
        }
    }
    let mut pending: Vec<(String, String)> =
        names.into_iter().map(|n| (n, String::new())).collect();
    loop {
        let mut still = Vec::new();
        let mut never = Vec::new();
        for (n, _) in pending {
            let obj = client.get_optional(&object_path(kind, project.as_deref(), &n))?;
            let (met, state) = cond.check(obj.as_ref());
            if met {
                let what = if cond == For::Delete {
                    "deleted"
                } else {
                    "condition met"
                };
                term::outln(&format!("{} {what}", render::qualified(kind, &n)));
            } else if let Some(end) = cond.unreachable(kind, obj.as_ref()) {
                never.push(format!("{} ended in {end}", render::qualified(kind, &n)));
            } else {
                still.push((n, state));
            }
        }
        if !never.is_empty() {
            // A run that is over for good never reaches another phase:
            // waiting out the timeout would only hide that.
            return Err(CliError::new(
                Exit::Failed,
                format!("{} object(s) can never meet --for={for_}", never.len()),
            )
            .details(never));
        }
        pending = still;
        if pending.is_empty() {
            return Ok(Exit::Ok);
        }
        let now = Instant::now();
        if now >= deadline {
            let details = pending
                .iter()
                .map(|(n, state)| format!("{}: {state}", render::qualified(kind, n)))
                .collect();
            return Err(CliError::new(
                Exit::Failed,
                format!(
                    "timed out after {} waiting for --for={for_} on {} object(s)",
                    duration::format(timeout),
                    pending.len()
                ),
            )
            .details(details));
        }
        next_batch(&follower, (deadline - now).min(RESYNC))?;
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn for_forms_and_checks() {
        assert_eq!(For::parse("delete").unwrap(), For::Delete);
        assert_eq!(
            For::parse("phase=Running").unwrap(),
            For::Phase("Running".into())
        );
        assert_eq!(
            For::parse("condition=Ready").unwrap(),
            For::Condition {
                type_: "Ready".into(),
                status: true
            }
        );
        assert_eq!(
            For::parse("condition=Ready=false").unwrap(),
            For::Condition {
                type_: "Ready".into(),
                status: false
            }
        );
        for bad in [
            "phase=",
            "condition=",
            "condition=Ready=maybe",
            "ready",
            "x=y",
        ] {
            assert_eq!(For::parse(bad).unwrap_err().exit, Exit::Usage, "{bad}");
        }
        let run = json!({"status": {"phase": "running", "conditions": [
            {"type": "Ready", "status": "False"}]}});
        assert!(For::Phase("Running".into()).check(Some(&run)).0);
        assert!(!For::Phase("exited".into()).check(Some(&run)).0);
        let ready = |s: bool| For::Condition {
            type_: "ready".into(),
            status: s,
        };
        assert!(ready(false).check(Some(&run)).0);
        assert_eq!(
            ready(true).check(Some(&run)),
            (false, "condition ready is False".into())
        );
        assert!(For::Delete.check(None).0);
        assert!(!For::Delete.check(Some(&run)).0);
        assert_eq!(
            For::Phase("x".into()).check(None),
            (false, "not found".into())
        );
    }

    #[test]
    fn final_runs_end_a_phase_wait_and_typos_are_refused() {
        let failed = json!({"spec": {}, "status": {"phase": "failed", "attempt": 1}});
        let exited = For::Phase("exited".into());
        assert_eq!(
            exited.unreachable(Kind::Run, Some(&failed)).unwrap(),
            "phase \"failed\" (non-zero exit; attempt 1 of 1, no restart left)"
        );
        let retrying = json!({"spec": {"restartPolicy": {"maxAttempts": 2}},
            "status": {"phase": "failed", "attempt": 1}});
        assert_eq!(exited.unreachable(Kind::Run, Some(&retrying)), None);
        assert_eq!(exited.unreachable(Kind::Run, None), None);
        assert_eq!(For::Delete.unreachable(Kind::Run, Some(&failed)), None);
        exited.check_kind(Kind::Run).unwrap();
        For::Phase("Online".into()).check_kind(Kind::Host).unwrap();
        let e = For::Phase("exitted".into())
            .check_kind(Kind::Run)
            .unwrap_err();
        assert_eq!(
            e.message,
            "--for=phase=exitted: a run has no phase \"exitted\""
        );
        assert_eq!(
            e.hints,
            ["run phases: pending, spawning, running, exited, failed, stopped"]
        );
    }

    #[test]
    fn targets() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            wait_targets(&args(&["run/a", "rn/b"]), false).unwrap(),
            (Kind::Run, vec!["a".to_string(), "b".to_string()])
        );
        assert_eq!(
            wait_targets(&args(&["tasks", "x"]), false).unwrap(),
            (Kind::Task, vec!["x".to_string()])
        );
        assert_eq!(
            wait_targets(&args(&["runs"]), true).unwrap(),
            (Kind::Run, vec![])
        );
        assert!(wait_targets(&args(&["run/a", "task/b"]), false).is_err());
        assert!(wait_targets(&args(&["runs"]), false).is_err());
        assert!(wait_targets(&args(&["run/a"]), true).is_err());
    }
}
