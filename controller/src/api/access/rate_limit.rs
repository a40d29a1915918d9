//! Rate limits: a token bucket per bearer token, with the
//! operator and the worker budgets configured apart (`[rate_limits]`).
//! A request over its budget is answered 429 in the one JSON error shape,
//! with `Retry-After` (seconds until a request fits); every limited
//! answer carries `RateLimit-Limit` (the burst), `RateLimit-Remaining`
//! and `RateLimit-Reset` (seconds until the bucket is full again).
//!
//! # Caveats
//! - The buckets live in this pamd's memory: with replicas, each replica
//!   grants the whole budget (a client spread over N replicas gets up to
//!   N times it). A restart refills every bucket.
//! - Requests without a bearer token (health, readiness, metrics, the
//!   version) are not limited; a token is told operator or worker by its
//!   prefix (`pam_`, `pamw_`) before it is looked up, so a flood of bad
//!   tokens is limited too (each is its own bucket; idle full buckets are
//!   forgotten).
//!
//! # Failed authentication
//! A bad token's bucket is its own, so a flood of random tokens was never
//! limited by the per-token buckets. Failures are also counted per client
//! address (IPv6: per /64, what one client can rotate through): each
//! unknown or revoked token takes one from the address's failure bucket
//! (`auth_failures_per_second`, `auth_failures_burst`). While that bucket
//! is empty, a request from the address whose token this pamd has not
//! seen succeed is answered 429 before the token is looked up (no
//! database work); a token that did succeed here goes on working, so a
//! client sharing an address with an attacker (a NAT, a proxy) keeps its
//! access. Only failures consume. `pam_auth_failures_limited` counts the
//! refusals. Caveat: behind a reverse proxy every client has the proxy's
//! address.
//!
//! # Budgets (docs/operations.md, "Rate limits")
//! One worker's normal cadence: a heartbeat every 30 s, its desired set
//! every 5 s tick, a claim long-poll (20 s) after each claim, a signal
//! batch at most every 50 ms while signals are pending, and an output
//! snapshot per running run per second (4 runs by default): under 25
//! requests a second at its very busiest, about 6 on average. Every
//! worker has its own token and so its own bucket: the default of 50 a
//! second with a burst of 200 leaves each host a wide margin (operators:
//! 100 a second, a burst of 1,000), whatever
//! the fleet's size (1,000 hosts are 1,000 buckets).

use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};

use crate::api::{ApiError, AppState};
use crate::rules::tokens::fingerprint;

/// One kind of caller's budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// Requests a second, sustained.
    pub per_second: f64,
    /// Requests at once (the bucket's size).
    pub burst: f64,
}

impl Budget {
    pub const fn new(per_second: f64, burst: f64) -> Self {
        Budget { per_second, burst }
    }
}

/// The operator and the worker budgets, and the failed authentications
/// one client address may make.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budgets {
    pub operator: Budget,
    pub worker: Budget,
    pub auth_failures: Budget,
}

impl Default for Budgets {
    fn default() -> Self {
        Budgets {
            operator: Budget::new(100.0, 1000.0),
            worker: Budget::new(50.0, 200.0),
            // An operator's typos and a revoked worker still polling fit;
            // a flood of guesses gets 5 lookups a second.
            auth_failures: Budget::new(5.0, 60.0),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: DateTime<Utc>,
}

/// What one request's check found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    pub limit: u64,
    pub per_second: f64,
    pub remaining: u64,
    /// Seconds until the bucket is full.
    pub reset: u64,
    /// Seconds until one request fits (0 when allowed).
    pub retry_after: u64,
}

/// Buckets above this many are pruned of the full idle ones.
const PRUNE_ABOVE: usize = 50_000;

/// Tokens remembered as having authenticated here, at most; past it the
/// memory starts again (they are re-learnt at their next success).
const GOOD_TOKENS_MAX: usize = 100_000;

/// The buckets of this pamd. The default limits nothing (an in-process
/// router in tests); pamd runs with its `[rate_limits]`.
#[derive(Debug, Default)]
pub struct Limiter {
    pub budgets: Option<Budgets>,
    buckets: Mutex<HashMap<String, Bucket>>,
    /// Failed authentications by client address (module doc).
    failures: Mutex<HashMap<IpAddr, Bucket>>,
    /// Fingerprints of tokens that authenticated here.
    good: Mutex<HashSet<String>>,
}

impl Limiter {
    pub fn new(budgets: Budgets) -> Limiter {
        Limiter {
            budgets: Some(budgets),
            ..Limiter::default()
        }
    }

