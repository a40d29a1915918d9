//! Watching a directory Source: the `notify` crate (inotify on
//! Linux) reports changes in the directory tree; the sync loop syncs once
//! the tree has been still for [`DEBOUNCE`] (an editor writing a file in
//! several steps is synced once). The interval's full resync stays the
//! safety net for events a watcher can miss (a queue overflow, a network
//! filesystem).
//!
//! When a watcher cannot start (the directory is missing, the inotify
//! watch limit is reached) the directory is polled instead — a cheap
//! fingerprint of every entry's path, size and mtime every
//! [`POLL_EVERY`], the walk bounded by [`fetch::MAX_ENTRIES`] — and
//! starting a watcher is retried every [`RETRY`].

use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::Notify;

use super::fetch;

/// How long a watched directory must be still before it is synced, when
/// the last change may be a write still under way (data written to a file
/// still open).
pub const DEBOUNCE: Duration = Duration::from_millis(200);
/// How long it must be still when the last change completed a file (the
/// writer closed it, or renamed a whole file in): long enough to gather a
/// burst of such changes (a checkout, a copy of several files) into one
/// sync, short enough that one file's change is applied at once (a one-file
/// change within 2× a `pamctl apply` of it).
pub const SETTLE: Duration = Duration::from_millis(20);
/// How often a polled directory tries to get a watcher again.
pub const RETRY: Duration = Duration::from_secs(10);
/// How often a polled directory is walked (not every pass of the loop:
/// a walk costs a stat per entry). A walk that hits
/// [`fetch::MAX_ENTRIES`] stops there, and the next waits [`RETRY`]
/// (a Source on a huge tree must not keep a core busy; its sync
/// reports the bound).
pub const POLL_EVERY: Duration = Duration::from_secs(1);

/// What the watcher's thread and the loop share.
struct Changes {
    /// Bumped on every relevant change.
    count: AtomicU64,
    /// The last change completed a file (closed after writing, renamed
    /// in, removed): [`SETTLE`] applies, not [`DEBOUNCE`].
    complete: AtomicBool,
    /// When the last change was seen.
    last: Mutex<Instant>,
    /// The watcher lost its directory (removed or an error): fall back to
    /// polling and try again.
    broken: AtomicBool,
}

impl Changes {
    fn bump(&self) {
        self.bump_as(false);
    }

    fn bump_as(&self, complete: bool) {
        *self.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.complete.store(complete, Ordering::SeqCst);
        self.count.fetch_add(1, Ordering::SeqCst);
    }

    /// How long the tree must be still after the last change.
    fn quiet(&self) -> Duration {
        if self.complete.load(Ordering::SeqCst) {
            SETTLE
        } else {
            DEBOUNCE
        }
    }
}

enum Mode {
    /// Kept alive for its events; dropping it stops the watch.
    Notify(#[allow(dead_code)] RecommendedWatcher),
    Poll {
        fingerprint: u64,
        retry_at: Instant,
        /// When the directory is walked next.
        poll_at: Instant,
    },
}

/// One watched directory.
pub struct DirWatch {
    root: PathBuf,
    changes: Arc<Changes>,
    mode: Mode,
    /// `changes.count` as of the last successful sync's start.
    synced: u64,
}

impl DirWatch {
    /// Starts watching `root`; `wake` is notified on every change so the
    /// loop does not wait for its tick.
    pub fn new(root: PathBuf, wake: Arc<Notify>) -> DirWatch {
        let changes = Arc::new(Changes {
            count: AtomicU64::new(0),
            complete: AtomicBool::new(false),
            last: Mutex::new(Instant::now()),
            broken: AtomicBool::new(false),
        });
        let mode = start(&root, &changes, &wake);
        DirWatch {
            root,
            changes,
            mode,
            synced: 0,
        }
    }

    /// The directory watched.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Whether the watch runs on `notify` (false: polling).
    pub fn is_notified(&self) -> bool {
        matches!(self.mode, Mode::Notify(_))
    }

