//! Group commit (issue 33): jobs queued by many requests, written in
//! batches by one writer task at a time — heartbeats
//! ([`super::heartbeats`]) and tokens' uses ([`super::token_uses`]).
//!
//! The first job queued while no writer runs starts one ([`Group::push`]
//! says so); the writer takes a batch after each write
//! ([`Group::next`]) and ends when nothing is queued. [`Writer`] clears
//! the running flag if the writer ends any other way (a panic, the
//! runtime shutting down), dropping what is queued so that no job waits
//! for a writer that will never come.

use std::sync::{Arc, Mutex, MutexGuard};

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
