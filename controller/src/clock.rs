//! The controller's one source of time (and its one time format, [`ts`]). Everything that reads the time takes
//! an `Arc<dyn Clock>`, so tests move a [`ManualClock`] instead of sleeping.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The one way pam prints a time: RFC 3339 in UTC to the second with `Z`
/// (`2026-12-03T14:26:47Z`) — objects, conditions, events, leases.
pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

/// A random number in [0, 1) for spreading delays out: the webhook
/// backoff's jitter, the worker watches' lifetimes.
pub fn jitter() -> f64 {
    let mut b = [0u8; 8];
    getrandom::fill(&mut b).expect("the OS random source works");
    (u64::from_le_bytes(b) >> 11) as f64 / (1u64 << 53) as f64
}

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

/// Shared handle, as every component holds it.
pub type SharedClock = Arc<dyn Clock>;

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to (tests).
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self {
            now: Mutex::new(start),
        }
    }

    pub fn set(&self, to: DateTime<Utc>) {
        *self.lock() = to;
    }

    /// Moves the clock forward (or back, for a negative duration).
    pub fn advance(&self, by: Duration) {
        let mut now = self.lock();
        *now += by;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DateTime<Utc>> {
        // A panic while holding the lock cannot leave a DateTime half-written.
        self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.lock()
    }
}

/// A clock that reads the time from a file (a test hook: `pamd
/// --clock-file`, so an end-to-end test moves a real pamd's time). The
/// file holds one RFC 3339 time (`2026-01-01T00:00:30Z`, whitespace
/// around it allowed). It is re-read at most once per [`FileClock::REFRESH`];
/// a file that cannot be read or parsed keeps the last good time (one
/// warning until it reads again), or the wall clock if there never was one.
#[derive(Debug)]
pub struct FileClock {
    path: PathBuf,
    refresh: std::time::Duration,
    state: Mutex<FileState>,
}

#[derive(Debug, Default)]
struct FileState {
    /// The last time the file gave.
    last: Option<DateTime<Utc>>,
    /// When the file was last read (by the wall clock).
    read_at: Option<Instant>,
    /// A bad read was logged and no good one came since.
    warned: bool,
}

impl FileClock {
    /// How stale the value may be: `now()` is called often.
    pub const REFRESH: std::time::Duration = std::time::Duration::from_millis(50);

    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self::with_refresh(path, Self::REFRESH)
    }

    /// Re-reads at most once per `refresh` (zero: on every call).
    pub fn with_refresh(path: impl Into<PathBuf>, refresh: std::time::Duration) -> Self {
        Self {
            path: path.into(),
            refresh,
            state: Mutex::new(FileState::default()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read(&self) -> anyhow::Result<DateTime<Utc>> {
        let text = std::fs::read_to_string(&self.path)?;
        Ok(DateTime::parse_from_rfc3339(text.trim())?.with_timezone(&Utc))
    }
}

impl Clock for FileClock {
    fn now(&self) -> DateTime<Utc> {
        // A panic while holding the lock cannot leave the state half-written.
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if st.read_at.is_none_or(|at| at.elapsed() >= self.refresh) {
            st.read_at = Some(Instant::now());
            match self.read() {
                Ok(t) => {
                    st.last = Some(t);
                    st.warned = false;
                }
                Err(e) if !st.warned => {
                    st.warned = true;
                    tracing::warn!(
                        file = %self.path.display(),
                        error = %e,
                        "cannot read the time from the clock file; keeping the last good time"
                    );
                }
                Err(_) => {}
            }
        }
        st.last.unwrap_or_else(Utc::now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    /// A file clock re-read every `refresh`, its file (in a temp dir, kept
    /// while the returned guard lives) holding `text`.
    fn file_clock(
        text: &str,
        refresh: std::time::Duration,
    ) -> (tempfile::TempDir, std::path::PathBuf, FileClock) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("now");
        std::fs::write(&path, text).unwrap();
        let clock = FileClock::with_refresh(&path, refresh);
        (dir, path, clock)
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let start = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        clock.advance(Duration::seconds(90));
        assert_eq!(clock.now(), start + Duration::seconds(90));
        let later = Utc.with_ymd_and_hms(2027, 6, 1, 12, 0, 0).unwrap();
        clock.set(later);
        let shared: SharedClock = Arc::new(clock);
        assert_eq!(shared.now(), later);
    }

    #[test]
    fn system_clock_is_now() {
        let before = Utc::now();
        let now = SystemClock.now();
        assert!(now >= before && now <= Utc::now());
    }

    #[test]
    fn file_clock_follows_the_file() {
        let (_dir, path, clock) = file_clock(" 2026-01-01T00:00:30Z\n", std::time::Duration::ZERO);
        let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap();
        assert_eq!(clock.now(), t0);
        std::fs::write(&path, "2026-01-01T00:01:30Z").unwrap();
        assert_eq!(clock.now(), t0 + Duration::minutes(1));
        // Any offset, read as UTC.
        std::fs::write(&path, "2026-01-01T02:05:00+02:00").unwrap();
        assert_eq!(
            clock.now(),
            t0 + Duration::minutes(5) - Duration::seconds(30)
        );
    }

    #[test]
    fn file_clock_keeps_the_last_good_time() {
        let (_dir, path, clock) = file_clock("2026-01-01T00:00:30Z", std::time::Duration::ZERO);
        let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 30).unwrap();
        assert_eq!(clock.now(), t0);
        for bad in ["", "tomorrow", "2026-01-01 00:00", "2026-01-01T00:00:30Z x"] {
            std::fs::write(&path, bad).unwrap();
            assert_eq!(clock.now(), t0, "{bad:?}");
        }
        std::fs::remove_file(&path).unwrap();
        assert_eq!(clock.now(), t0, "a missing file");
        std::fs::write(&path, "2026-01-01T00:02:00Z").unwrap();
        assert_eq!(clock.now(), t0 + Duration::seconds(90), "good again");
    }

    #[test]
    fn file_clock_without_a_good_read_is_the_wall_clock() {
        let dir = tempfile::tempdir().unwrap();
        let clock = FileClock::with_refresh(dir.path().join("absent"), std::time::Duration::ZERO);
        let before = Utc::now();
        let now = clock.now();
        assert!(now >= before && now <= Utc::now());
        std::fs::write(clock.path(), "garbage").unwrap();
        let now = clock.now();
        assert!(now >= before && now <= Utc::now());
    }

    #[test]
    fn file_clock_rereads_at_most_once_per_refresh() {
        let refresh = std::time::Duration::from_secs(3600);
        let (_dir, path, clock) = file_clock("2026-01-01T00:00:30Z", refresh);
        let t0 = clock.now();
        std::fs::write(&path, "2026-01-01T00:09:00Z").unwrap();
        assert_eq!(clock.now(), t0, "cached within the refresh period");
        assert_eq!(FileClock::new(&path).now(), t0 + Duration::seconds(510));
    }
}