    /// Looks again (polls, or retries a watcher) and says whether the tree
    /// changed since the last sync and has been still since: [`SETTLE`]
    /// after a change that completed a file, else [`DEBOUNCE`].
    /// `Err(deadline)`: changed, but not still yet — look again then.
    pub async fn check(&mut self, wake: &Arc<Notify>) -> Result<bool, Instant> {
        if self.changes.broken.swap(false, Ordering::SeqCst) {
            tracing::warn!(path = %self.root.display(), "directory watch lost; polling");
            let (fingerprint, over) = self.fingerprint().await;
            self.mode = Mode::Poll {
                fingerprint,
                retry_at: Instant::now() + RETRY,
                poll_at: Instant::now() + poll_pause(over),
            };
            // The tree may have changed with the loss (removed, replaced).
            self.changes.bump();
        }
        if let Mode::Poll { retry_at, .. } = &mut self.mode {
            if Instant::now() >= *retry_at {
                let mode = start(&self.root, &self.changes, wake);
                if matches!(mode, Mode::Notify(_)) {
                    tracing::info!(path = %self.root.display(), "directory watch started");
                    self.mode = mode;
                    // What changed while no watcher ran is caught by
                    // syncing once.
                    self.changes.bump();
                } else {
                    *retry_at = Instant::now() + RETRY;
                }
            }
        }
        if let Mode::Poll {
            fingerprint,
            poll_at,
            ..
        } = &self.mode
        {
            let old = *fingerprint;
            if Instant::now() >= *poll_at {
                let (fp, over) = self.fingerprint().await;
                if fp != old {
                    self.changes.bump();
                }
                if let Mode::Poll {
                    fingerprint,
                    poll_at,
                    ..
                } = &mut self.mode
                {
                    *fingerprint = fp;
                    *poll_at = Instant::now() + poll_pause(over);
                }
            }
        }
        let count = self.changes.count.load(Ordering::SeqCst);
        if count == self.synced {
            return Ok(false);
        }
        let last = *self.changes.last.lock().unwrap_or_else(|p| p.into_inner());
        let quiet = self.changes.quiet();
        if last.elapsed() >= quiet {
            Ok(true)
        } else {
            Err(last + quiet)
        }
    }

    /// How long the tree has been still (since the last change seen).
    pub fn still_for(&self) -> Duration {
        self.changes
            .last
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .elapsed()
    }

    /// A mark to pass to [`DirWatch::synced`] once a sync that starts now
    /// has committed (changes during the sync sync again).
    pub fn mark(&self) -> u64 {
        self.changes.count.load(Ordering::SeqCst)
    }

    /// The sync that started at `mark` committed.
    pub fn synced(&mut self, mark: u64) {
        self.synced = mark;
    }

    async fn fingerprint(&self) -> (u64, bool) {
        let root = self.root.clone();
        tokio::task::spawn_blocking(move || fingerprint(&root))
            .await
            .unwrap_or((0, false))
    }
}

/// Starts a `notify` watcher on `root`, or the polling fallback (logged).
fn start(root: &Path, changes: &Arc<Changes>, wake: &Arc<Notify>) -> Mode {
    let (c, w, r) = (changes.clone(), wake.clone(), root.to_path_buf());
    let watcher =
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(ev) => {
                if ev.paths.iter().any(|p| p == &r) && matches!(ev.kind, EventKind::Remove(_)) {
                    c.broken.store(true, Ordering::SeqCst);
                }
                if relevant(&r, &ev) {
                    c.bump_as(completes(&ev.kind));
                    w.notify_one();
                }
            }
            Err(_) => {
                c.broken.store(true, Ordering::SeqCst);
                w.notify_one();
            }
        });
    let started = watcher.and_then(|mut w| w.watch(root, RecursiveMode::Recursive).map(|_| w));
    match started {
        Ok(w) => Mode::Notify(w),
        Err(e) => {
            tracing::warn!(path = %root.display(), error = %e,
                "cannot watch directory; polling it instead");
            let (fingerprint, over) = fingerprint(root);
            Mode::Poll {
                fingerprint,
                retry_at: Instant::now() + RETRY,
                poll_at: Instant::now() + poll_pause(over),
            }
        }
    }
}

