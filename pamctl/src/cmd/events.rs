//! The event journal: `events [--topic T] [--types A,B] [--for KIND/NAME]
//! [-f]`, one tab-separated line per event (`SEQ TIME TYPE REASON OBJECT
//! MESSAGE`, so `-f` output can be grepped), and kubectl's `get events`:
//! a table (`LAST SEEN TYPE REASON OBJECT MESSAGE`), `-o
//! wide|json|yaml|name`, `-w`. Both hide `run.output_appended` (one per
//! output snapshot) unless `--show-output` or a topic filter names it.

use chrono::Utc;
use serde_json::{json, Value};

use crate::cli::{EventFilters, GetArgs};
use crate::client::{query, Client};
use crate::error::{CliError, Exit, Result};
use crate::render::events::{event_columns, OUTPUT_TOPIC};
use crate::render::table::Table;
use crate::render::{self, age, Output};
use crate::stream::{follow, Item};
use crate::{term, Ctx};

const PAGE: usize = 1000;

/// What `get` takes for the events listing.
pub(crate) const NAMES: [&str; 3] = ["events", "event", "ev"];

/// Which events, and how they print.
pub(crate) struct Listing {
    /// Topic names and `x.` prefixes (`--topic`, `--types`); empty: all.
    pub topics: Vec<String>,
    /// `--for KIND/NAME`, as the events' OBJECT reads (`run/fix-login`).
    pub object: Option<String>,
    pub show_output: bool,
    pub follow: bool,
    /// `None`: `pamctl events`' lines.
    pub output: Option<Output>,
    pub no_headers: bool,
    pub project: Option<String>,
    /// `--actor NAME`: the token name the events' `actor` carries.
    pub actor: Option<String>,
}

/// `SEQ  TIME  TYPE  REASON  OBJECT  MESSAGE`, tab-separated, one line.
pub(crate) fn line(e: &Value) -> String {
    let seq = e.get("seq").map(Value::to_string).unwrap_or_default();
    let at = e.get("createdAt").and_then(Value::as_str).unwrap_or("-");
    let s = event_columns(e);
    format!(
        "{seq}\t{at}\t{}\t{}\t{}\t{}",
        s.topic, s.reason, s.object, s.message
    )
}

/// The stream's path for these filters (the server filters: a topic
/// ending in `.` is a prefix, entries are comma-separated; `project`
/// matches the payload's `project` name or `project_id` uid).
pub(crate) fn stream_path(topic: Option<&str>, project: Option<&str>) -> String {
    format!(
        "/api/v1/events/stream{}",
        query(&[("topic", topic), ("project", project)])
    )
}

/// `--for KIND/NAME` as an event's OBJECT (`rn/x` → `run/x`).
fn object_filter(text: &str) -> Result<String> {
    let (k, n) = text
        .split_once('/')
        .filter(|(_, n)| !n.is_empty())
        .ok_or_else(|| CliError::usage(format!("--for {text:?}: expected KIND/NAME")))?;
    let kind = crate::parse_kind(k)?;
    Ok(format!("{}/{n}", kind.as_str().to_ascii_lowercase()))
}

