//! The status dashboard: a single-page app served by pamd at `/`, its
//! assets under `/ui/…`, all embedded in the binary (`include_bytes!`), so
//! it works with no network beyond pamd and needs no build chain (plain ES
//! modules and CSS).
//!
//! # Guarantees
//! - Every response carries a strict Content-Security-Policy: scripts,
//!   styles and connections only from pamd itself, no inline code, no
//!   frames, no forms posting elsewhere.
//! - Every asset has a strong ETag (a hash of its bytes); `If-None-Match`
//!   with it answers 304 without a body. Assets are revalidated on every
//!   load (`Cache-Control: no-cache`), so a new pamd never serves a stale UI.
//! - The operator token never travels in a URL: the app keeps it in
//!   `sessionStorage` and sends it as `Authorization: Bearer` (API and SSE
//!   alike, the stream being read with `fetch`, not `EventSource`).
//! - An unknown `/ui/…` path is a JSON 404 like every other API miss.

use std::sync::OnceLock;

use crate::api::extract::Path;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::api::ApiError;

/// The Content-Security-Policy of every dashboard response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
frame-ancestors 'none'";

/// One embedded file.
struct Asset {
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $ct:expr) => {
        Asset {
            path: $path,
            content_type: $ct,
            bytes: include_bytes!(concat!("assets/", $path)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("style.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("sse.js", JS),
    asset!("util.js", JS),
    asset!("pages/projects.js", JS),
    asset!("pages/board.js", JS),
    asset!("pages/runs.js", JS),
    asset!("pages/run.js", JS),
    asset!("pages/diff.js", JS),
    asset!("pages/transcript.js", JS),
    asset!("pages/hosts.js", JS),
    asset!("pages/activity.js", JS),
    asset!("pages/sources.js", JS),
    asset!("pages/automation.js", JS),
    asset!("pages/charts.js", JS),
    asset!("pages/webhooks.js", JS),
    asset!("chart.js", JS),
];

/// `"<sha256 prefix>"` per asset, computed once.
fn etags() -> &'static [String] {
    static ETAGS: OnceLock<Vec<String>> = OnceLock::new();
    ETAGS.get_or_init(|| {
        ASSETS
            .iter()
            .map(|a| format!("\"{}\"", &hex::encode(Sha256::digest(a.bytes))[..20]))
            .collect()
    })
}

/// `GET /`: the app shell.
pub async fn index(headers: HeaderMap) -> Response {
    serve("index.html", &headers).unwrap_or_else(|e| e.into_response())
}

/// `GET /ui/{*path}`: its assets.
pub async fn ui_asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers).unwrap_or_else(|e| e.into_response())
}

fn serve(path: &str, headers: &HeaderMap) -> Result<Response, ApiError> {
    let i = ASSETS
        .iter()
        .position(|a| a.path == path)
        .ok_or_else(|| ApiError::not_found(format!("no dashboard asset {path}")))?;
    let asset = &ASSETS[i];
    let etag = &etags()[i];
    let fresh = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim() == etag || t.trim() == "*");
    let mut resp = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.bytes,
        )
            .into_response()
    };
    let h = resp.headers_mut();
    h.insert(header::ETAG, HeaderValue::from_str(etag).expect("hex etag"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    Ok(resp)
}
