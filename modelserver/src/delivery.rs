//! How an answer goes out: at once, after a hold, or paced event by event.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::response::Response;
use http_body::Frame;
use tokio::sync::mpsc;

use crate::common::{event_text, sse_response, Event, Reply};
use crate::script::Hold;
use crate::state::Held;

/// A held request: where it waits and its side of the hold.
pub(crate) struct Holding {
    pub mode: Hold,
    pub held: Held,
}

pub(crate) async fn deliver(
    reply: Reply,
    holding: Option<Holding>,
    pace: Option<Duration>,
) -> Response {
    let events = match reply {
        Reply::Now(response) => {
            if let Some(holding) = holding {
                holding.held.wait().await;
            }
            return response;
        }
        Reply::Sse(events) => events,
    };
    let after_headers = match holding {
        Some(Holding {
            mode: Hold::BeforeHeaders,
            held,
        }) => {
            held.wait().await;
            None
        }
        Some(Holding {
            mode: Hold::AfterHeaders,
            held,
        }) => Some(held),
        None => None,
    };
    if after_headers.is_none() && pace.is_none() {
        let body: String = events.iter().map(event_text).collect();
        return sse_response(Body::from(body));
    }
    // One chunk in flight at a time, so a paced event really leaves
    // when its turn comes rather than piling up in a buffer.
    let (tx, rx) = mpsc::channel(1);
    tokio::spawn(stream_events(tx, events, after_headers, pace));
    sse_response(Body::new(Chunks { rx }))
}

/// Feeds the response body; stops as soon as the client is gone, which
/// also drops a hold that is still waiting.
async fn stream_events(
    tx: mpsc::Sender<Bytes>,
    events: Vec<Event>,
    held: Option<Held>,
    pace: Option<Duration>,
) {
    if let Some(held) = held {
        tokio::select! {
            () = held.wait() => {}
            () = tx.closed() => return,
        }
    }
    for (i, event) in events.iter().enumerate() {
        if let (true, Some(delay)) = (i > 0, pace) {
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                () = tx.closed() => return,
            }
        }
        if tx.send(Bytes::from(event_text(event))).await.is_err() {
            return;
        }
    }
}

/// A response body fed chunk by chunk from a channel.
struct Chunks {
    rx: mpsc::Receiver<Bytes>,
}

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.rx
            .poll_recv(cx)
            .map(|chunk| chunk.map(|bytes| Ok(Frame::data(bytes))))
    }
}
