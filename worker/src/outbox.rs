//! The durable on-disk outbox: signals wait in `<data_dir>/outbox/` until the
//! controller acknowledges them, so a crash or a network cut loses nothing.
//!
//! One file per signal, named `<unix_nanos>-<pid>-<counter>.json` (fixed
//! width), so sorting the names gives creation order: exactly within one
//! process, by wall clock across processes. Each file holds an [`Envelope`].
//!
//! # Guarantees
//!
//! * [`Outbox::append`] returns only after the entry is durable: written to a
//!   hidden temporary file, fsynced, renamed into place, directory fsynced.
//!   A reader never sees a half-written entry.
//! * Any number of writers (wrapper processes, threads) may append while one
//!   shipper (the agent) reads, acks and rejects: writers only create new
//!   names; only the shipper rewrites or removes existing ones.
//!
//! # Caveats
//!
//! * An entry that does not parse (a disk fault, a hand edit) is moved to
//!   `outbox/bad/` with a warning rather than blocking the queue.
//! * Ordering across processes follows the wall clock; the controller orders
//!   progress by `seq` anyway, and one-shot kinds are idempotent.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use pam_manifests::protocol::{Signal, SignalAck, MAX_REJECTIONS};
use serde::{Deserialize, Serialize};

/// Distinguishes entries created by one process within one nanosecond.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The file name of one outbox entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EntryId(String);

impl EntryId {
    /// The file name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What an entry file holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// How many times the controller rejected this signal so far.
    #[serde(default)]
    pub rejections: u32,
    /// The signal.
    pub signal: Signal,
}

/// What [`Outbox::reject`] did with a rejected entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RejectOutcome {
    /// Kept for another try; the count so far.
    Kept(u32),
    /// Rejected [`MAX_REJECTIONS`] times: moved to `outbox/rejected/`.
    Dropped,
}

/// A directory of pending signals.
#[derive(Debug, Clone)]
pub struct Outbox {
    dir: PathBuf,
}

impl Outbox {
    /// Opens (creating if needed) `<data_dir>/outbox/`.
    pub fn open(data_dir: &Path) -> io::Result<Outbox> {
        let dir = data_dir.join("outbox");
        crate::private::dir(&dir)?;
        Ok(Outbox { dir })
    }

