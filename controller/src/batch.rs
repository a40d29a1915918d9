//! Group commit: jobs queued by many requests, written in batches by one
//! writer task at a time — heartbeats ([`crate::fleet`]) and tokens' uses
//! (`api::token_uses`) — and gathered reads ([`read`]): bearer tokens, the
//! hosts of opening watches.
//!
//! The first job queued while no writer runs starts one ([`Group::push`]
//! says so); the writer takes a batch after each write
//! ([`Group::next`]) and ends when nothing is queued. [`Writer`] clears
//! the running flag if the writer ends any other way (a panic, the
//! runtime shutting down), dropping what is queued so that no job waits
//! for a writer that will never come.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tracing::Instrument;

/// The answer of a job whose writer ended without answering it (a panic,
/// the runtime shutting down): the caller sends it again.
#[derive(Debug, Clone, Copy)]
pub struct Dropped;

/// The queue of one kind of job.
pub struct Group<J> {
    queue: Mutex<Queue<J>>,
}

struct Queue<J> {
    jobs: Vec<J>,
    /// A writer task is running: it takes what is queued.
    writing: bool,
}

impl<J> Default for Group<J> {
    fn default() -> Self {
        Group {
            queue: Mutex::new(Queue {
                jobs: Vec::new(),
                writing: false,
            }),
        }
    }
}

impl<J> Group<J> {
    fn lock(&self) -> MutexGuard<'_, Queue<J>> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues `job`; true when no writer runs and the caller must start
    /// one (with a [`Writer`]).
    pub fn push(&self, job: J) -> bool {
        let mut q = self.lock();
        q.jobs.push(job);
        !std::mem::replace(&mut q.writing, true)
    }

    /// The writer's next batch, as `take` picks it from what is queued
    /// (what it leaves waits for the next one); `None` when nothing is
    /// queued, which ends the writer (`writer` disarmed under the lock: a
    /// job queued after it starts another).
    pub fn next(
        &self,
        writer: &mut Writer<J>,
        take: impl FnOnce(&mut Vec<J>) -> Vec<J>,
    ) -> Option<Vec<J>> {
        let mut q = self.lock();
        if q.jobs.is_empty() {
            q.writing = false;
            writer.armed = false;
            return None;
        }
        Some(take(&mut q.jobs))
    }
}

/// Held by the running writer: ends it cleanly however the task ends.
pub struct Writer<J> {
    group: Arc<Group<J>>,
    armed: bool,
}

impl<J> Writer<J> {
    pub fn new(group: Arc<Group<J>>) -> Writer<J> {
        Writer { group, armed: true }
    }
}

impl<J> Drop for Writer<J> {
    fn drop(&mut self) {
        if self.armed {
            let mut q = self.group.lock();
            q.writing = false;
            q.jobs.clear();
        }
    }
}

/// Takes every queued job.
pub fn all<J>(jobs: &mut Vec<J>) -> Vec<J> {
    std::mem::take(jobs)
}

/// Most keys one gathered read asks for.
const MAX_READ: usize = 1024;

/// A read waiting in a [`Reads`] group: its key, and where its answer
/// goes.
pub struct ReadJob<K, V, E> {
    key: K,
    reply: oneshot::Sender<Result<Option<V>, E>>,
}

/// The reads of one kind waiting to be made together.
pub type Reads<K, V, E> = Group<ReadJob<K, V, E>>;

