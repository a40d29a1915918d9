//! What a streamed response carries ([`Chunks`]: the event stream's
//! subscriber, a worker's watch) and its plain form, Server-Sent Events;
//! [`crate::api::upgraded`] serves the same on an upgraded connection.

use std::convert::Infallible;

use axum::body::Body;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

/// What an SSE response streams: body chunks until `None` (the event
/// stream's [`Subscriber`], a worker's watch).
pub(super) trait Chunks: Send + 'static {
    fn chunk(&mut self) -> impl std::future::Future<Output = Option<Bytes>> + Send;

    /// The longest line the client may write on an upgraded connection;
    /// 0 (the event streams): it writes nothing, and a byte ends the
    /// stream.
    fn max_line(&self) -> usize {
        0
    }

    /// A line the client wrote on an upgraded connection (without its
    /// `\n`): true when taken (what answers it comes as a chunk); false
    /// ends the stream.
    fn line(&mut self, line: &[u8]) -> bool {
        let _ = line;
        false
    }

    /// After a line [`Chunks::line`] took: how many raw bytes follow it
    /// on the connection (0: none), handed whole to [`Chunks::payload`]
    /// (a worker's log chunk). More than [`crate::api::upgraded::MAX_PAYLOAD`] ends the
    /// stream.
    fn payload_len(&mut self) -> usize {
        0
    }

    /// The raw bytes that followed a line ([`Chunks::payload_len`]).
    fn payload(&mut self, bytes: Bytes) {
        let _ = bytes;
    }
}

/// A `200 text/event-stream` response of `chunks`, unbuffered by proxies.
pub(super) fn sse_response(chunks: impl Chunks) -> Response {
    let body = futures_util::stream::unfold(chunks, |mut s| async move {
        s.chunk().await.map(|b| (Ok::<_, Infallible>(b), s))
    });
    let mut resp = Body::from_stream(body).into_response();
    *resp.status_mut() = StatusCode::OK;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}