/// The topic entries of `--topic` and `--types a,b`.
fn topics(topic: Option<&str>, types: &[String]) -> Vec<String> {
    topic
        .into_iter()
        .chain(types.iter().map(String::as_str))
        .flat_map(|t| t.split(','))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

impl Listing {
    fn keeps(&self, e: &Value) -> bool {
        let topic = e.get("topic").and_then(Value::as_str).unwrap_or("");
        let output_shown = self.show_output || self.topics.iter().any(|t| t == OUTPUT_TOPIC);
        if topic == OUTPUT_TOPIC && !output_shown {
            return false;
        }
        if let Some(a) = &self.actor {
            if e.pointer("/actor/name").and_then(Value::as_str) != Some(a.as_str()) {
                return false;
            }
        }
        match &self.object {
            Some(o) => event_columns(e).object == *o,
            None => true,
        }
    }

    fn topic_param(&self) -> Option<String> {
        (!self.topics.is_empty()).then(|| self.topics.join(","))
    }
}

/// `pamctl events …`.
pub(crate) fn events(
    ctx: &mut Ctx,
    topic: Option<&str>,
    f: &EventFilters,
    follow_: bool,
) -> Result<Exit> {
    let l = Listing {
        topics: topics(topic, &f.types),
        object: f.for_.as_deref().map(object_filter).transpose()?,
        show_output: f.show_output,
        follow: follow_,
        output: None,
        no_headers: true,
        project: ctx.explicit_project().map(str::to_string),
        actor: f.actor.clone(),
    };
    list(ctx, &l)
}

/// `pamctl get events [--for KIND/NAME] [--types A,B] [-w] [-o …]`.
pub(crate) fn get(ctx: &mut Ctx, a: &GetArgs) -> Result<Exit> {
    if a.args.len() > 1 {
        return Err(CliError::usage(
            "pamctl get events takes no NAME: use --for KIND/NAME",
        ));
    }
    if a.selector.is_some() || a.sort_by.is_some() || a.blocked {
        return Err(CliError::usage(
            "events take no -l, --sort-by or --blocked (filter with --for KIND/NAME or --types)",
        ));
    }
    if !matches!(
        a.output,
        Output::Table | Output::Wide | Output::Json | Output::Yaml | Output::Name
    ) {
        return Err(CliError::usage(
            "events print as table, wide, yaml, json or name",
        ));
    }
    let project = if a.all_projects {
        None
    } else {
        ctx.explicit_project().map(str::to_string)
    };
    let l = Listing {
        topics: topics(None, &a.events.types),
        object: a.events.for_.as_deref().map(object_filter).transpose()?,
        show_output: a.events.show_output,
        follow: a.watch,
        output: Some(a.output.clone()),
        no_headers: a.no_headers,
        project,
        actor: a.events.actor.clone(),
    };
    list(ctx, &l)
}

/// Reads the journal in pages (filtered), prints it, then follows the
/// stream when asked.
fn list(ctx: &mut Ctx, l: &Listing) -> Result<Exit> {
    let client = ctx.client()?;
    let topic = l.topic_param();
    let (found, after) = read_all(&client, l, topic.as_deref())?;
    print_listing(l, &found);
    if !l.follow {
        return Ok(Exit::Ok);
    }
    let follower = follow(
        &client,
        stream_path(topic.as_deref(), l.project.as_deref()),
        Some(after),
    );
    for item in follower.rx {
        match item {
            Item::Event(e) if l.keeps(&e) => print_one(l, &e),
            Item::Event(_) | Item::Connected => {}
            Item::Gap { from, to } => term::note(&format!(
                "note: events {from}..{to} were purged by retention before they could be read"
            )),
            Item::Lost(why) => {
                term::note(&format!("note: event stream lost ({why}); reconnecting"))
            }
            Item::Fatal(e) => return Err(e),
        }
    }
    Ok(Exit::Ok)
}

/// The journal so far (kept events) and the last seq read.
fn read_all(client: &Client, l: &Listing, topic: Option<&str>) -> Result<(Vec<Value>, i64)> {
    let mut after: i64 = 0;
    let mut found = Vec::new();
    loop {
        let path = format!(
            "/api/v1/events{}",
            query(&[
                ("after", Some(&after.to_string())),
                ("topic", topic),
                ("project", l.project.as_deref()),
                ("limit", Some(&PAGE.to_string()))
            ])
        );
        let body = client.get(&path)?;
        let items = body
            .get("items")
            .and_then(Value::as_array)
            .ok_or_else(|| CliError::new(Exit::ServerError, "the events answer has no `items`"))?;
        found.extend(items.iter().filter(|e| l.keeps(e)).cloned());
        let next = body.get("next").and_then(Value::as_i64).unwrap_or(after);
        if next <= after {
            return Ok((found, after));
        }
        after = next;
    }
}

fn table(events: &[&Value], wide: bool) -> Table {
    let now = Utc::now();
    let mut t = if wide {
        Table::new(&["SEQ", "TIME", "TYPE", "REASON", "OBJECT", "MESSAGE"])
    } else {
        Table::new(&["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"])
    };
    for e in events {
        let s = event_columns(e);
        let at = e.get("createdAt").and_then(Value::as_str);
        let mut row = if wide {
            vec![
                e.get("seq").map(Value::to_string).unwrap_or_default(),
                at.unwrap_or("-").to_string(),
            ]
        } else {
            vec![age::since(at, now)]
        };
        row.extend([s.topic, s.reason, s.object, s.message]);
        t.row(row);
    }
    t
}

fn print_listing(l: &Listing, found: &[Value]) {
    match &l.output {
        None => found.iter().for_each(|e| term::outln(&line(e))),
        Some(Output::Json) if !l.follow => term::out(&render::to_json(&json!({ "items": found }))),
        Some(Output::Yaml) if !l.follow => term::out(&render::to_yaml(&json!({ "items": found }))),
        Some(Output::Json | Output::Yaml | Output::Name) => {
            found.iter().for_each(|e| print_one(l, e))
        }
        Some(o) => {
            if found.is_empty() {
                let scope = match &l.project {
                    Some(p) => format!(" in project {p:?}"),
                    None => String::new(),
                };
                term::note(&format!("No events{scope}."));
                return;
            }
            let all: Vec<&Value> = found.iter().collect();
            term::out(&table(&all, *o == Output::Wide).render_rows(!l.no_headers));
        }
    }
}

/// One event as `-w`/`-f` prints it: a line, a table row, one compact JSON
/// object per line, a YAML document, or `event/SEQ`.
fn print_one(l: &Listing, e: &Value) {
    match &l.output {
        None => term::outln(&line(e)),
        Some(Output::Json) => term::outln(&e.to_string()),
        Some(Output::Yaml) => term::out(&format!("---\n{}", render::to_yaml(e))),
        Some(Output::Name) => term::outln(&format!(
            "event/{}",
            e.get("seq").map(Value::to_string).unwrap_or_default()
        )),
        Some(o) => term::out(&table(&[e], *o == Output::Wide).render_rows(false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(topics: &[&str], object: Option<&str>, show_output: bool) -> Listing {
        Listing {
            topics: topics.iter().map(|t| t.to_string()).collect(),
            object: object.map(str::to_string),
            show_output,
            follow: false,
            output: None,
            no_headers: false,
            project: None,
            actor: None,
        }
    }

    #[test]
    fn actor_keeps_the_events_of_one_token() {
        let by = |name: &str| json!({"topic": "run.created", "actor": {"name": name, "role": "operator"}});
        let mut l = listing(&[], None, false);
        l.actor = Some("ci".into());
        assert!(l.keeps(&by("ci")));
        assert!(!l.keeps(&by("cd")));
        assert!(
            !l.keeps(&json!({"topic": "run.created"})),
            "a loop's event has no actor"
        );
    }

    #[test]
    fn one_line_per_event() {
        let e = json!({"seq": 12, "topic": "run.started", "createdAt": "2026-03-01T12:00:00Z",
            "reason": "Started", "object": "run/r1", "message": "run r1 started (attempt 1 of 3)",
            "payload": {"run_id": "r", "attempt": 1, "project": "web"}});
        assert_eq!(
            line(&e),
            "12\t2026-03-01T12:00:00Z\trun.started\tStarted\trun/r1\trun r1 started (attempt 1 of 3)"
        );
        assert_eq!(
            stream_path(Some("run."), Some("web")),
            "/api/v1/events/stream?topic=run.&project=web"
        );
        assert_eq!(stream_path(None, None), "/api/v1/events/stream");
    }

    #[test]
    fn output_is_hidden_unless_asked_and_for_matches_the_object() {
        let out = json!({"topic": "run.output_appended", "object": "run/r1"});
        let started = json!({"topic": "run.started", "object": "run/r1"});
        assert!(!listing(&[], None, false).keeps(&out));
        assert!(!listing(&["run."], None, false).keeps(&out));
        assert!(listing(&[], None, true).keeps(&out));
        assert!(listing(&["run.output_appended"], None, false).keeps(&out));
        assert!(listing(&[], Some("run/r1"), false).keeps(&started));
        assert!(!listing(&[], Some("run/r2"), false).keeps(&started));
        assert_eq!(object_filter("rn/r1").unwrap(), "run/r1");
        assert_eq!(object_filter("hosts/alpha").unwrap(), "host/alpha");
        assert!(object_filter("run").is_err());
        assert!(object_filter("nope/x").is_err());
        assert_eq!(
            topics(Some("run."), &["a,b".into(), " c ".into()]),
            ["run.", "a", "b", "c"]
        );
    }
}
