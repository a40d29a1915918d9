//! What an event says when no one wrote its sentence: pamd's
//! renderer for a topic it does not know, and pamctl for an older server
//! that sends payloads only. One home, so both fall back alike.

use serde_json::Value;

/// A topic's reason: its last word in CamelCase (`worker.instance_suspect`
/// → `InstanceSuspect`).
pub fn topic_reason(topic: &str) -> String {
    camel(topic.rsplit('.').next().unwrap_or(topic))
}

/// `host_lost` → `HostLost`: a snake_case word (or dotted words) as a
/// kubectl-style reason.
pub fn camel(s: &str) -> String {
    s.split(['_', '.'])
        .map(|w| {
            let mut c = w.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// The plain (string, number, boolean) fields of a payload but its uids,
/// `key=value` — never nested JSON.
pub fn plain_fields(p: &Value) -> String {
    let Some(m) = p.as_object() else {
        return String::new();
    };
    m.iter()
        // Uids say nothing to a reader; the names beside them do.
        .filter(|(k, _)| !k.ends_with("_id"))
        .filter_map(|(k, v)| match v {
            Value::String(s) => Some(format!("{k}={s}")),
            Value::Number(n) => Some(format!("{k}={n}")),
            Value::Bool(b) => Some(format!("{k}={b}")),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn reasons_and_plain_fields() {
        assert_eq!(
            super::topic_reason("worker.instance_suspect"),
            "InstanceSuspect"
        );
        assert_eq!(super::topic_reason("run.failed"), "Failed");
        let p = json!({"host": "alpha", "host_id": "h", "n": 2, "ok": true, "nested": {"a": 1}});
        assert_eq!(super::plain_fields(&p), "host=alpha n=2 ok=true");
        assert_eq!(super::plain_fields(&json!([1])), "");
    }
}
