//! Events for people: TYPE (the topic), REASON, OBJECT and
//! MESSAGE, as the server renders them (`reason`, `message`, `object` in
//! the event JSON). An older server sends only the payload: its reason is
//! then the topic's last word, its object read from the payload's names and
//! its message the payload's plain fields — still no raw JSON.

use serde_json::Value;

/// The topic collapsed by default: one per output snapshot, seconds apart.
pub const OUTPUT_TOPIC: &str = "run.output_appended";

/// What one event says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventColumns {
    pub topic: String,
    pub reason: String,
    pub object: String,
    pub message: String,
}

fn s<'a>(v: &'a Value, k: &str) -> Option<&'a str> {
    v.get(k).and_then(Value::as_str)
}

/// The event's columns, from the server's rendering or else the payload.
pub fn event_columns(e: &Value) -> EventColumns {
    let topic = s(e, "topic").unwrap_or("-").to_string();
    let p = e.get("payload").unwrap_or(&Value::Null);
    let reason = s(e, "reason")
        .map(str::to_string)
        .unwrap_or_else(|| pam_manifests::event_words::topic_reason(&topic));
    let object = match e.get("object") {
        Some(Value::String(o)) => o.clone(),
        Some(_) => "-".to_string(),
        None => object_of(&topic, p).unwrap_or_else(|| "-".into()),
    };
    let message = s(e, "message")
        .map(str::to_string)
        .unwrap_or_else(|| pam_manifests::event_words::plain_fields(p));
    EventColumns {
        topic,
        reason,
        object,
        message,
    }
}

/// `run/fix-login` from a payload, by the topic's family.
fn object_of(topic: &str, p: &Value) -> Option<String> {
    let (kind, field) = match topic.split('.').next()? {
        "run" if topic == "run.orphan_detected" => ("host", "host"),
        "run" => ("run", "name"),
        "work_item" => ("task", "name"),
        "project" => ("project", "project"),
        "worker" => ("host", "host"),
        "source" => ("source", "source"),
        "schedule" => ("schedule", "schedule"),
        _ => return None,
    };
    s(p, field).map(|n| format!("{kind}/{n}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_servers_words_or_the_payloads() {
        let new = json!({"seq": 3, "topic": "run.failed", "reason": "HostLost",
            "object": "run/r1", "message": "host_lost: host alpha stopped heartbeating",
            "payload": {"name": "r1"}});
        assert_eq!(
            event_columns(&new),
            EventColumns {
                topic: "run.failed".into(),
                reason: "HostLost".into(),
                object: "run/r1".into(),
                message: "host_lost: host alpha stopped heartbeating".into(),
            }
        );
        // An older server: no reason, message or object.
        let old = json!({"seq": 3, "topic": "worker.instance_suspect",
            "payload": {"host": "alpha", "host_id": "h", "nested": {"a": 1}}});
        assert_eq!(
            event_columns(&old),
            EventColumns {
                topic: "worker.instance_suspect".into(),
                reason: "InstanceSuspect".into(),
                object: "host/alpha".into(),
                message: "host=alpha".into(),
            }
        );
    }
}
