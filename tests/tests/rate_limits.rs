//! Issue 19 end to end: per-token rate limits on a real pamd. A client
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
    let retry_after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
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
