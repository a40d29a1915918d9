//! The webhook sender on the injected clock (issue 19): a failing
//! receiver is retried only when the clock reaches the backoff, the
//! delivery fails once the next attempt would fall past the retry window,
//! and a redelivery sends the same delivery again. MemStore, a real HTTP
//! receiver on loopback, the clock moved by the test.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, StatusCode};
use chrono::{TimeZone, Utc};
use pam_controller::clock::{Clock, ManualClock};
use pam_controller::ctx::{Ctx, Thresholds};
use pam_controller::rules::meta::Desired;
use pam_controller::rules::webhooks::deliveries::{self, RetryPolicy};
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
    });

    // A Webhook, then an event it matches (and one it does not).
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
    ctx.deliveries.notify_one();
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