    /// Seconds until `peer` may try an unknown token again, when its
    /// failure bucket is empty and the token `fp` has not authenticated
    /// here; None: look the token up.
    pub fn auth_refused(&self, peer: IpAddr, fp: &str, now: DateTime<Utc>) -> Option<u64> {
        let b = self.budgets?.auth_failures;
        let tokens = {
            let failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
            refill(failures.get(&client(peer))?, b, now)
        };
        if tokens >= 1.0
            || self
                .good
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(fp)
        {
            return None;
        }
        Some(((1.0 - tokens) / b.per_second).ceil().max(1.0) as u64)
    }

    /// `peer` presented a token that is unknown or revoked.
    pub fn auth_failed(&self, peer: IpAddr, now: DateTime<Utc>) {
        let Some(b) = self.budgets.map(|b| b.auth_failures) else {
            return;
        };
        let mut failures = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        if failures.len() > PRUNE_ABOVE {
            failures.retain(|_, k| refill(k, b, now) < b.burst);
        }
        let bucket = failures.entry(client(peer)).or_insert(Bucket {
            tokens: b.burst,
            at: now,
        });
        *bucket = Bucket {
            tokens: (refill(bucket, b, now) - 1.0).max(0.0),
            at: now,
        };
    }

    /// The token `fp` authenticated: it is let through even while its
    /// address's failure bucket is empty.
    pub fn auth_succeeded(&self, fp: &str) {
        if self.budgets.is_none() {
            return;
        }
        let mut good = self.good.lock().unwrap_or_else(|p| p.into_inner());
        if !good.contains(fp) {
            if good.len() >= GOOD_TOKENS_MAX {
                good.clear();
            }
            good.insert(fp.to_string());
        }
    }

    /// Takes one request from `key`'s bucket at `now`, if it has one;
    /// None when nothing is limited.
    pub fn check(&self, key: &str, worker: bool, now: DateTime<Utc>) -> Option<Decision> {
        let budgets = self.budgets?;
        let b = if worker {
            budgets.worker
        } else {
            budgets.operator
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() > PRUNE_ABOVE {
            buckets.retain(|_, k| refill(k, b, now) < b.burst);
        }
        let bucket = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: b.burst,
            at: now,
        });
        let tokens = refill(bucket, b, now);
        let allowed = tokens >= 1.0;
        let left = if allowed { tokens - 1.0 } else { tokens };
        *bucket = Bucket {
            tokens: left,
            at: now,
        };
        let secs = |need: f64| (need.max(0.0) / b.per_second).ceil() as u64;
        Some(Decision {
            allowed,
            limit: b.burst as u64,
            per_second: b.per_second,
            remaining: left.floor() as u64,
            reset: secs(b.burst - left),
            retry_after: if allowed { 0 } else { secs(1.0 - left).max(1) },
        })
    }
}

/// The client an address stands for: an IPv6 address by its /64 (one
/// client commonly holds a whole /64 and can rotate through it).
fn client(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(_) => peer,
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(bits.into())
        }
    }
}

fn refill(k: &Bucket, b: Budget, now: DateTime<Utc>) -> f64 {
    let elapsed = (now - k.at).num_microseconds().unwrap_or(i64::MAX).max(0) as f64 / 1e6;
    (k.tokens + elapsed * b.per_second).min(b.burst)
}

fn set_headers(h: &mut HeaderMap, d: &Decision) {
    for (name, v) in [
        ("ratelimit-limit", d.limit),
        ("ratelimit-remaining", d.remaining),
        ("ratelimit-reset", d.reset),
    ] {
        h.insert(name, HeaderValue::from(v));
    }
}

