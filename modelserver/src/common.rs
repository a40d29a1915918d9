//! Pieces every API module needs: SSE bodies, ids, JSON walking.

use axum::body::Body;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// One server-sent event; `event: None` writes a data-only event (Gemini).
pub(crate) struct Event {
    pub name: Option<&'static str>,
    pub data: Value,
}

impl Event {
    pub fn named(name: &'static str, data: Value) -> Self {
        Self {
            name: Some(name),
            data,
        }
    }

    pub fn data(data: Value) -> Self {
        Self { name: None, data }
    }
}

/// What a handler answers: a finished response, or SSE events that
/// [`crate::delivery`] writes at once, paced or after a hold.
pub(crate) enum Reply {
    Now(Response),
    Sse(Vec<Event>),
}

impl From<Response> for Reply {
    fn from(response: Response) -> Self {
        Self::Now(response)
    }
}

pub(crate) fn sse(events: Vec<Event>) -> Reply {
    Reply::Sse(events)
}

/// One event in its wire form, blank line included.
pub(crate) fn event_text(event: &Event) -> String {
    let mut text = String::new();
    if let Some(name) = event.name {
        text.push_str("event: ");
        text.push_str(name);
        text.push('\n');
    }
    text.push_str("data: ");
    text.push_str(&event.data.to_string());
    text.push_str("\n\n");
    text
}

/// A `200` event stream with `body`.
pub(crate) fn sse_response(body: Body) -> Response {
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub(crate) fn json_response(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

/// An id in the style of the API's own (`msg_…`, `toolu_…`, `call_…`).
pub(crate) fn id(prefix: &str) -> String {
    format!("{prefix}{}", uuid::Uuid::new_v4().simple())
}

pub(crate) fn any_string(value: &Value, pred: &dyn Fn(&str) -> bool) -> bool {
    match value {
        Value::String(s) => pred(s),
        Value::Array(items) => items.iter().any(|v| any_string(v, pred)),
        Value::Object(map) => map.values().any(|v| any_string(v, pred)),
        _ => false,
    }
}

/// The first string in `value` for which `find` returns something.
pub(crate) fn find_in_strings<T>(value: &Value, find: &dyn Fn(&str) -> Option<T>) -> Option<T> {
    match value {
        Value::String(s) => find(s),
        Value::Array(items) => items.iter().find_map(|v| find_in_strings(v, find)),
        Value::Object(map) => map.values().find_map(|v| find_in_strings(v, find)),
        _ => None,
    }
}

/// The text on the line after `marker`, up to the end of that line; used to
/// read the working directory each CLI states in its prompt.
pub(crate) fn text_after(haystack: &str, marker: &str, end: &str) -> Option<String> {
    let start = haystack.find(marker)? + marker.len();
    let rest = &haystack[start..];
    let value = rest.split(end).next()?.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// Makes `path` absolute against the CLI's working directory when the
/// request told us one; file tools of all three CLIs want absolute paths.
pub(crate) fn resolve_path(path: &str, cwd: Option<&str>) -> String {
    match cwd {
        Some(cwd) if !path.starts_with('/') => {
            format!("{}/{}", cwd.trim_end_matches('/'), path)
        }
        _ => path.to_owned(),
    }
}

/// A rough token count (4 bytes a token) for count-tokens endpoints, which
/// the CLIs use only for context-size estimates.
pub(crate) fn approx_tokens(value: &Value) -> u64 {
    (value.to_string().len() as u64).div_ceil(4)
}

/// A value that satisfies a JSON schema (OpenAPI or JSON Schema flavour),
/// so a side request that demands structured output gets parseable JSON.
pub(crate) fn sample_for_schema(schema: &Value, text: &str) -> Value {
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("object")
        .to_ascii_lowercase();
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    match kind.as_str() {
        "object" => {
            let mut out = serde_json::Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    out.insert(name.clone(), sample_for_schema(sub, text));
                }
            }
            Value::Object(out)
        }
        "array" => match schema.get("items") {
            Some(items) => json!([sample_for_schema(items, text)]),
            None => json!([]),
        },
        "integer" | "number" => schema.get("minimum").cloned().unwrap_or(json!(1)),
        "boolean" => json!(false),
        _ => json!(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_sample_fills_required_fields() {
        let schema = json!({
            "type": "OBJECT",
            "properties": {
                "complexity_reasoning": {"type": "STRING"},
                "complexity_score": {"type": "INTEGER"},
                "next_speaker": {"type": "string", "enum": ["user", "model"]}
            }
        });
        let v = sample_for_schema(&schema, "why");
        assert_eq!(v["complexity_reasoning"], "why");
        assert_eq!(v["complexity_score"], 1);
        assert_eq!(v["next_speaker"], "user");
    }

    #[test]
    fn relative_paths_join_the_working_directory() {
        assert_eq!(resolve_path("a/b.txt", Some("/tmp/w/")), "/tmp/w/a/b.txt");
        assert_eq!(resolve_path("/abs", Some("/tmp/w")), "/abs");
        assert_eq!(resolve_path("rel", None), "rel");
    }
}