/// Whether an event completes a file: its writer closed it, or a whole
/// file was renamed in or removed (data writes and creations may be
/// followed by more writes).
fn completes(kind: &EventKind) -> bool {
    use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
    matches!(
        kind,
        EventKind::Access(AccessKind::Close(AccessMode::Write))
            | EventKind::Modify(ModifyKind::Name(RenameMode::To | RenameMode::Both))
            | EventKind::Remove(_)
    )
}

/// Whether an event changes the tree as a sync reads it: reads (the sync's
/// own, `Access`) do not — closing a file written does — nor do hidden
/// entries below the root (editor swap files, `.git`), which
/// [`fetch::read_dir`] skips too.
fn relevant(root: &Path, ev: &notify::Event) -> bool {
    if matches!(ev.kind, EventKind::Access(_)) && !completes(&ev.kind) {
        return false;
    }
    ev.paths.iter().any(|p| {
        let Ok(rel) = p.strip_prefix(root) else {
            return true;
        };
        !rel.components().any(|c| match c {
            Component::Normal(n) => n.to_string_lossy().starts_with('.'),
            _ => false,
        })
    })
}

/// How long until the next walk of a polled directory.
fn poll_pause(over_the_bound: bool) -> Duration {
    if over_the_bound {
        RETRY
    } else {
        POLL_EVERY
    }
}

/// A cheap fingerprint of a directory: every entry's path, size and
/// mtime (0 when it cannot be read: the sync then reports the error);
/// `true` when the walk stopped at [`fetch::MAX_ENTRIES`].
fn fingerprint(root: &Path) -> (u64, bool) {
    fingerprint_within(root, fetch::MAX_ENTRIES)
}