/// The layer: every request with a bearer token takes one from its
/// token's bucket, or is answered 429.
pub async fn layer(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let token = crate::api::access::auth::bearer(req.headers());
    let Some(token) = token else {
        return next.run(req).await;
    };
    let worker = token.starts_with(crate::rules::tokens::prefix(pam_store::TokenKind::Worker));
    let Some(d) = st.limits.check(&fingerprint(token), worker, st.ctx.now()) else {
        return next.run(req).await;
    };
    if !d.allowed {
        let who = if worker { "worker" } else { "operator" };
        let mut resp = ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!(
                "this token is over its {who} budget ({} requests at once, {}/s); retry after {} s",
                d.limit, d.per_second, d.retry_after
            ),
        )
        .into_response();
        set_headers(resp.headers_mut(), &d);
        resp.headers_mut()
            .insert("retry-after", HeaderValue::from(d.retry_after));
        return resp;
    }
    let mut resp = next.run(req).await;
    set_headers(resp.headers_mut(), &d);
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: i64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_700_000_000_000 + ms).unwrap()
    }

    #[test]
    fn a_bucket_empties_refills_and_says_when() {
        let l = Limiter::new(Budgets {
            operator: Budget::new(2.0, 3.0),
            ..Budgets::default()
        });
        for i in 0..3 {
            let d = l.check("a", false, at(0)).unwrap();
            assert!(d.allowed);
            assert_eq!((d.limit, d.remaining), (3, 2 - i));
        }
        let d = l.check("a", false, at(0)).unwrap();
        assert!(!d.allowed);
        assert_eq!((d.retry_after, d.reset), (1, 2));
        // Another token has its own bucket.
        assert!(l.check("b", false, at(0)).unwrap().allowed);
        // Half a second later one request fits.
        assert!(l.check("a", false, at(500)).unwrap().allowed);
        assert!(!l.check("a", false, at(600)).unwrap().allowed);
    }

    #[test]
    fn failed_authentications_empty_an_address_but_not_a_good_token() {
        let l = Limiter::new(Budgets {
            auth_failures: Budget::new(2.0, 3.0),
            ..Budgets::default()
        });
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let a = ip("192.0.2.1");
        l.auth_succeeded("good");
        for _ in 0..3 {
            assert_eq!(l.auth_refused(a, "bad", at(0)), None);
            l.auth_failed(a, at(0));
        }
        assert_eq!(l.auth_refused(a, "bad", at(0)), Some(1));
        assert_eq!(l.auth_refused(a, "good", at(0)), None);
        assert_eq!(l.auth_refused(ip("192.0.2.2"), "bad", at(0)), None);
        // Half a second later one failure fits again.
        assert_eq!(l.auth_refused(a, "bad", at(500)), None);
        // An IPv6 client is its /64.
        for _ in 0..3 {
            l.auth_failed(ip("2001:db8::1"), at(0));
        }
        assert!(l
            .auth_refused(ip("2001:db8::ffff:1"), "bad", at(0))
            .is_some());
        assert_eq!(l.auth_refused(ip("2001:db8:0:1::1"), "bad", at(0)), None);
    }

    /// The worker protocol at 1,000 hosts, each with its own token, at the
    /// normal cadence (docs/operations.md, "Rate limits"): heartbeats every
    /// 30 s, the desired set every 5 s, a claim every 20 s, a signal batch
    /// every 500 ms and 4 snapshots a second, with everything landing in
    /// the same instant every 5 s — for two simulated minutes, no 429.
    #[test]
    fn a_thousand_workers_at_normal_cadence_stay_inside_the_budget() {
        let l = Limiter::new(Budgets::default());
        let hosts: Vec<String> = (0..1000).map(|h| format!("host-{h}")).collect();
        let mut limited = 0;
        for step in 0..(120 * 4) {
            let ms = step * 250;
            for h in &hosts {
                let mut n = 1; // a snapshot every 250 ms: 4/s
                if ms % 500 == 0 {
                    n += 1; // a signal batch
                }
                if ms % 5000 == 0 {
                    n += 1; // the desired set
                }
                if ms % 20_000 == 0 {
                    n += 1; // a claim
                }
                if ms % 30_000 == 0 {
                    n += 1; // a heartbeat
                }
                for _ in 0..n {
                    if !l.check(h, true, at(ms)).unwrap().allowed {
                        limited += 1;
                    }
                }
            }
        }
        assert_eq!(limited, 0);
        // And a worker gone wild (200 requests a second) is stopped.
        let wild = (0..400).filter(|i| !l.check("wild", true, at(i * 5)).unwrap().allowed);
        assert!(wild.count() > 0);
    }
}
