//! How long the agent waits before it asks pamd again after a failure.
//!
//! Two schedules, each doubling up to its own cap:
//!
//! * an ordinary failure (pamd down, a timeout, a 5xx): 200 ms, 400 ms, …
//!   up to 5 s, so a restarted pamd is found again within seconds;
//! * an auth failure (401, 403: a revoked or mistyped worker token): at
//!   least 10 s, then 20 s, 40 s, up to 60 s. Another try cannot fix a bad
//!   token until an operator acts, and a fleet of workers with a revoked
//!   token must not hammer pamd.
//!
//! Each delay is the previous one doubled, clamped into the schedule of the
//! failure at hand, so an auth failure after a run of ordinary ones starts
//! at 10 s, and an ordinary failure after auth failures drops back to 5 s.
//! A success resets the schedule.
//!
//! Pure: the loops sleep for what [`Backoff::after`] returns, the tests
//! read it.

use std::time::Duration;

/// What kind of failure a retry follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// Anything another try may fix by itself (network, timeout, 5xx).
    Ordinary,
    /// pamd refused the worker token (401 or 403).
    Auth,
}

impl Failure {
    /// The failure an HTTP status stands for.
    pub fn of_status(status: Option<u16>) -> Failure {
        match status {
            Some(401 | 403) => Failure::Auth,
            _ => Failure::Ordinary,
        }
    }

    /// (first delay, cap) of this kind's schedule.
    fn bounds(self) -> (Duration, Duration) {
        match self {
            Failure::Ordinary => (ORDINARY_FIRST, ORDINARY_CAP),
            Failure::Auth => (AUTH_FIRST, AUTH_CAP),
        }
    }
}

/// First delay after an ordinary failure.
pub const ORDINARY_FIRST: Duration = Duration::from_millis(200);
/// Longest delay after ordinary failures.
pub const ORDINARY_CAP: Duration = Duration::from_secs(5);
/// First (and shortest) delay after an auth failure.
pub const AUTH_FIRST: Duration = Duration::from_secs(10);
/// Longest delay after auth failures.
pub const AUTH_CAP: Duration = Duration::from_secs(60);

/// A retry schedule; see the module doc.
#[derive(Debug, Clone, Default)]
pub struct Backoff {
    /// The delay handed out last; zero after a success.
    last: Duration,
}

impl Backoff {
    /// A fresh schedule.
    pub fn new() -> Backoff {
        Backoff::default()
    }

    /// The delay before the next try, after `failure`.
    pub fn after(&mut self, failure: Failure) -> Duration {
        let (first, cap) = failure.bounds();
        self.last = (self.last * 2).clamp(first, cap);
        self.last
    }

    /// A success: the next failure starts its schedule from the beginning.
    pub fn reset(&mut self) {
        self.last = Duration::ZERO;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn schedule(b: &mut Backoff, failures: &[Failure]) -> Vec<Duration> {
        failures.iter().map(|f| b.after(*f)).collect()
    }

    #[test]
    fn ordinary_failures_double_from_200ms_to_5s() {
        let mut b = Backoff::new();
        assert_eq!(
            schedule(&mut b, &[Failure::Ordinary; 7]),
            [
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3200),
                ms(5000),
                ms(5000)
            ]
        );
    }

    /// The delay after a 401 dropped back to 5 s on the next try.
    #[test]
    fn auth_failures_stay_at_10s_or_more_and_grow_to_60s() {
        let mut b = Backoff::new();
        assert_eq!(
            schedule(&mut b, &[Failure::Auth; 6]),
            [
                ms(10_000),
                ms(20_000),
                ms(40_000),
                ms(60_000),
                ms(60_000),
                ms(60_000)
            ]
        );
        // After ordinary failures, an auth failure still waits 10 s at least.
        let mut b = Backoff::new();
        b.after(Failure::Ordinary);
        b.after(Failure::Ordinary);
        assert_eq!(b.after(Failure::Auth), ms(10_000));
    }

    #[test]
    fn an_ordinary_failure_after_auth_failures_drops_to_its_own_cap() {
        let mut b = Backoff::new();
        schedule(&mut b, &[Failure::Auth; 3]);
        assert_eq!(b.after(Failure::Ordinary), ms(5000));
        assert_eq!(b.after(Failure::Auth), ms(10_000));
    }

    #[test]
    fn success_resets_the_schedule() {
        let mut b = Backoff::new();
        schedule(&mut b, &[Failure::Auth; 4]);
        b.reset();
        assert_eq!(b.after(Failure::Ordinary), ms(200));
        b.reset();
        assert_eq!(b.after(Failure::Auth), ms(10_000));
    }

    #[test]
    fn statuses_map_to_failures() {
        assert_eq!(Failure::of_status(Some(401)), Failure::Auth);
        assert_eq!(Failure::of_status(Some(403)), Failure::Auth);
        assert_eq!(Failure::of_status(Some(500)), Failure::Ordinary);
        assert_eq!(Failure::of_status(Some(409)), Failure::Ordinary);
        assert_eq!(Failure::of_status(None), Failure::Ordinary);
    }
}
