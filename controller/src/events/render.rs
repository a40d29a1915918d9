//! How a journaled event is rendered, in one place: the JSON of
//! `GET /api/v1/events`, of a run's timeline and of the SSE stream's `data:`
//! lines, and the SSE frame around it. Each carries the event's `reason`,
//! `message` and `object` ([`super::message`]) next to the
//! payload, which stays as it was journaled.

use bytes::Bytes;
use pam_store::Event;

/// The JSON an event is sent as, on the stream and by `GET /api/v1/events`.
pub fn event_json(e: &Event) -> serde_json::Value {
    let said = super::message::render(&e.topic, &e.payload);
    let mut v = serde_json::json!({
        "seq": e.seq,
        "topic": e.topic,
        "reason": said.reason,
        "message": said.message,
        "object": said.object,
        "payload": e.payload,
        "createdAt": crate::clock::ts(e.created_at),
    });
    // Who asked for it (`{name, role}` of the request's token,
    // journaled in the payload); the loops' own events have none.
    if let Some(actor) = e.payload.get("actor") {
        v["actor"] = actor.clone();
    }
    v
}

/// One SSE frame. Topics are `[a-z_.]` and compact JSON has no raw
/// newline, so neither needs escaping.
pub fn frame(e: &Event) -> Bytes {
    let mut out = Vec::new();
    write_frame(&mut out, e);
    Bytes::from(out)
}

pub(super) fn write_frame(out: &mut Vec<u8>, e: &Event) {
    use std::io::Write;
    let _ = write!(out, "id: {}\nevent: {}\ndata: ", e.seq, e.topic);
    // Writing into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, &event_json(e));
    out.extend_from_slice(b"\n\n");
}
