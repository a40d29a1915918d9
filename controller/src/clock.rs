//! The controller's one source of time (and its one time format, [`ts`]). Everything that reads the time takes
//! an `Arc<dyn Clock>`, so tests move a [`ManualClock`] instead of sleeping.

use chrono::{DateTime, Duration, SecondsFormat, Utc};
use std::sync::{Arc, Mutex};

/// The one way pam prints a time: RFC 3339 in UTC to the second with `Z`
/// (`2026-12-03T14:26:47Z`) — objects, conditions, events, leases.
pub fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
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

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

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
}
