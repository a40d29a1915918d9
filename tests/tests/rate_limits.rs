//! Per-token rate limits end to end, on a real pamd. A client
//! over its budget gets 429 in the one JSON error shape with Retry-After
//! and RateLimit-* headers; pamctl waits as told and succeeds; another
//! token and unauthenticated probes are not held up.

use std::time::{Duration, Instant};

use pam_tests::{ok, Pamd, PamdOptions};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_budget_is_429_with_retry_after_and_pamctl_waits() {
    let pamd = Pamd::start(PamdOptions {
        config_toml: "[rate_limits]\noperator_per_second = 1\noperator_burst = 3\n".into(),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let client = pamd.http();
    let get = || {
        client
            .get(format!("{}/api/v1/projects", pamd.url))
            .bearer_auth(&pamd.token)
            .send()
    };
    let first = get().await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    let h = first.headers();
    assert_eq!(h["ratelimit-limit"], "3");
    assert_eq!(h["ratelimit-remaining"], "2");
    assert!(h.contains_key("ratelimit-reset"));
    let mut refused = None;
    for _ in 0..5 {
        let r = get().await.unwrap();
        if r.status().as_u16() == 429 {
            refused = Some(r);
            break;
        }
    }
    let r = refused.expect("a 429 within the burst and a few more");
    let retry_after = pam_tests::retry_after(&r);
    assert!((1..=2).contains(&retry_after), "{retry_after}");
    assert_eq!(r.headers()["ratelimit-remaining"], "0");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("retry after"));

    // Probes without a token are not limited.
    let health = client
        .get(format!("{}/healthz", pamd.url))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status().as_u16(), 200);

    // pamctl, over the budget now, waits Retry-After and succeeds.
    let started = Instant::now();
    let out = pamd.pamctl(&["get", "projects"]);
    ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("rate limited; retrying in"), "{stderr}");
    assert!(started.elapsed() >= Duration::from_millis(900), "it waited");
}

/// 2,000 requests a second, each with another random token,
/// got 2,000 401s a second (a bad token's bucket is its own). Failed
/// authentications are limited per client address: past the budget, 429
/// with `Retry-After` in the one JSON error shape and no lookup; a token
/// that works goes on working from the same address, another address is
/// not held up, and the refusals are counted in /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentications_are_limited_per_client_address() {
    let pamd = Pamd::start(PamdOptions {
        config_toml: "[rate_limits]\nauth_failures_per_second = 0.2\nauth_failures_burst = 5\n"
            .into(),
        ..PamdOptions::default()
    })
    .await
    .unwrap();
    let from = |ip: [u8; 4]| {
        reqwest::Client::builder()
            .local_address(std::net::IpAddr::from(ip))
            .build()
            .unwrap()
    };
    let client = from([127, 0, 0, 1]);
    let get = |c: &reqwest::Client, token: String| {
        c.get(format!("{}/api/v1/projects", pamd.url))
            .bearer_auth(token)
            .send()
    };
    // The admin token works from this address before the flood.
    assert_eq!(
        get(&client, pamd.token.clone()).await.unwrap().status(),
        200
    );
    let mut statuses = Vec::new();
    let mut refused = None;
    for i in 0..20 {
        let r = get(&client, format!("pam_bogus{i:04}{}", "x".repeat(40)))
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
        if r.status() == 429 && refused.is_none() {
            refused = Some(r);
        }
    }
    assert_eq!(&statuses[..5], [401; 5], "{statuses:?}");
    assert!(statuses[5..].iter().all(|s| *s == 429), "{statuses:?}");
    let r = refused.unwrap();
    let retry = pam_tests::retry_after(&r);
    assert!((1..=5).contains(&retry), "{retry}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited", "{body}");
    // A token that works still works from the same address.
    assert_eq!(
        get(&client, pamd.token.clone()).await.unwrap().status(),
        200
    );
    // Another address has a budget of its own.
    let other = from([127, 0, 0, 2]);
    let r = get(&other, "pam_bogus-other".into()).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(
        pamd.metric("pam_auth_failures_limited_total").await,
        Some(15.0)
    );
}
