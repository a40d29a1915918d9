//! A delivery's changes: an attempt's outcome — delivered, retried later
//! with exponential backoff and jitter, or failed once the retry window
//! (24 h by default) is over — and a redelivery.
//!
//! ```mermaid
//! stateDiagram-v2
//!     [*] --> pending: event committed (same transaction)
//!     pending --> delivered: 2xx
//!     pending --> pending: error or timeout, retry window left (backoff)
//!     pending --> failed: error or timeout, retry window over
//!     delivered --> pending: redeliver
//!     failed --> pending: redeliver
//! ```

use std::time::Duration;

use chrono::{DateTime, Utc};
use pam_store::prelude::*;
use pam_store::{Delivery, DeliveryOutcome, DeliveryStatus, StoreResult};
use uuid::Uuid;

/// How deliveries are retried (`[webhooks]` in pamd's config).
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// The wait after the first failure; doubled after each next one.
    pub initial: Duration,
    /// The longest wait between two attempts.
    pub max_interval: Duration,
    /// A delivery still failing this long after it was queued is marked
    /// failed.
    pub give_up_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            initial: Duration::from_secs(10),
            max_interval: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(24 * 3600),
        }
    }
}

impl RetryPolicy {
    /// The wait after the `failures`-th failure in a row: the doubled
    /// interval (capped), of which a random half is kept ("equal jitter":
    /// between half and the whole), so receivers that failed together are
    /// not retried together. `jitter` is in [0, 1].
    pub fn backoff(&self, failures: i32, jitter: f64) -> Duration {
        let exp = failures.clamp(1, 40) - 1;
        let full = self
            .initial
            .saturating_mul(1u32 << exp.min(31))
            .min(self.max_interval);
        full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
    }
}

/// What an attempt got back.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    /// The endpoint answered with this status.
    Answered(u16),
    /// No answer: refused, reset, timed out (the message says which).
    NoAnswer(String),
    /// A 3xx: redirects are not followed (the receiver's URL must be its
    /// final address), so this is a failure naming where it pointed.
    Redirected { code: u16, location: String },
}

impl Attempt {
    fn ok(&self) -> bool {
        matches!(self, Attempt::Answered(c) if (200..300).contains(c))
    }
}

/// Records an attempt of `d` made at `now`: delivered on a 2xx;
/// otherwise pending again after the backoff, or failed when the next
/// attempt would fall past the retry window. Guarded by the attempt count
/// (Conflict when a redelivery or another sender moved it meanwhile).
pub async fn record_attempt(
    tx: &mut dyn Tx,
    d: &Delivery,
    attempt: &Attempt,
    policy: &RetryPolicy,
    jitter: f64,
    now: DateTime<Utc>,
) -> StoreResult<Delivery> {
    let attempts = d.attempts + 1;
    let (code, error) = match attempt {
        Attempt::Answered(c) if attempt.ok() => (Some(i32::from(*c)), String::new()),
        Attempt::Answered(c) => (Some(i32::from(*c)), format!("HTTP {c}")),
        Attempt::NoAnswer(why) => (None, why.clone()),
        Attempt::Redirected { code, location } => (
            Some(i32::from(*code)),
            format!("HTTP {code}: redirect to {location:?} not followed; set the Webhook's url to the final address"),
        ),
    };
    let outcome = if attempt.ok() {
        DeliveryOutcome {
            status: DeliveryStatus::Delivered,
            attempts,
            next_attempt_at: None,
            at: now,
            code,
            error,
        }
    } else {
        // Failures since the last redelivery count for the backoff; the
        // window runs from when the delivery was queued.
        let wait = chrono::Duration::from_std(policy.backoff(attempts, jitter))
            .unwrap_or(chrono::Duration::MAX);
        let window =
            chrono::Duration::from_std(policy.give_up_after).unwrap_or(chrono::Duration::MAX);
        let next = now + wait;
        let over = next > d.created_at + window;
        DeliveryOutcome {
            status: if over {
                DeliveryStatus::Failed
            } else {
                DeliveryStatus::Pending
            },
            attempts,
            next_attempt_at: (!over).then_some(next),
            at: now,
            code,
            error,
        }
    };
    tx.record_delivery(d.id, &outcome).await
}

/// `pamctl webhook redeliver ID`: the delivery (delivered or failed, or
/// pending and waiting) is due again now, with the same id and body. In
/// its webhook's queue it takes its seq's place: an old one goes first.
pub async fn redeliver(tx: &mut dyn Tx, id: Uuid, now: DateTime<Utc>) -> StoreResult<Delivery> {
    tx.redeliver(id, now).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_caps_and_jitters() {
        let p = RetryPolicy {
            initial: Duration::from_secs(10),
            max_interval: Duration::from_secs(60),
            give_up_after: Duration::from_secs(3600),
        };
        assert_eq!(p.backoff(1, 1.0), Duration::from_secs(10));
        assert_eq!(p.backoff(2, 1.0), Duration::from_secs(20));
        assert_eq!(p.backoff(3, 0.0), Duration::from_secs(20));
        assert_eq!(p.backoff(4, 1.0), Duration::from_secs(60));
        assert_eq!(p.backoff(100, 1.0), Duration::from_secs(60));
        let j = crate::clock::jitter();
        assert!((0.0..=1.0).contains(&j));
    }
}
