//! `get -w` and `wait`, driven by the event stream: each relevant event
//! (the kind's topic family, in the project) makes pamctl re-read the
//! objects it watches. The stream resumes with `Last-Event-ID` after a
//! drop; a periodic re-read covers a stream that cannot connect at all.

use std::collections::BTreeMap;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use chrono::Utc;
use pam_manifests::Kind;
use serde_json::Value;

use crate::client::Client;
use crate::error::{CliError, Exit, Result};
use crate::render::{self, describe, GetOpts, Output};
use crate::stream::{follow, Follower, Item};
use crate::{object_path, term, Ctx};

/// Re-read at least this often even without events.
pub(crate) const RESYNC: Duration = Duration::from_secs(5);

/// Starts following the kind's events (in `project`, when scoped) and
/// waits until the stream is connected, so no change after the first read
/// is missed. A stream that does not connect is not fatal (the resync
/// still re-reads); a refused one is.
pub(crate) fn watch_stream(client: &Client, kind: Kind, project: Option<&str>) -> Result<Follower> {
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
pub(crate) fn next_batch(f: &Follower, timeout: Duration) -> Result<bool> {
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

pub(crate) fn name_of(o: &Value) -> String {
    o.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// What `get -w` watches and how it prints.
pub(crate) struct Watch<'a> {
    pub kind: Kind,
    pub name: Option<&'a str>,
    pub selector: Option<&'a str>,
    pub output: &'a Output,
    pub opts: GetOpts,
    /// `None`: every project (`-A`), or a kind outside projects.
    pub project: Option<String>,
}

/// `get KIND [NAME] -w`: the current objects, then one line (or JSON
/// object) per change until interrupted.
pub(crate) fn get_watch(ctx: &mut Ctx, w: Watch<'_>) -> Result<Exit> {
    let Watch {
        kind,
        name,
        selector,
        output,
        opts,
        project,
    } = w;
    let client = ctx.client()?;
    let follower = watch_stream(&client, kind, project.as_deref())?;
    let read = || -> Result<Vec<Value>> {
        match name {
            Some(n) => Ok(client
                .get_optional(&object_path(kind, project.as_deref(), n))?
                .into_iter()
                .collect()),
            None => client.list(kind, project.as_deref(), selector),
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
    if output.is_table() {
        if !first.is_empty() {
            term::out(&render::get(kind, &first, output, false, &opts, now)?);
        }
    } else {
        for o in &first {
            term::out(&watch_line(kind, o, output, &opts)?);
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
                term::out(&watch_line(kind, &o, output, &opts)?);
            }
            seen.insert(n, o);
        }
        // Deleted: shown once more, as kubectl does.
        for (n, o) in &known {
            if !seen.contains_key(n) {
                term::out(&watch_line(kind, o, output, &opts)?);
            }
        }
        known = seen;
    }
}

/// One object as a watch line: a table row without header, one compact
/// JSON object, a name, or a YAML document.
fn watch_line(kind: Kind, o: &Value, output: &Output, opts: &GetOpts) -> Result<String> {
    Ok(match output {
        Output::Table | Output::Wide | Output::CustomColumns(_) => {
            let rows = GetOpts {
                no_headers: true,
                ..opts.clone()
            };
            render::get(
                kind,
                std::slice::from_ref(o),
                output,
                false,
                &rows,
                Utc::now(),
            )?
        }
        Output::JsonPath(t) => t.render(&render::object(o)),
        Output::Json => format!(
            "{}\n",
            serde_json::to_string(&render::object(o)).expect("JSON serializes")
        ),
        Output::Yaml => format!("---\n{}", render::to_yaml(&render::object(o))),
        Output::Name => format!("{}\n", render::name(kind, o)),
    })
}
