//! The log reads this pamd has in flight to its workers: which host's
//! watch takes them ([`Channels::attach`], by the watch of a worker that
//! serves `log_read`), and where each answer goes (by request id).
//!
//! A read is a [`LogRead`] frame handed to the host's watch; its answer
//! comes back on that watch as a [`LogChunk`] and its bytes, matched by
//! id — and only from the watch of the host it was sent to, so a worker
//! can never answer for another host's run. A read not answered within
//! its timeout, or whose watch ended, fails (and its late answer, if
//! any, is dropped).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use pam_manifests::protocol::{LogChunk, LogFile, LogRead};
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

/// How many reads one watch may have queued to write.
const QUEUE: usize = 16;

/// One answered read.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The file's size when the worker read it.
    pub size: u64,
    /// The attempt is over: the file will not grow.
    pub done: bool,
    pub bytes: Bytes,
}

/// Why a read got no bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadError {
    /// No watch of the host here serves reads.
    NoChannel,
    /// No answer in time.
    Timeout,
    /// The watch ended before the answer came.
    Gone,
    /// The worker's answer: `not_found`, `bad_request` or `io`.
    Worker { code: String, message: String },
}

type Pending = HashMap<Uuid, (Uuid, oneshot::Sender<Result<Reply, ReadError>>)>;

/// The hosts whose watches serve reads, and the reads waiting for their
/// answers.
#[derive(Default)]
pub struct Channels {
    /// Host id → (the watch's registration number, its queue). The latest
    /// watch of a host wins (a reconnect overlapping the old one).
    hosts: Mutex<HashMap<Uuid, (u64, mpsc::Sender<LogRead>)>>,
    pending: Mutex<Pending>,
    next: AtomicU64,
}

/// A watch's hold on its host's reads: dropping it (the watch ended)
/// lets them go, unless a newer watch of the host took them.
pub struct Attached {
    channels: Arc<Channels>,
    host: Uuid,
    number: u64,
}

impl Drop for Attached {
    fn drop(&mut self) {
        let mut hosts = self
            .channels
            .hosts
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if hosts
            .get(&self.host)
            .is_some_and(|(n, _)| *n == self.number)
        {
            hosts.remove(&self.host);
            drop(hosts);
            // Their answers cannot come any more: they fail now (`Gone`),
            // not at their timeout.
            self.channels
                .lock_pending()
                .retain(|_, (h, _)| *h != self.host);
        }
    }
}

impl Channels {
    /// `host`'s watch takes its reads from now on: the frames to write,
    /// and the hold that ends it.
    pub fn attach(self: &Arc<Self>, host: Uuid) -> (mpsc::Receiver<LogRead>, Attached) {
        let (tx, rx) = mpsc::channel(QUEUE);
        let number = self.next.fetch_add(1, Ordering::SeqCst);
        self.hosts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(host, (number, tx));
        let held = Attached {
            channels: self.clone(),
            host,
            number,
        };
        (rx, held)
    }

    /// A watch of `host` here serves reads.
    pub fn serves(&self, host: Uuid) -> bool {
        let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        hosts.get(&host).is_some_and(|(_, tx)| !tx.is_closed())
    }

    /// Asks `host`'s worker for `limit` bytes (at most a chunk) of `file`
    /// at `offset`, waiting at most `timeout` for the answer.
    #[allow(clippy::too_many_arguments)]
    pub async fn read(
        &self,
        host: Uuid,
        run: Uuid,
        attempt: i32,
        file: LogFile,
        offset: u64,
        limit: u64,
        timeout: Duration,
    ) -> Result<Reply, ReadError> {
        let tx = {
            let hosts = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
            hosts.get(&host).map(|(_, tx)| tx.clone())
        }
        .ok_or(ReadError::NoChannel)?;
        let id = Uuid::new_v4();
        let (reply, answer) = oneshot::channel();
        self.lock_pending().insert(id, (host, reply));
        let _forget = Forget(self, id);
        let req = LogRead {
            id,
            run_id: run,
            attempt,
            file,
            offset,
            limit,
        };
        let asked = async {
            tx.send(req).await.map_err(|_| ReadError::Gone)?;
            answer.await.map_err(|_| ReadError::Gone)?
        };
        tokio::time::timeout(timeout, asked)
            .await
            .unwrap_or(Err(ReadError::Timeout))
    }

    /// An answer from `host`'s watch: handed to its read, when that read
    /// was sent to this host and still waits.
    pub fn answered(&self, host: Uuid, chunk: LogChunk, bytes: Bytes) {
        let mut pending = self.lock_pending();
        if pending.get(&chunk.id).is_none_or(|(h, _)| *h != host) {
            return;
        }
        let (_, reply) = pending.remove(&chunk.id).expect("just found");
        let answer = match chunk.error {
            Some(e) => Err(ReadError::Worker {
                code: e.code,
                message: e.message,
            }),
            None => Ok(Reply {
                size: chunk.size,
                done: chunk.done,
                bytes,
            }),
        };
        let _ = reply.send(answer);
    }

    fn lock_pending(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes a read that ended (answered, timed out, dropped) from the
/// pending ones.
struct Forget<'a>(&'a Channels, Uuid);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.lock_pending().remove(&self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(id: Uuid, size: u64) -> LogChunk {
        LogChunk {
            id,
            size,
            done: true,
            len: 0,
            error: None,
        }
    }

    #[tokio::test]
    async fn a_read_is_answered_only_by_its_own_hosts_watch() {
        let ch = Arc::new(Channels::default());
        let (host, other) = (Uuid::new_v4(), Uuid::new_v4());
        assert!(!ch.serves(host));
        let (mut frames, held) = ch.attach(host);
        assert!(ch.serves(host));
        let worker = {
            let ch = ch.clone();
            tokio::spawn(async move {
                let req = frames.recv().await.unwrap();
                assert_eq!((req.offset, req.limit), (5, 3));
                // Another host's answer for the same id is ignored.
                ch.answered(other, chunk(req.id, 99), Bytes::new());
                ch.answered(host, chunk(req.id, 8), Bytes::from_static(b"567"));
                frames
            })
        };
        let r = ch
            .read(
                host,
                Uuid::nil(),
                1,
                LogFile::Log,
                5,
                3,
                Duration::from_secs(5),
            )
            .await
            .unwrap();
        assert_eq!((r.size, r.done, &r.bytes[..]), (8, true, &b"567"[..]));
        let frames = worker.await.unwrap();
        assert!(ch.pending.lock().unwrap().is_empty());
        // No answer: a timeout, nothing left pending.
        let e = ch
            .read(
                host,
                Uuid::nil(),
                1,
                LogFile::Log,
                0,
                1,
                Duration::from_millis(20),
            )
            .await
            .unwrap_err();
        assert_eq!(e, ReadError::Timeout);
        assert!(ch.pending.lock().unwrap().is_empty());
        // The watch ended: no channel.
        drop(held);
        drop(frames);
        let e = ch
            .read(
                host,
                Uuid::nil(),
                1,
                LogFile::Log,
                0,
                1,
                Duration::from_secs(1),
            )
            .await
            .unwrap_err();
        assert_eq!(e, ReadError::NoChannel);
    }
}
