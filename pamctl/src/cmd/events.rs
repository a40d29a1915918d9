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

/// A project to filter events by: its name and uid. Work item payloads
/// carry `project` (the name), run payloads `project_id` (the uid).
pub(crate) struct ProjectFilter {
    pub name: String,
    pub uid: String,
}

/// Whether an event belongs to the project (always, without a filter).
/// Host events (`worker.*`) belong to no project.
pub(crate) fn in_project(e: &Value, filter: Option<&ProjectFilter>) -> bool {
    let Some(f) = filter else { return true };
    let field = |k: &str| e.pointer(&format!("/payload/{k}")).and_then(Value::as_str);
    field("project") == Some(f.name.as_str())
        || (!f.uid.is_empty() && field("project_id") == Some(f.uid.as_str()))
}

pub(crate) fn events(ctx: &mut Ctx, topic: Option<&str>, follow: bool) -> Result<Exit> {
    let project = ctx.explicit_project().map(str::to_string);
    let client = ctx.client()?;
    let filter = match project {
        None => None,
        Some(name) => {
            let p = client.get(&crate::object_path(
                pam_manifests::Kind::Project,
                None,
                &name,
            ))?;
            let uid = p
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            Some(ProjectFilter { name, uid })
        }
    };
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
            if in_project(e, filter.as_ref()) {
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
        let web = ProjectFilter {
            name: "web".into(),
            uid: "p-1".into(),
        };
        let api = ProjectFilter {
            name: "api".into(),
            uid: "p-2".into(),
        };
        assert!(in_project(&e, Some(&web)));
        assert!(!in_project(&e, Some(&api)));
        assert!(in_project(&e, None));
        let run = json!({"payload": {"run_id": "r", "project_id": "p-2"}});
        assert!(in_project(&run, Some(&api)));
        assert!(!in_project(
            &json!({"payload": {"host": "alpha"}}),
            Some(&api)
        ));
    }
}
