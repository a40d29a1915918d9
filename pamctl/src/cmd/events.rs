//! `events [--topic T] [-p P] [-f]`: the journal, one line per event.

use std::time::Duration;

use serde_json::Value;

use crate::client::query;
use crate::error::{CliError, Exit, Result};
use crate::{term, Ctx};

const PAGE: usize = 500;

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

/// Whether an event belongs to `project` (by its payload's `project`).
pub(crate) fn in_project(e: &Value, project: Option<&str>) -> bool {
    match project {
        None => true,
        Some(p) => e.pointer("/payload/project").and_then(Value::as_str) == Some(p),
    }
}

pub(crate) fn events(ctx: &mut Ctx, topic: Option<&str>, follow: bool) -> Result<Exit> {
    let project = ctx.explicit_project().map(str::to_string);
    let client = ctx.client()?;
    let mut after: i64 = 0;
    loop {
        let path = format!(
            "/api/v1/events{}",
            query(&[
                ("after", Some(&after.to_string())),
                ("topic", topic),
                ("limit", Some(&PAGE.to_string()))
            ])
        );
        let body = client.get(&path)?;
        let items = body
            .get("items")
            .and_then(Value::as_array)
            .ok_or_else(|| CliError::new(Exit::ServerError, "the events answer has no `items`"))?;
        for e in items {
            if let Some(seq) = e.get("seq").and_then(Value::as_i64) {
                after = after.max(seq);
            }
            if in_project(e, project.as_deref()) {
                term::outln(&line(e));
            }
        }
        if items.len() < PAGE {
            if !follow {
                return Ok(Exit::Ok);
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
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
        assert!(in_project(&e, Some("web")));
        assert!(!in_project(&e, Some("api")));
        assert!(in_project(&e, None));
    }
}
