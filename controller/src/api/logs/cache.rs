//! pamd's memory of finished attempts' files (`[logs] cache_bytes`): an
//! LRU of whole chunks, which never change once the attempt is over, so
//! a log read again (the dashboard, a second `pamctl logs`) costs no
//! round trip to the worker. Bounded by bytes: a chunk that would take it
//! over the budget evicts the least recently used ones first; one bigger
//! than the budget is not kept. A running attempt's chunks are never
//! kept (they may still grow).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use bytes::Bytes;
use pam_manifests::protocol::LogFile;
use uuid::Uuid;

/// One file of one attempt.
pub type FileKey = (Uuid, i32, LogFile);

/// Most finished files whose size is remembered.
const SIZES: usize = 100_000;

/// The cache (see the module doc).
pub struct ChunkCache {
    budget: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    used: usize,
    tick: u64,
    /// (file, chunk index) → (last use, bytes).
    chunks: HashMap<(FileKey, u64), (u64, Bytes)>,
    /// Last use → (file, chunk index): the eviction order.
    order: BTreeMap<u64, (FileKey, u64)>,
    /// Finished files' sizes.
    sizes: HashMap<FileKey, u64>,
}

impl ChunkCache {
    pub fn new(budget: usize) -> ChunkCache {
        ChunkCache {
            budget,
            inner: Mutex::default(),
        }
    }

    /// The bytes held now.
    pub fn used(&self) -> usize {
        self.lock().used
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Chunk `index` of `file`, when held (it becomes the most recent).
    pub fn get(&self, file: FileKey, index: u64) -> Option<Bytes> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let (at, bytes) = inner.chunks.get_mut(&(file, index))?;
        let old = std::mem::replace(at, tick);
        let bytes = bytes.clone();
        inner.order.remove(&old);
        inner.order.insert(tick, (file, index));
        Some(bytes)
    }

    /// Keeps chunk `index` of a finished `file`, evicting the least
    /// recently used chunks as needed.
    pub fn put(&self, file: FileKey, index: u64, bytes: Bytes) {
        if bytes.len() > self.budget {
            return;
        }
        let mut inner = self.lock();
        if inner.chunks.contains_key(&(file, index)) {
            return;
        }
        while inner.used + bytes.len() > self.budget {
            let Some((_, oldest)) = inner.order.pop_first() else {
                break;
            };
            if let Some((_, b)) = inner.chunks.remove(&oldest) {
                inner.used -= b.len();
            }
        }
        inner.tick += 1;
        let tick = inner.tick;
        inner.used += bytes.len();
        inner.order.insert(tick, (file, index));
        inner.chunks.insert((file, index), (tick, bytes));
    }

    /// A finished file's size, when known.
    pub fn size(&self, file: FileKey) -> Option<u64> {
        self.lock().sizes.get(&file).copied()
    }

    /// Remembers a finished file's size.
    pub fn set_size(&self, file: FileKey, size: u64) {
        let mut inner = self.lock();
        if inner.sizes.len() >= SIZES {
            inner.sizes.clear();
        }
        inner.sizes.insert(file, size);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u128) -> FileKey {
        (Uuid::from_u128(n), 1, LogFile::Log)
    }

    #[test]
    fn the_budget_holds_and_the_least_recently_used_goes_first() {
        let c = ChunkCache::new(10);
        let four = || Bytes::from_static(b"abcd");
        c.put(key(1), 0, four());
        c.put(key(1), 1, four());
        assert_eq!(c.used(), 8);
        // Chunk 0 used again: chunk 1 is now the oldest.
        assert!(c.get(key(1), 0).is_some());
        c.put(key(2), 0, four());
        assert!(c.used() <= 10, "{}", c.used());
        assert!(c.get(key(1), 1).is_none());
        assert!(c.get(key(1), 0).is_some());
        assert!(c.get(key(2), 0).is_some());
        // Bigger than the whole budget: not kept, nothing evicted.
        c.put(key(3), 0, Bytes::from(vec![0; 11]));
        assert!(c.get(key(3), 0).is_none());
        assert_eq!(c.used(), 8);
        // Many more puts never exceed it.
        for i in 0..1000 {
            c.put(key(10 + i), 0, Bytes::from(vec![1; (i % 7) as usize + 1]));
            assert!(c.used() <= 10);
        }
        c.set_size(key(1), 42);
        assert_eq!(c.size(key(1)), Some(42));
        assert_eq!(c.size(key(2)), None);
    }
}
