//! Following `GET /api/v1/events/stream` (docs/api.md, "Event stream"):
//! a background thread reads the SSE stream, reconnects with
//! `Last-Event-ID` when the connection drops, and hands what it reads to
//! the caller through a channel, so the caller can wait with a deadline.

use std::io::BufRead;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::client::Client;
use crate::error::CliError;

/// What the follower reports.
#[derive(Debug)]
pub(crate) enum Item {
    /// Connected (or reconnected).
    Connected,
    /// One event: `{"seq","topic","payload","createdAt"}`.
    Event(Value),
    /// The resume position was purged: events `from..=to` are gone.
    Gap { from: i64, to: i64 },
    /// The connection dropped; the follower reconnects (after a pause).
    Lost(String),
    /// The server refused the stream (bad token, unknown project, …):
    /// the follower stopped.
    Fatal(CliError),
}

/// A running follower; dropping it stops it at its next read.
pub(crate) struct Follower {
    pub rx: mpsc::Receiver<Item>,
}

/// Pause before reconnecting.
const RETRY: Duration = Duration::from_secs(1);

/// Follows `path` (e.g. `/api/v1/events/stream?topic=run.`): from `after`
/// when given, else live from the moment of connecting.
pub(crate) fn follow(client: &Client, path: String, after: Option<i64>) -> Follower {
    let (tx, rx) = mpsc::channel();
    let client = client.clone();
    std::thread::spawn(move || {
        let mut last = after;
        loop {
            match client.open_stream(&path, last) {
                Ok(resp) => {
                    let position = resp
                        .headers()
                        .get("x-pam-stream-position")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    // A live start resumes, after a drop, from where it
                    // started.
                    last.get_or_insert(position);
                    if tx.send(Item::Connected).is_err() {
                        return;
                    }
                    let why = match read(resp, &tx, &mut last) {
                        Ok(()) => "the server closed the stream".to_string(),
                        Err(Stop) => return,
                    };
                    if tx.send(Item::Lost(why)).is_err() {
                        return;
                    }
                }
                Err(e) if e.status.is_some_and(|s| (400..500).contains(&s)) => {
                    let _ = tx.send(Item::Fatal(e));
                    return;
                }
                Err(e) => {
                    if tx.send(Item::Lost(e.message)).is_err() {
                        return;
                    }
                }
            }
            std::thread::sleep(RETRY);
        }
    });
    Follower { rx }
}

/// The receiver is gone: stop following.
struct Stop;

/// Reads frames until the stream ends (`Ok`) or nobody listens (`Stop`).
fn read(
    resp: reqwest::blocking::Response,
    tx: &mpsc::Sender<Item>,
    last: &mut Option<i64>,
) -> Result<(), Stop> {
    let reader = std::io::BufReader::new(resp);
    let mut frame = Frame::default();
    for line in reader.lines() {
        let Ok(line) = line else { return Ok(()) };
        if let Some(item) = frame.line(&line) {
            if let Item::Event(e) = &item {
                if let Some(seq) = e.get("seq").and_then(Value::as_i64) {
                    *last = Some(seq);
                }
            }
            tx.send(item).map_err(|_| Stop)?;
        }
    }
    Ok(())
}

/// An SSE frame being read, line by line.
#[derive(Default)]
struct Frame {
    event: Option<String>,
    data: String,
}

impl Frame {
    /// Takes one line; returns an item when a blank line ends a frame.
    fn line(&mut self, line: &str) -> Option<Item> {
        if line.is_empty() {
            let event = self.event.take();
            let data = std::mem::take(&mut self.data);
            if data.is_empty() {
                return None;
            }
            let v: Value = serde_json::from_str(&data).ok()?;
            return Some(match event.as_deref() {
                Some("gap") => Item::Gap {
                    from: v.get("from").and_then(Value::as_i64).unwrap_or(0),
                    to: v.get("to").and_then(Value::as_i64).unwrap_or(0),
                },
                _ => Item::Event(v),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(value);
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_comments_and_gaps() {
        let mut f = Frame::default();
        let mut items = Vec::new();
        for l in [
            ": keep-alive",
            "",
            "event: gap",
            "data: {\"from\": 2, \"to\": 9}",
            "",
            "id: 10",
            "event: run.started",
            "data: {\"seq\":10,\"topic\":\"run.started\",\"payload\":{}}",
            "",
        ] {
            items.extend(f.line(l));
        }
        assert_eq!(items.len(), 2, "{items:?}");
        assert!(matches!(items[0], Item::Gap { from: 2, to: 9 }));
        match &items[1] {
            Item::Event(v) => assert_eq!(v["seq"], 10),
            other => panic!("{other:?}"),
        }
    }
}