    /// The outbox directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Durably appends `signal`; see the module's guarantees.
    pub fn append(&self, signal: &Signal) -> io::Result<EntryId> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{nanos:020}-{:010}-{n:010}.json", std::process::id());
        let envelope = Envelope {
            rejections: 0,
            signal: signal.clone(),
        };
        self.write_atomically(&name, &envelope)?;
        Ok(EntryId(name))
    }

    /// Up to `limit` entries, oldest first. Unparseable entries are moved
    /// to `bad/` and skipped.
    pub fn pending(&self, limit: usize) -> io::Result<Vec<(EntryId, Signal)>> {
        Ok(self
            .pending_envelopes(limit)?
            .into_iter()
            .map(|(id, e)| (id, e.signal))
            .collect())
    }

    /// Like [`Outbox::pending`], with the rejection counts.
    pub fn pending_envelopes(&self, limit: usize) -> io::Result<Vec<(EntryId, Envelope)>> {
        let mut names: Vec<String> = fs::read_dir(&self.dir)?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().map(|t| t.is_file()).unwrap_or(false))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| !n.starts_with('.') && n.ends_with(".json"))
            .collect();
        names.sort();
        let mut out = Vec::new();
        for name in names {
            if out.len() >= limit {
                break;
            }
            let path = self.dir.join(&name);
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                // Acked by someone else between listing and reading.
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            match serde_json::from_slice::<Envelope>(&bytes) {
                Ok(env) => out.push((EntryId(name), env)),
                Err(err) => {
                    tracing::warn!(entry = %name, %err, "corrupt outbox entry, moving it to outbox/bad/");
                    self.move_aside(&name, "bad")?;
                }
            }
        }
        Ok(out)
    }

    /// Deletes acknowledged entries; an already missing one is fine.
    pub fn ack(&self, ids: &[EntryId]) -> io::Result<()> {
        for id in ids {
            match fs::remove_file(self.dir.join(&id.0)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        sync_dir(&self.dir)
    }

    /// Records one rejection of entry `id`: kept with a higher count, or
    /// moved to `outbox/rejected/` once it reaches [`MAX_REJECTIONS`].
    pub fn reject(&self, id: &EntryId, message: &str) -> io::Result<RejectOutcome> {
        let path = self.dir.join(&id.0);
        let mut env: Envelope = match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(io::Error::other)?,
            Err(e) => return Err(e),
        };
        env.rejections += 1;
        if env.rejections >= MAX_REJECTIONS {
            tracing::error!(
                entry = %id.0, run_id = %env.signal.run_id, attempt = env.signal.attempt,
                kind = %env.signal.kind, rejections = env.rejections, message,
                "controller keeps rejecting this signal; moved to outbox/rejected/"
            );
            self.write_atomically(&id.0, &env)?;
            self.move_aside(&id.0, "rejected")?;
            return Ok(RejectOutcome::Dropped);
        }
        tracing::warn!(
            entry = %id.0, run_id = %env.signal.run_id, kind = %env.signal.kind,
            rejections = env.rejections, message, "controller rejected a signal; will retry"
        );
        self.write_atomically(&id.0, &env)?;
        Ok(RejectOutcome::Kept(env.rejections))
    }

    /// Applies the controller's answer to a batch that was built from
    /// `sent` (in order): settled entries are deleted, rejected ones counted,
    /// entries without a result stay. Returns how many were deleted.
    pub fn settle(&self, sent: &[EntryId], ack: &SignalAck) -> io::Result<usize> {
        let mut done = Vec::new();
        for r in &ack.results {
            let Some(id) = sent.get(r.index) else {
                tracing::warn!(
                    index = r.index,
                    "signal ack names an index outside the batch"
                );
                continue;
            };
            if r.outcome.settles() {
                done.push(id.clone());
            } else {
                self.reject(id, r.message.as_deref().unwrap_or(""))?;
            }
        }
        self.ack(&done)?;
        Ok(done.len())
    }

    fn write_atomically(&self, name: &str, envelope: &Envelope) -> io::Result<()> {
        let tmp = self.dir.join(format!(".tmp-{name}"));
        let bytes = serde_json::to_vec(envelope).map_err(io::Error::other)?;
        {
            let mut f = crate::private::file()
                .write(true)
                .create(true)
                .truncate(true)
                .open(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, self.dir.join(name))?;
        sync_dir(&self.dir)
    }

    fn move_aside(&self, name: &str, sub: &str) -> io::Result<()> {
        let dest = self.dir.join(sub);
        crate::private::dir(&dest)?;
        match fs::rename(self.dir.join(name), dest.join(name)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        sync_dir(&self.dir)
    }
}

/// Makes a rename or removal in `dir` durable.
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdir::TestDir;
    use pam_manifests::protocol::{SignalKind, SignalOutcome, SignalResult};
    use uuid::Uuid;

    fn sig(attempt: i32, seq: i64) -> Signal {
        let mut s = Signal::new(
            Uuid::nil(),
            attempt,
            SignalKind::Progress,
            "2025-01-01T00:00:00Z".into(),
        );
        s.seq = Some(seq);
        s
    }

    #[test]
    fn append_pending_ack_in_creation_order() {
        let d = TestDir::new("outbox");
        let ob = Outbox::open(d.path()).unwrap();
        let ids: Vec<_> = (1..=5).map(|i| ob.append(&sig(1, i)).unwrap()).collect();
        let pending = ob.pending(10).unwrap();
        let seqs: Vec<_> = pending.iter().map(|(_, s)| s.seq.unwrap()).collect();
        assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
        assert_eq!(ob.pending(2).unwrap().len(), 2);
        ob.ack(&ids[..3]).unwrap();
        let left: Vec<_> = ob
            .pending(10)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(left, ids[3..].to_vec());
        // Acking twice is harmless.
        ob.ack(&ids[..3]).unwrap();
    }

    #[test]
    fn unacked_entries_survive_reopen() {
        let d = TestDir::new("outbox");
        {
            let ob = Outbox::open(d.path()).unwrap();
            ob.append(&sig(1, 1)).unwrap();
            ob.append(&sig(1, 2)).unwrap();
            // "Crash": dropped without ack.
        }
        let ob = Outbox::open(d.path()).unwrap();
        assert_eq!(ob.pending(10).unwrap().len(), 2);
    }

    #[test]
    fn concurrent_writers_lose_nothing_and_keep_per_writer_order() {
        let d = TestDir::new("outbox");
        let ob = Outbox::open(d.path()).unwrap();
        std::thread::scope(|s| {
            for w in 1..=4 {
                let ob = ob.clone();
                s.spawn(move || {
                    for i in 1..=50 {
                        ob.append(&sig(w, i)).unwrap();
                    }
                });
            }
        });
        let all = ob.pending(usize::MAX).unwrap();
        assert_eq!(all.len(), 200);
        for w in 1..=4 {
            let seqs: Vec<_> = all
                .iter()
                .filter(|(_, s)| s.attempt == w)
                .map(|(_, s)| s.seq.unwrap())
                .collect();
            assert_eq!(
                seqs,
                (1..=50).collect::<Vec<_>>(),
                "writer {w} out of order"
            );
        }
        // No temp files left behind.
        let tmp = fs::read_dir(ob.dir())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count();
        assert_eq!(tmp, 0);
    }

    #[test]
    fn corrupt_entry_is_moved_aside() {
        let d = TestDir::new("outbox");
        let ob = Outbox::open(d.path()).unwrap();
        ob.append(&sig(1, 1)).unwrap();
        fs::write(
            ob.dir()
                .join("00000000000000000000-0000000000-0000000000.json"),
            b"{torn",
        )
        .unwrap();
        let pending = ob.pending(10).unwrap();
        assert_eq!(pending.len(), 1);
        assert!(ob
            .dir()
            .join("bad/00000000000000000000-0000000000-0000000000.json")
            .exists());
    }

    #[test]
    fn settle_deletes_settled_and_counts_rejections_until_dropped() {
        let d = TestDir::new("outbox");
        let ob = Outbox::open(d.path()).unwrap();
        let a = ob.append(&sig(1, 1)).unwrap();
        let b = ob.append(&sig(9, 2)).unwrap();
        let c = ob.append(&sig(1, 3)).unwrap();
        let ack = SignalAck {
            results: vec![
                SignalResult {
                    index: 0,
                    outcome: SignalOutcome::Applied,
                    message: None,
                },
                SignalResult {
                    index: 1,
                    outcome: SignalOutcome::Rejected,
                    message: Some("attempt 9 is ahead of the run's 1".into()),
                },
                // index 2 missing: stays pending.
            ],
        };
        let sent = vec![a, b.clone(), c.clone()];
        assert_eq!(ob.settle(&sent, &ack).unwrap(), 1);
        let left = ob.pending_envelopes(10).unwrap();
        assert_eq!(left.len(), 2);
        assert_eq!(left[0].0, b);
        assert_eq!(left[0].1.rejections, 1);
        for n in 2..MAX_REJECTIONS {
            assert_eq!(
                ob.reject(&b, "still ahead").unwrap(),
                RejectOutcome::Kept(n)
            );
        }
        assert_eq!(
            ob.reject(&b, "still ahead").unwrap(),
            RejectOutcome::Dropped
        );
        let left: Vec<_> = ob
            .pending(10)
            .unwrap()
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        assert_eq!(left, vec![c]);
        assert!(ob.dir().join("rejected").join(b.as_str()).exists());
    }
}