/// [`fingerprint`], walking at most `limit` entries.
fn fingerprint_within(root: &Path, limit: usize) -> (u64, bool) {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    let mut stack = vec![root.to_path_buf()];
    let mut n = 0usize;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            n += 1;
            if n > limit {
                return (h.finish(), true);
            }
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            e.path().hash(&mut h);
            if ft.is_dir() {
                stack.push(e.path());
            } else if let Ok(m) = e.metadata() {
                m.len().hash(&mut h);
                if let Ok(t) = m.modified() {
                    t.hash(&mut h);
                }
            }
        }
    }
    (h.finish(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch of a directory not made yet (`later` in a temp dir, kept
    /// while the returned guard lives): nothing to watch, nothing notified.
    fn not_yet_there() -> (tempfile::TempDir, PathBuf, Arc<Notify>, DirWatch) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("later");
        let wake = Arc::new(Notify::new());
        let w = DirWatch::new(root.clone(), wake.clone());
        assert!(!w.is_notified(), "nothing to watch yet");
        (dir, root, wake, w)
    }

    async fn settle(w: &mut DirWatch, wake: &Arc<Notify>) -> bool {
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            match w.check(wake).await {
                Ok(changed) if changed => return true,
                Ok(_) => {}
                Err(_) => {}
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    #[tokio::test]
    async fn a_write_is_seen_through_notify_and_reads_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        std::fs::create_dir(root.join("sub")).unwrap();
        let wake = Arc::new(Notify::new());
        let mut w = DirWatch::new(root.clone(), wake.clone());
        assert!(w.is_notified(), "inotify is available here");
        assert_eq!(w.check(&wake).await, Ok(false));

        std::fs::write(root.join("sub/a.yaml"), "x: 1\n").unwrap();
        assert!(settle(&mut w, &wake).await, "a write in a subdirectory");
        let mark = w.mark();
        // A sync reads the tree: that is no change.
        let _ = std::fs::read_to_string(root.join("sub/a.yaml")).unwrap();
        let _ = fetch::read_dir(&root);
        w.synced(mark);
        tokio::time::sleep(DEBOUNCE + Duration::from_millis(100)).await;
        assert_eq!(w.check(&wake).await, Ok(false));

        // Hidden entries (editor swap files) are no change either.
        std::fs::write(root.join(".a.yaml.swp"), "x").unwrap();
        tokio::time::sleep(DEBOUNCE + Duration::from_millis(100)).await;
        assert_eq!(w.check(&wake).await, Ok(false));

        std::fs::remove_file(root.join("sub/a.yaml")).unwrap();
        assert!(settle(&mut w, &wake).await, "a removal");
    }

    #[test]
    fn a_closed_or_renamed_file_is_complete_and_a_data_write_is_not() {
        use notify::event::{
            AccessKind, AccessMode, CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode,
        };
        let close = EventKind::Access(AccessKind::Close(AccessMode::Write));
        assert!(completes(&close));
        assert!(completes(&EventKind::Modify(ModifyKind::Name(
            RenameMode::To
        ))));
        assert!(completes(&EventKind::Modify(ModifyKind::Name(
            RenameMode::Both
        ))));
        assert!(completes(&EventKind::Remove(RemoveKind::File)));
        assert!(!completes(&EventKind::Modify(ModifyKind::Data(
            DataChange::Any
        ))));
        assert!(!completes(&EventKind::Create(CreateKind::File)));
        assert!(!completes(&EventKind::Access(AccessKind::Close(
            AccessMode::Read
        ))));
        // Closing a file written is a change; reading one is not.
        let root = Path::new("/tree");
        let ev = |kind| notify::Event::new(kind).add_path(root.join("a.yaml"));
        assert!(relevant(root, &ev(close)));
        assert!(!relevant(
            root,
            &ev(EventKind::Access(AccessKind::Close(AccessMode::Read)))
        ));
    }

    #[tokio::test]
    async fn a_whole_file_written_settles_sooner_than_a_write_under_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let wake = Arc::new(Notify::new());
        let mut w = DirWatch::new(root.clone(), wake.clone());
        assert!(w.is_notified());
        assert_eq!(w.changes.quiet(), DEBOUNCE, "nothing seen yet");
        // Written and closed: SETTLE once the close is seen.
        std::fs::write(root.join("a.yaml"), "x: 1\n").unwrap();
        let until = Instant::now() + Duration::from_secs(3);
        while w.changes.quiet() != SETTLE {
            assert!(Instant::now() < until, "the closed write was never seen");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(settle(&mut w, &wake).await);
        let mark = w.mark();
        w.synced(mark);
        // Still open: the write may go on, DEBOUNCE applies.
        use std::io::Write as _;
        let mut f = std::fs::File::create(root.join("b.yaml")).unwrap();
        f.write_all(b"x: ").unwrap();
        f.flush().unwrap();
        let until = Instant::now() + Duration::from_secs(3);
        while w.mark() == mark {
            assert!(Instant::now() < until, "the write was never seen");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(w.changes.quiet(), DEBOUNCE, "an open file may grow");
        drop(f);
    }

    #[tokio::test]
    async fn a_polled_directory_is_walked_at_most_once_a_second_and_bounded() {
        let (_dir, root, wake, mut w) = not_yet_there();
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.yaml"), "x: 1\n").unwrap();
        // Not walked again before POLL_EVERY (a pass every tick must not
        // cost a walk each).
        assert_eq!(w.check(&wake).await, Ok(false));
        assert!(settle(&mut w, &wake).await, "walked after POLL_EVERY");
        for i in 0..5 {
            std::fs::write(root.join(format!("f{i}.yaml")), "x: 1\n").unwrap();
        }
        assert!(!fingerprint_within(&root, 10).1);
        assert!(fingerprint_within(&root, 3).1, "stopped at the bound");
        assert_eq!(poll_pause(true), RETRY);
        assert_eq!(poll_pause(false), POLL_EVERY);
    }

    #[tokio::test]
    async fn a_missing_directory_is_polled_then_watched() {
        let (_dir, root, wake, mut w) = not_yet_there();
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.yaml"), "x: 1\n").unwrap();
        assert!(settle(&mut w, &wake).await, "the poll sees the new tree");
    }
}
