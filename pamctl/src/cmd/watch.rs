//! `get -w` and `wait`, driven by the event stream: each relevant event
//! (the kind's topic family, in the project) makes pamctl re-read the
//! objects it watches. The stream resumes with `Last-Event-ID` after a
//! drop; a periodic re-read covers a stream that cannot connect at all.

use std::collections::BTreeMap;
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant};

use chrono::Utc;
use pam_manifests::Kind;
use serde_json::Value;

use crate::client::Client;
use crate::error::{CliError, Exit, Result};
use crate::render::{self, describe, Output};
use crate::stream::{follow, Follower, Item};
use crate::{object_path, parse_kind, term, Ctx};

/// Re-read at least this often even without events.
const RESYNC: Duration = Duration::from_secs(5);

/// Starts following the kind's events (in `project`, when scoped) and
/// waits until the stream is connected, so no change after the first read
/// is missed. A stream that does not connect is not fatal (the resync
/// still re-reads); a refused one is.
fn watch_stream(client: &Client, kind: Kind, project: Option<&str>) -> Result<Follower> {
    let path = super::events::stream_path(Some(describe::topic_prefix(kind)), project);
    let f = follow(client, path, None);
    match f.rx.recv_timeout(Duration::from_secs(10)) {
        Ok(Item::Fatal(e)) => Err(e),
        Ok(Item::Lost(why)) => {
            term::note(&format!(
                "note: event stream unavailable ({why}); re-reading every {}s",
                RESYNC.as_secs()
            ));
            Ok(f)
        }
        _ => Ok(f),
    }
}

/// Waits up to `timeout` for the next batch of stream items; `Ok(true)`
/// when something arrived (events are drained: one re-read per batch).
fn next_batch(f: &Follower, timeout: Duration) -> Result<bool> {
    let first = match f.rx.recv_timeout(timeout) {
        Ok(item) => item,
        Err(RecvTimeoutError::Timeout) => return Ok(false),
        Err(RecvTimeoutError::Disconnected) => {
            std::thread::sleep(timeout);
            return Ok(false);
        }
    };
    let mut items = vec![first];
    items.extend(f.rx.try_iter());
    for item in items {
        match item {
            Item::Fatal(e) => return Err(e),
            Item::Lost(why) => {
                term::note(&format!("note: event stream lost ({why}); reconnecting"))
            }
            Item::Gap { from, to } => term::note(&format!(
                "note: events {from}..{to} were purged; re-reading"
            )),
            Item::Event(_) | Item::Connected => {}
        }
    }
    Ok(true)
}

fn name_of(o: &Value) -> String {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// `get KIND [NAME] -w`: the current objects, then one line (or JSON
/// object) per change until interrupted.
pub(crate) fn get_watch(
    ctx: &mut Ctx,
    kind: &str,
    name: Option<&str>,
    selector: Option<&str>,
    output: Output,
    all_projects: bool,
) -> Result<Exit> {
    let super::get::GetScope {
        kind,
        across,
        project,
    } = super::get::GetScope::resolve(ctx, kind, name, selector, all_projects)?;
    let client = ctx.client()?;
    let follower = watch_stream(&client, kind, project.as_deref())?;
    let read = || -> Result<Vec<Value>> {
        match name {
            Some(n) => Ok(client
                .get_optional(&object_path(kind, project.as_deref(), n))?
                .into_iter()
                .collect()),
            None => super::get::list(&client, kind, project.as_deref(), selector),
        }
    };
    let mut known: BTreeMap<String, Value> = BTreeMap::new();
    let first = read()?;
    if let Some(n) = name {
        if first.is_empty() {
            return Err(CliError::new(
                Exit::Refused,
                format!("404 not_found: {} not found", render::qualified(kind, n)),
            ));
        }
    }
    let now = Utc::now();
    match output {
        Output::Table | Output::Wide => {
            if !first.is_empty() {
                term::out(&render::get(kind, &first, output, false, across, now)?);
            }
        }
        _ => {
            for o in &first {
                term::out(&watch_line(kind, o, output, across)?);
            }
        }
    }
    for o in first {
        known.insert(name_of(&o), o);
    }
    loop {
        next_batch(&follower, RESYNC)?;
        let current = read()?;
        let mut seen = BTreeMap::new();
        for o in current {
            let n = name_of(&o);
            if known.get(&n) != Some(&o) {
                term::out(&watch_line(kind, &o, output, across)?);
            }
            seen.insert(n, o);
        }
        // Deleted: shown once more, as kubectl does.
        for (n, o) in &known {
            if !seen.contains_key(n) {
                term::out(&watch_line(kind, o, output, across)?);
            }
        }
        known = seen;
    }
}

/// One object as a watch line: a table row without header, one compact
/// JSON object, a name, or a YAML document.
fn watch_line(kind: Kind, o: &Value, output: Output, across: bool) -> Result<String> {
    Ok(match output {
        Output::Table | Output::Wide => {
            let t = render::get(
                kind,
                std::slice::from_ref(o),
                output,
                false,
                across,
                Utc::now(),
            )?;
            t.lines().skip(1).map(|l| format!("{l}\n")).collect()
        }
        Output::Json => format!(
            "{}\n",
            serde_json::to_string(&render::object(o)).expect("JSON serializes")
        ),
        Output::Yaml => format!("---\n{}", render::to_yaml(&render::object(o))),
        Output::Name => format!("{}\n", render::name(kind, o)),
    })
}

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

/// `1h`, `5m`, `30s`, `500ms`, or plain seconds.
pub(crate) fn parse_duration(text: &str) -> Result<Duration> {
    let bad = || CliError::usage(format!("bad duration {text:?}: use e.g. 30s, 5m, 1h"));
    let t = text.trim();
    let (num, unit) = match t.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: f64 = num.parse().map_err(|_| bad())?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(secs).map_err(|_| bad())
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
    let timeout = parse_duration(timeout)?;
    let (kind, mut names) = wait_targets(args, selector.is_some())?;
    if let Some(s) = selector {
        super::apply::parse_selector(s)?;
    }
    let project = ctx.project_for(kind)?;
    let client = ctx.client()?;
    let deadline = Instant::now() + timeout;
    let follower = watch_stream(&client, kind, project.as_deref())?;
    if let Some(sel) = selector {
        names = super::get::list(&client, kind, project.as_deref(), Some(sel))?
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
            } else {
                still.push((n, state));
            }
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
                    humanize(timeout),
                    pending.len()
                ),
            )
            .details(details));
        }
        next_batch(&follower, (deadline - now).min(RESYNC))?;
    }
}

fn humanize(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        format!("{ms}ms")
    } else {
        format!("{}s", ms / 1000)
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
    fn durations_and_targets() {
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
        assert!(parse_duration("5 parsecs").is_err());
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