/// The value of `key`, read with the other reads of `group` waiting.
/// The first read to arrive while none is being made starts a
/// reader task, which asks `read_many` for every distinct key waiting (up
/// to [`MAX_READ`]) at once, then for those that came meanwhile, until
/// none wait. Unlike a heartbeat's batch the reader starts at once: an
/// idle pamd adds no wait to a request, and a burst (10,000 watches
/// opening when pamd restarts) costs one statement per batch instead of
/// one per request, so the requests are answered, and their connections'
/// buffers freed, sooner (docs/benchmarks.md, "One connection per
/// worker"). `read_many` answers with what it found, by key; a key it
/// left out is `None`. It is called by the reader the first read started
/// (a later read's `read_many` is dropped unused: they must all read
/// alike).
pub async fn read<K, V, E, F, Fut>(
    group: &Arc<Reads<K, V, E>>,
    key: K,
    read_many: F,
) -> Result<Option<V>, E>
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
    E: Clone + Send + From<Dropped> + 'static,
    F: Fn(Vec<K>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<HashMap<K, V>, E>> + Send + 'static,
{
    let (reply, answer) = oneshot::channel();
    if group.push(ReadJob { key, reply }) {
        // Its own task: a request whose client went away does not take
        // the others' read with it.
        tokio::spawn(reader(group.clone(), read_many).in_current_span());
    }
    answer.await.unwrap_or_else(|_| Err(Dropped.into()))
}

async fn reader<K, V, E, F, Fut>(group: Arc<Reads<K, V, E>>, read_many: F)
where
    K: Eq + Hash + Clone + Send + 'static,
    V: Clone + Send + 'static,
    E: Clone + Send + 'static,
    F: Fn(Vec<K>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<HashMap<K, V>, E>> + Send + 'static,
{
    let mut writer = Writer::new(group.clone());
    let take = |jobs: &mut Vec<ReadJob<K, V, E>>| {
        let n = jobs.len().min(MAX_READ);
        jobs.drain(..n).collect::<Vec<_>>()
    };
    while let Some(batch) = group.next(&mut writer, take) {
        let keys: HashSet<&K> = batch.iter().map(|j| &j.key).collect();
        let keys: Vec<K> = keys.into_iter().cloned().collect();
        match read_many(keys).await {
            Ok(found) => {
                for job in batch {
                    let _ = job.reply.send(Ok(found.get(&job.key).cloned()));
                }
            }
            Err(e) => {
                for job in batch {
                    let _ = job.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A read's failure in these tests.
    #[derive(Debug, Clone)]
    struct Failed(String);

    impl From<Dropped> for Failed {
        fn from(_: Dropped) -> Self {
            Failed("dropped".into())
        }
    }

    type TestReads = Reads<u32, u32, Failed>;

    /// Reads of 0..n, each answered with its double; odd keys missing.
    async fn burst(group: &Arc<TestReads>, calls: &Arc<AtomicUsize>, n: u32) -> Vec<Option<u32>> {
        let reads = (0..n).map(|k| {
            let calls = calls.clone();
            read(group, k, move |keys: Vec<u32>| {
                calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                    Ok(keys
                        .into_iter()
                        .filter(|k| k.is_multiple_of(2))
                        .map(|k| (k, k * 2))
                        .collect())
                }
            })
        });
        futures_util::future::join_all(reads)
            .await
            .into_iter()
            .map(|r| r.expect("read"))
            .collect()
    }

    #[tokio::test]
    async fn reads_waiting_together_are_made_together() {
        let group: Arc<TestReads> = Default::default();
        let calls = Arc::new(AtomicUsize::new(0));
        let got = burst(&group, &calls, 3000).await;
        for (k, v) in got.iter().enumerate() {
            let k = k as u32;
            assert_eq!(*v, k.is_multiple_of(2).then_some(k * 2), "key {k}");
        }
        // 3,000 reads queued before the reader ran: batches of MAX_READ.
        assert_eq!(calls.load(Ordering::SeqCst), 3000usize.div_ceil(MAX_READ));
        // The reader ended with the queue; the next read starts another.
        let got = burst(&group, &calls, 1).await;
        assert_eq!(got, [Some(0)]);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            3000usize.div_ceil(MAX_READ) + 1
        );
    }

    #[tokio::test]
    async fn a_failed_read_is_every_waiting_reads_answer() {
        let group: Arc<TestReads> = Default::default();
        let reads = (0..10).map(|k| {
            read(&group, k, |_keys: Vec<u32>| async {
                Err::<HashMap<u32, u32>, _>(Failed("database down".into()))
            })
        });
        for r in futures_util::future::join_all(reads).await {
            assert_eq!(r.unwrap_err().0, "database down");
        }
        // Nothing left waiting: a later read is made.
        let ok = read(&group, 4, |keys: Vec<u32>| async move {
            Ok(keys.into_iter().map(|k| (k, k)).collect())
        })
        .await
        .unwrap();
        assert_eq!(ok, Some(4));
    }
}
