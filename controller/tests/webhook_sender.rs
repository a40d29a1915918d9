//! The webhook sender on the injected clock: a failing
//! receiver is retried only when the clock reaches the backoff, the
//! delivery fails once the next attempt would fall past the retry window,
//! and a redelivery sends the same delivery again. Where it sends: a redirect
//! is not followed, and an address the egress rule refuses is not connected to.
//! MemStore, real HTTP receivers on loopback, the clock moved by the test.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use chrono::{TimeZone, Utc};
use pam_controller::clock::{Clock, ManualClock};
use pam_controller::ctx::{Ctx, Thresholds};
use pam_controller::rules::meta::Desired;
use pam_controller::rules::webhooks::deliveries::{self, RetryPolicy};
use pam_controller::rules::webhooks::egress::Egress;
use pam_controller::rules::webhooks::keys::KeyFiles;
use pam_controller::rules::webhooks::{self, WebhookDesired, WebhookSettings};
use pam_manifests::kinds::Manifest;
use pam_store::memory::MemStore;
use pam_store::{Delivery, DeliveryStatus};
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[derive(Clone, Default)]
struct Receiver {
    status: Arc<AtomicU16>,
    got: Arc<Mutex<Vec<(String, String)>>>,
}

async fn start(r: &Receiver) -> String {
    async fn hook(
        axum::extract::State(r): axum::extract::State<Receiver>,
        headers: HeaderMap,
        _body: axum::body::Bytes,
    ) -> StatusCode {
        let h = |k: &str| {
            headers
                .get(k)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string()
        };
        r.got
            .lock()
            .unwrap()
            .push((h("pam-delivery"), h("pam-signature")));
        StatusCode::from_u16(r.status.load(Ordering::SeqCst)).unwrap()
    }
    let app = axum::Router::new()
        .route("/hook", axum::routing::post(hook))
        .with_state(r.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    format!("http://{addr}/hook")
}

async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn the_delivery(ctx: &Ctx) -> Delivery {
    let mut tx = ctx.store.begin().await.unwrap();
    let all = tx
        .list_deliveries(&pam_store::DeliveryFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 1);
    all.into_iter().next().unwrap()
}

/// Creates the Webhook `ci`: `url`, the topics `project.`, signed with
/// the key at `<keys>/hooks/signing/key`.
async fn create_webhook(ctx: &Ctx, url: &str, t0: chrono::DateTime<Utc>) {
    let m = Manifest::from_json(json!({
        "apiVersion": "pam.dev/v1", "kind": "Webhook", "metadata": {"name": "ci"},
        "spec": {"url": url, "topics": ["project."],
                 "signingSecretRef": {"project": "hooks", "name": "signing", "key": "key"}}
    }))
    .unwrap();
    let Manifest::Webhook(w) = &m else {
        unreachable!()
    };
    let mut tx = ctx.store.begin().await.unwrap();
    webhooks::create(tx.as_mut(), WebhookDesired::of(w, Desired::of(&m)), t0)
        .await
        .unwrap();
    ctx.commit(tx).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_follow_the_clock_then_fail_and_a_redelivery_sends_it_again() {
    let keys = tempfile::tempdir().unwrap();
    let dir = keys.path().join("hooks/signing");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("key"), b"k").unwrap();
    let r = Receiver::default();
    r.status.store(500, Ordering::SeqCst);
    let url = start(&r).await;

    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let clock = Arc::new(ManualClock::new(t0));
    let mut ctx = Ctx::new(
        Arc::new(MemStore::new()),
        clock.clone(),
        Thresholds::default(),
    );
    ctx.webhooks = Arc::new(WebhookSettings {
        keys: Arc::new(KeyFiles::new(Some(keys.path().to_path_buf()))),
        retry: RetryPolicy {
            initial: Duration::from_secs(10),
            max_interval: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(24 * 3600),
        },
        timeout: Duration::from_secs(5),
        link_base: "https://pam.example".into(),
        // The receiver is on loopback.
        egress: Egress::allowing(&["127.0.0.0/8"]).unwrap(),
    });

    // A Webhook, then an event it matches (and one it does not).
    create_webhook(&ctx, &url, t0).await;
    let mut tx = ctx.store.begin().await.unwrap();
    tx.append_event(
        "project.created",
        json!({"project": "web", "project_id": "u-1"}),
        t0,
    )
    .await
    .unwrap();
    tx.append_event("worker.offline", json!({"host": "h1"}), t0)
        .await
        .unwrap();
    ctx.commit(tx).await.unwrap();
    let d = the_delivery(&ctx).await;
    assert_eq!(d.payload["link"], "https://pam.example/api/v1/projects/web");

    let stop = CancellationToken::new();
    let sender = tokio::spawn(pam_controller::reconcile::webhooks::run(
        ctx.clone(),
        stop.clone(),
    ));

    // Attempt 1 at t0; the next is due 5 to 10 s later (jitter).
    wait_for("attempt 1", || {
        (r.got.lock().unwrap().len() == 1).then_some(())
    })
    .await;
    let d = wait_for_attempts(&ctx, 1).await;
    let next = d.next_attempt_at.unwrap();
    assert!(
        next >= t0 + chrono::Duration::seconds(5) && next <= t0 + chrono::Duration::seconds(10)
    );
    assert_eq!(
        (d.status, d.last_code),
        (DeliveryStatus::Pending, Some(500))
    );
    // Real time passes, the clock does not: nothing is sent.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(r.got.lock().unwrap().len(), 1);
    // The clock reaches the backoff: attempt 2, the same delivery, signed
    // with the clock's time.
    clock.set(next);
    wait_for("attempt 2", || {
        (r.got.lock().unwrap().len() == 2).then_some(())
    })
    .await;
    let got = r.got.lock().unwrap().clone();
    assert_eq!(got[0].0, got[1].0);
    assert!(
        got[1].1.starts_with(&format!("t={},v1=", next.timestamp())),
        "{got:?}"
    );
    let d = wait_for_attempts(&ctx, 2).await;
    // A day later the next attempt would fall past the window: failed.
    clock.set(t0 + chrono::Duration::hours(24));
    wait_for("attempt 3", || {
        (r.got.lock().unwrap().len() == 3).then_some(())
    })
    .await;
    let d3 = wait_for_attempts(&ctx, 3).await;
    assert_eq!(
        (d3.status, d3.next_attempt_at),
        (DeliveryStatus::Failed, None)
    );
    assert_eq!(d3.id, d.id);

    // Redelivered to a receiver that is back: delivered, same id.
    r.status.store(204, Ordering::SeqCst);
    let mut tx = ctx.store.begin().await.unwrap();
    deliveries::redeliver(tx.as_mut(), d.id, clock.now())
        .await
        .unwrap();
    ctx.commit(tx).await.unwrap();
    ctx.wakeups.deliveries.notify_one();
    let d4 = wait_for_attempts(&ctx, 4).await;
    assert_eq!(
        (d4.status, d4.last_code),
        (DeliveryStatus::Delivered, Some(204))
    );
    assert_eq!(r.got.lock().unwrap()[3].0, d.id.to_string());
    stop.cancel();
    sender.await.unwrap();
}

async fn wait_for_attempts(ctx: &Ctx, n: i32) -> Delivery {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let d = the_delivery(ctx).await;
        if d.attempts == n {
            return d;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "attempts stayed {}",
            d.attempts
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A receiver whose `/hook` answers `code` with a `Location` pointing at
/// its own `/sink` (which records what reaches it, method and headers).
async fn redirecting(code: u16) -> (String, Arc<Mutex<Vec<String>>>) {
    let sink: Arc<Mutex<Vec<String>>> = Arc::default();
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let got = sink.clone();
    let record = move |method: axum::http::Method, headers: HeaderMap| {
        let got = got.clone();
        async move {
            got.lock().unwrap().push(format!(
                "{method} pam-signature={:?}",
                headers.get("pam-signature")
            ));
            StatusCode::NO_CONTENT
        }
    };
    let location = format!("http://user:hunter2@{addr}/sink");
    let app = axum::Router::new()
        .route(
            "/hook",
            axum::routing::post(move || async move {
                (
                    StatusCode::from_u16(code).unwrap(),
                    [(axum::http::header::LOCATION, location)],
                )
            }),
        )
        .route("/sink", axum::routing::any(record));
    tokio::spawn(async move { axum::serve(l, app).await });
    (format!("http://{addr}/hook"), sink)
}

/// A Ctx on the manual clock with a Webhook `ci` to `url` and one event
/// it matches queued; the sender started.
async fn one_delivery(url: &str, egress: Egress) -> (Ctx, CancellationToken, tempfile::TempDir) {
    let keys = tempfile::tempdir().unwrap();
    let dir = keys.path().join("hooks/signing");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("key"), b"k").unwrap();
    let t0 = Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap();
    let mut ctx = Ctx::new(
        Arc::new(MemStore::new()),
        Arc::new(ManualClock::new(t0)),
        Thresholds::default(),
    );
    ctx.webhooks = Arc::new(WebhookSettings {
        keys: Arc::new(KeyFiles::new(Some(keys.path().to_path_buf()))),
        timeout: Duration::from_secs(5),
        egress,
        ..WebhookSettings::default()
    });
    create_webhook(&ctx, url, t0).await;
    let mut tx = ctx.store.begin().await.unwrap();
    tx.append_event("project.created", json!({"project": "web"}), t0)
        .await
        .unwrap();
    ctx.commit(tx).await.unwrap();
    let stop = CancellationToken::new();
    tokio::spawn(pam_controller::reconcile::webhooks::run(
        ctx.clone(),
        stop.clone(),
    ));
    (ctx, stop, keys)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_a_failed_attempt_and_is_not_followed() {
    for code in [302, 307] {
        let (url, sink) = redirecting(code).await;
        let (ctx, stop, _keys) =
            one_delivery(&url, Egress::allowing(&["127.0.0.0/8"]).unwrap()).await;
        let d = wait_for_attempts(&ctx, 1).await;
        assert_eq!(
            (d.status, d.last_code),
            (DeliveryStatus::Pending, Some(i32::from(code)))
        );
        let sink_url = url.replace("/hook", "/sink");
        assert!(
            d.last_error.starts_with(&format!(
                "HTTP {code}: redirect to {sink_url:?} not followed"
            )),
            "{}",
            d.last_error
        );
        assert!(!d.last_error.contains("hunter2"), "{}", d.last_error);
        // Neither the signed body (307) nor the headers (302) went on.
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(sink.lock().unwrap().clone(), Vec::<String>::new());
        stop.cancel();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_addresses_are_refused_unless_allowed() {
    let r = Receiver::default();
    r.status.store(204, Ordering::SeqCst);
    let url = start(&r).await;
    let port = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/hook");
    // An IP literal (never resolved), its IPv4-mapped form, and a name
    // that resolves to loopback (checked as resolved).
    for (url, shown) in [
        (url.clone(), "127.0.0.1".to_string()),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/hook"),
            "::ffff:127.0.0.1".to_string(),
        ),
        (format!("http://localhost:{port}/hook"), String::new()),
    ] {
        let (ctx, stop, _keys) = one_delivery(&url, Egress::default()).await;
        let d = wait_for_attempts(&ctx, 1).await;
        assert_eq!((d.status, d.last_code), (DeliveryStatus::Pending, None));
        assert!(
            d.last_error.contains(&format!("address {shown}"))
                && d.last_error
                    .contains("is not allowed: loopback; see [webhooks] allow_networks"),
            "{url}: {}",
            d.last_error
        );
        stop.cancel();
    }
    assert_eq!(r.got.lock().unwrap().len(), 0, "nothing reached loopback");
    // Allowed: delivered.
    let (ctx, stop, _keys) = one_delivery(
        &format!("http://localhost:{port}/hook"),
        Egress::allowing(&["127.0.0.0/8", "::1/128"]).unwrap(),
    )
    .await;
    let d = wait_for_attempts(&ctx, 1).await;
    assert_eq!(
        (d.status, d.last_code),
        (DeliveryStatus::Delivered, Some(204))
    );
    assert_eq!(r.got.lock().unwrap().len(), 1);
    stop.cancel();
}
