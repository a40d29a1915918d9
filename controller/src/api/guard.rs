//! The two layers around the whole router that keep every rejection in the
//! one JSON error shape (`{"error": {"code", "message"}}`):
//!
//! - [`check_uri`] refuses, before any route runs, a path or query with a
//!   NUL (`%00`: PostgreSQL text cannot hold one) and a path over
//!   [`PATH_MAX_BYTES`];
//! - [`json_errors`] turns any 4xx/5xx answer that is not JSON (something
//!   a layer or the framework answered by itself) into the JSON shape,
//!   keeping its status.
//!
//! # Caveats
//! hyper answers a request line or header section it will not read (URI
//! over 64 KiB → 414, headers over its buffer → 431) before the router
//! sees the request, with an empty body: those two cannot be JSON
//! (docs/api.md, "Errors").

use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::extract::status_error;
use crate::api::ApiError;

/// Bytes in a request path (8 KiB). Names are at most 63 bytes, so a
/// longer path can only be a mistake or an attack.
pub const PATH_MAX_BYTES: usize = 8 << 10;

/// Bytes of a non-JSON error body kept as the JSON error's message.
const MESSAGE_MAX_BYTES: usize = 1024;

/// Refuses a NUL in the path or query, and an overlong path.
pub async fn check_uri(req: Request, next: Next) -> Response {
    let uri = req.uri();
    if uri.path().len() > PATH_MAX_BYTES {
        return status_error(
            StatusCode::URI_TOO_LONG,
            format!(
                "the request path is {} bytes, expected at most {PATH_MAX_BYTES}",
                uri.path().len()
            ),
        )
        .into_response();
    }
    // A NUL can only reach a URI percent-encoded: `%00` (never the escape
    // of a literal `%`, which is `%25`).
    if uri.path().contains("%00") {
        return ApiError::bad_request(
            "the request path contains a NUL (%00), expected names and ids without one",
        )
        .into_response();
    }
    if uri.query().is_some_and(|q| q.contains("%00")) {
        return ApiError::bad_request(
            "the query string contains a NUL (%00), expected parameters without one",
        )
        .into_response();
    }
    next.run(req).await
}

fn is_json(r: &Response) -> bool {
    r.headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/json"))
}

/// Rewrites a non-JSON error answer into the JSON shape, with its status,
/// its text (bounded) as the message and the code of the status.
pub async fn json_errors(req: Request, next: Next) -> Response {
    let res = next.run(req).await;
    let status = res.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(&res) {
        return res;
    }
    let (parts, body) = res.into_parts();
    let text = match axum::body::to_bytes(body, MESSAGE_MAX_BYTES).await {
        Ok(b) => String::from_utf8_lossy(&b).trim().to_string(),
        Err(_) => String::new(),
    };
    // A 5xx leaks nothing (as ApiError::internal).
    let message = if status.is_server_error() {
        "internal error (see the pamd log)".to_string()
    } else if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_string()
    } else {
        text
    };
    let mut out = status_error(status, message).into_response();
    // Keep what the original answer said besides its body (Allow,
    // WWW-Authenticate, Retry-After …).
    for (name, value) in parts.headers.iter() {
        if name != CONTENT_TYPE && name != axum::http::header::CONTENT_LENGTH {
            out.headers_mut().insert(name.clone(), value.clone());
        }
    }
    out
}
