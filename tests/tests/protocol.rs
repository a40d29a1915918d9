//! pamd and pam-worker tell each other their worker protocol at
//! registration, and each refuses a peer outside what it serves with an
//! error naming the side to upgrade — a real pamd refusing a registration
//! from the future, and a real pam-worker stopping on a stand-in pamd that
//! speaks a newer protocol (instead of retrying forever).

use std::time::Duration;

use pam_manifests::protocol::PROTOCOL_VERSION;
use pam_tests::worker::{create_worker_token, Worker, FAST_WORKER_TOML};
use pam_tests::{eventually, Pamd, PamdOptions};
use serde_json::{json, Value};

fn registration(protocol: Option<u32>) -> Value {
    let mut r = json!({
        "name": "h1", "platform": "linux", "instance_id": uuid::Uuid::new_v4(),
        "capacity": 1, "version": "test",
    });
    if let Some(p) = protocol {
        r["protocol"] = json!(p);
    }
    r
}

#[tokio::test]
async fn pamd_refuses_a_worker_of_another_protocol_and_says_which_side_to_upgrade() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let token = create_worker_token(&pamd, "h1").await.unwrap();
    let register = |body: Value| {
        let (http, url, token) = (pamd.http(), pamd.url.clone(), token.clone());
        async move {
            let r = http
                .post(format!("{url}/api/v1/workers/register"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        }
    };
    let (status, body) = register(registration(Some(PROTOCOL_VERSION + 1))).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "protocol_mismatch", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("upgrade pamd to the worker's release"),
        "{message}"
    );
    let (status, body) = register(registration(Some(0))).await;
    assert_eq!(status, 400, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.ends_with("upgrade the worker to pamd's release"),
        "{message}"
    );
    // Nothing of a refused worker is written.
    assert_eq!(pamd.get("/api/v1/hosts").await.unwrap()["items"], json!([]));
    // A worker that says nothing (before the field) speaks 1; pamd says
    // its own.
    let (status, body) = register(registration(None)).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["protocol"], PROTOCOL_VERSION, "{body}");
}

#[tokio::test]
async fn a_worker_stops_on_a_pamd_of_a_newer_protocol_saying_so() {
    // A stand-in pamd that answers every registration as a pamd of the
    // next protocol would.
    let app = axum::Router::new().route(
        "/api/v1/workers/register",
        axum::routing::post(|| async {
            axum::Json(json!({
                "host_id": uuid::Uuid::new_v4(), "heartbeat_seconds": 1,
                "protocol": PROTOCOL_VERSION + 1,
            }))
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut w = Worker::start_with_token(&url, "pam_w_test", "h1", FAST_WORKER_TOML).unwrap();
    let status = eventually(Duration::from_secs(20), "the worker stops", || {
        let exited = w.exited();
        async move { exited }
    })
    .await;
    assert!(!status.success(), "{status:?}");
    let log = w.log();
    assert!(
        log.contains("upgrade the worker to pamd's release"),
        "{log}"
    );
}
