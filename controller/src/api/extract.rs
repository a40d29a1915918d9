//! The API's own extractors, [`Json`], [`Path`] and [`Query`]: axum's,
//! with every rejection turned into an [`ApiError`], so a malformed body,
//! a wrong content type, a body over the limit, a bad id in a path or a
//! mistyped query parameter answers the one JSON error shape like every
//! other rejection. Every handler uses these, never axum's own.
//!
//! [`Json`] also refuses a NUL (`\0`) in any string of the body, before the
//! body is typed: PostgreSQL text cannot hold one, so it must never get as
//! far as a query (it used to come back as a 500). NUL in a path or query
//! string is refused for every route at once by [`crate::api::guard`].
//!
//! # Caveats
//! The NUL scan looks at the raw JSON text: a NUL in a JSON string can only
//! be written as the escape `\u0000` (a raw control character is a syntax
//! error), so a `\u0000` preceded by an odd number of backslashes is one.
//! Only when it finds one is the body parsed a second time, as a
//! `serde_json::Value`, to name the field.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, OptionalFromRequest, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::Serialize;
use serde_json::Value;

use crate::api::ApiError;

/// The stable error code of a status the framework (or hyper) chose.
pub fn code_for_status(status: StatusCode) -> &'static str {
    match status {
        StatusCode::BAD_REQUEST => "bad_request",
        StatusCode::UNAUTHORIZED => "unauthorized",
        StatusCode::FORBIDDEN => "forbidden",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::CONFLICT => "conflict",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::URI_TOO_LONG => "uri_too_long",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::UNPROCESSABLE_ENTITY => "unprocessable",
        StatusCode::SERVICE_UNAVAILABLE => "not_ready",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    }
}

/// An error with the code of its status.
pub fn status_error(status: StatusCode, message: impl Into<String>) -> ApiError {
    ApiError::new(status, code_for_status(status), message)
}

/// A JSON request body (`Content-Type: application/json`), typed as `T`,
/// with no NUL in any string; a response body too.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(ct) = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn body_error(e: BytesRejection) -> ApiError {
    let status = e.status();
    let message = if status == StatusCode::PAYLOAD_TOO_LARGE {
        "the request body is larger than this route accepts (see docs/api.md, Limits)".to_string()
    } else {
        format!("could not read the request body: {}", e.body_text())
    };
    status_error(status, message)
}

/// axum calls some typing errors syntax errors (400): a body that is
/// well-formed JSON is the caller's types going wrong, 422 `unprocessable`.
fn json_error(e: JsonRejection, bytes: &[u8]) -> ApiError {
    let status = match e.status() {
        StatusCode::BAD_REQUEST if serde_json::from_slice::<IgnoredAny>(bytes).is_ok() => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        s => s,
    };
    status_error(status, e.body_text())
}

async fn json_body<S: Send + Sync, T: DeserializeOwned>(
    req: Request,
    state: &S,
) -> Result<T, ApiError> {
    if !is_json(req.headers()) {
        return Err(status_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "expected a request body with `Content-Type: application/json`",
        ));
    }
    let bytes = Bytes::from_request(req, state).await.map_err(body_error)?;
    if bytes.is_empty() {
        return Err(ApiError::bad_request(
            "the request body is empty, expected a JSON document",
        ));
    }
    check_no_nul(&bytes)?;
    let axum::Json(value) =
        axum::Json::<T>::from_bytes(&bytes).map_err(|e| json_error(e, &bytes))?;
    Ok(value)
}

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        json_body(req, state).await.map(Json)
    }
}

/// An optional body: absent when the request has no `Content-Type` and an
/// empty body; otherwise it must be valid like [`Json`].
impl<T: DeserializeOwned, S: Send + Sync> OptionalFromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Option<Self>, ApiError> {
        if req.headers().get(CONTENT_TYPE).is_none() {
            let bytes = Bytes::from_request(req, state).await.map_err(body_error)?;
            if bytes.is_empty() {
                return Ok(None);
            }
            return Err(status_error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "expected a request body with `Content-Type: application/json`",
            ));
        }
        json_body(req, state).await.map(|v| Some(Json(v)))
    }
}

/// Whether the JSON text has a `\u0000` escape (an odd run of backslashes
/// before the `u`: `\\u0000` is a backslash and the text `u0000`).
fn has_nul_escape(bytes: &[u8]) -> bool {
    const ESC: &[u8] = b"u0000";
    let mut i = 0;
    while let Some(off) = bytes[i..].windows(ESC.len()).position(|w| w == ESC) {
        let at = i + off;
        let slashes = bytes[..at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count();
        if slashes % 2 == 1 {
            return true;
        }
        i = at + 1;
    }
    false
}

/// Refuses a body with a NUL in any string (a key or a value), naming the
/// first field that has one.
pub fn check_no_nul(bytes: &[u8]) -> Result<(), ApiError> {
    if !has_nul_escape(bytes) {
        return Ok(());
    }
    let field = serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| nul_field(&v))
        .unwrap_or_else(|| "the body".to_string());
    Err(ApiError::bad_request(format!(
        "{field}: must not contain NUL (\\u0000) characters"
    )))
}

/// The path (`signals[0].reason`) of the first string with a NUL, walking
/// with an explicit stack (a deep body cannot overflow this walk).
fn nul_field(root: &Value) -> Option<String> {
    let mut stack = vec![(root, String::new())];
    while let Some((v, path)) = stack.pop() {
        let name = |p: &str| {
            if p.is_empty() {
                "the body".to_string()
            } else {
                p.to_string()
            }
        };
        match v {
            Value::String(s) if s.contains('\0') => return Some(name(&path)),
            Value::Array(items) => {
                for (i, c) in items.iter().enumerate().rev() {
                    stack.push((c, format!("{path}[{i}]")));
                }
            }
            Value::Object(map) => {
                for (k, c) in map.iter() {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    if k.contains('\0') {
                        return Some(format!("{} (a key)", p.escape_debug()));
                    }
                    stack.push((c, p));
                }
            }
            _ => {}
        }
    }
    None
}

/// Path parameters, typed as `T` (a non-uuid id is a 400 naming it).
#[derive(Debug)]
pub struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| Path(v))
            .map_err(|e: PathRejection| {
                let status = match e.status() {
                    s if s.is_server_error() => StatusCode::BAD_REQUEST,
                    s => s,
                };
                status_error(status, format!("bad path: {}", e.body_text()))
            })
    }
}

/// Query parameters, typed as `T` (`limit=abc` is a 400 naming `limit`).
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| Query(v))
            .map_err(|e: QueryRejection| status_error(e.status(), e.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nul_escapes_are_found_only_where_they_are_nul() {
        assert!(has_nul_escape(br#"{"a":"x\u0000y"}"#));
        assert!(has_nul_escape(br#"{"a":"\\\u0000"}"#));
        assert!(!has_nul_escape(br#"{"a":"\\u0000"}"#));
        assert!(!has_nul_escape(br#"{"a":"u0000"}"#));
        assert!(!has_nul_escape(br#"{"a":"\u0001"}"#));
    }

    #[test]
    fn the_nul_field_is_named() {
        let e = check_no_nul(br#"{"signals":[{"ok":"a"},{"reason":"a\u0000"}]}"#).unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
        assert!(e.message.starts_with("signals[1].reason:"), "{}", e.message);
        let e = check_no_nul(br#"{"a\u0000":1}"#).unwrap_err();
        assert!(e.message.contains("(a key)"), "{}", e.message);
        assert!(check_no_nul(br#"{"a":"\\u0000"}"#).is_ok());
    }
}
