//! `events [--topic T] [-p P] [-f]`: the journal, one line per event;
//! `-f` then follows the event stream (SSE, resuming on reconnect).

use serde_json::Value;

use crate::client::query;
use crate::error::{CliError, Exit, Result};
use crate::stream::{follow, Item};
use crate::{term, Ctx};

const PAGE: usize = 1000;

/// `SEQ  TIME  TOPIC  PAYLOAD` — one line, so `-f` output can be grepped.
pub(crate) fn line(e: &Value) -> String {
    let seq = e.get("seq").map(Value::to_string).unwrap_or_default();
    let at = e.get("createdAt").and_then(Value::as_str).unwrap_or("-");
    let topic = e.get("topic").and_then(Value::as_str).unwrap_or("-");
    let payload = e
        .get("payload")
        .map(Value::to_string)
        .unwrap_or_else(|| "{}".into());
    format!("{seq}\t{at}\t{topic}\t{payload}")
}

/// The stream's path for these filters (the server filters: a topic
/// ending in `.` is a prefix; `project` matches the payload's `project`
/// name or `project_id` uid).
pub(crate) fn stream_path(topic: Option<&str>, project: Option<&str>) -> String {
    format!(
        "/api/v1/events/stream{}",
        query(&[("topic", topic), ("project", project)])
    )
}

pub(crate) fn events(ctx: &mut Ctx, topic: Option<&str>, follow_: bool) -> Result<Exit> {
    let project = ctx.explicit_project().map(str::to_string);
    let client = ctx.client()?;
    let mut after: i64 = 0;
    // The journal so far, in pages.
    loop {
        let path = format!(
            "/api/v1/events{}",
            query(&[
                ("after", Some(&after.to_string())),
                ("topic", topic),
                ("project", project.as_deref()),
                ("limit", Some(&PAGE.to_string()))
            ])
        );
        let body = client.get(&path)?;
        let items = body
            .get("items")
            .and_then(Value::as_array)
            .ok_or_else(|| CliError::new(Exit::ServerError, "the events answer has no `items`"))?;
        for e in items {
            term::outln(&line(e));
        }
        let next = body.get("next").and_then(Value::as_i64).unwrap_or(after);
        if next <= after {
            break;
        }
        after = next;
    }
    if !follow_ {
        return Ok(Exit::Ok);
    }
    let follower = follow(&client, stream_path(topic, project.as_deref()), Some(after));
    for item in follower.rx {
        match item {
            Item::Event(e) => term::outln(&line(&e)),
            Item::Gap { from, to } => term::note(&format!(
                "note: events {from}..{to} were purged by retention before they could be read"
            )),
            Item::Lost(why) => {
                term::note(&format!("note: event stream lost ({why}); reconnecting"))
            }
            Item::Connected => {}
            Item::Fatal(e) => return Err(e),
        }
    }
    Ok(Exit::Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn one_line_per_event() {
        let e = json!({"seq": 12, "topic": "run.started", "createdAt": "2026-03-01T12:00:00Z",
            "payload": {"run_id": "r", "attempt": 1, "project": "web"}});
        assert_eq!(
            line(&e),
            "12\t2026-03-01T12:00:00Z\trun.started\t{\"attempt\":1,\"project\":\"web\",\"run_id\":\"r\"}"
        );
        assert_eq!(
            stream_path(Some("run."), Some("web")),
            "/api/v1/events/stream?topic=run.&project=web"
        );
        assert_eq!(stream_path(None, None), "/api/v1/events/stream");
    }
}
