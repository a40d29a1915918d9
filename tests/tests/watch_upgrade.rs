//! Issue 33: the worker watch over an upgraded connection (docs/api.md,
//! "Worker watch"), against a real pamd over TCP.
//!
//! - `Upgrade: pam-watch` is answered `101 Switching Protocols`, and the
//!   connection then carries the watch's SSE frames with no HTTP framing:
//!   the resync frame first, a `desired` frame when the host's set
//!   changes, and the end of the connection when the token is revoked.
//! - Without the header the same watch is a plain `200 text/event-stream`.
//! - A real pam-worker upgrades its watch (seen on the wire by a loopback
//!   proxy) and runs what pamd claims for it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pam_manifests::protocol::{RegisterRequest, PROTOCOL_VERSION, WATCH_UPGRADE};
use pam_manifests::state::Platform;
use pam_tests::worker::{
    apply, create_worker_token, fake, project_yaml, run_yaml, wait_online, wait_phase, Worker,
};
use pam_tests::{Pamd, PamdOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(60);

/// Registers host `name` with `token`, as a worker does.
async fn register(pamd: &Pamd, token: &str, name: &str) {
    let req = RegisterRequest {
        name: name.into(),
        platform: Platform::Linux,
        instance_id: uuid::Uuid::new_v4(),
        capacity: 4,
        labels: Default::default(),
        version: "test".into(),
        capabilities: None,
        protocol: Some(PROTOCOL_VERSION),
    };
    let r = pamd
        .http()
        .post(format!("{}/api/v1/workers/register", pamd.url))
        .bearer_auth(token)
        .json(&req)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "register: {}", r.status());
}

fn watch_request(pamd: &Pamd, token: &str, upgrade: bool) -> reqwest::RequestBuilder {
    let req = pamd
        .http()
        .get(format!("{}/api/v1/workers/watch", pamd.url))
        .bearer_auth(token);
    if upgrade {
        req.header(reqwest::header::CONNECTION, "upgrade")
            .header(reqwest::header::UPGRADE, WATCH_UPGRADE)
    } else {
        req
    }
}

/// Reads `io` until `text` has come (within `T`); everything read.
async fn read_until(io: &mut reqwest::Upgraded, text: &str) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(T, async {
        while !String::from_utf8_lossy(&seen).contains(text) {
            let n = io.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "the watch ended before {text:?}: {:?}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {text:?} within {T:?}"));
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn an_upgraded_watch_carries_the_frames_and_ends_on_revocation() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let token = create_worker_token(&pamd, "up-1").await.unwrap();
    register(&pamd, &token, "up-1").await;

    let resp = watch_request(&pamd, &token, true).send().await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::SWITCHING_PROTOCOLS);
    assert_eq!(
        resp.headers()
            .get(reqwest::header::UPGRADE)
            .and_then(|v| v.to_str().ok()),
        Some(WATCH_UPGRADE)
    );
    let mut io = resp.upgrade().await.unwrap();
    // Opened without Last-Event-ID: the resync frame, as plain SSE text.
    let first = read_until(&mut io, "\n\n").await;
    assert!(
        first.starts_with("id: ") && first.contains("\nevent: desired\n"),
        "not a desired frame: {first:?}"
    );

    // A run claimed for the host changes its set: another frame.
    apply(&pamd, &project_yaml());
    let tmp = tempfile::tempdir().unwrap();
    apply(
        &pamd,
        &run_yaml("up-run", tmp.path(), &fake(&["--lines", "1"]), ""),
    );
    let next = read_until(&mut io, "event: desired").await;
    assert!(next.contains("id: "), "{next:?}");

    // Revoking the token ends the upgraded stream: the connection closes.
    let tokens = pamd.get("/api/v1/tokens").await.unwrap();
    let id = tokens["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["host"] == "up-1")
        .and_then(|t| t["id"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no token of up-1 in {tokens}"));
    let r = pamd
        .http()
        .delete(format!("{}/api/v1/tokens/{id}", pamd.url))
        .bearer_auth(&pamd.token)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "revoke: {}", r.status());
    let mut buf = [0u8; 1024];
    let ended = tokio::time::timeout(T, async {
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the upgraded watch outlived its token");
    // And the reconnect is refused.
    let again = watch_request(&pamd, &token, true).send().await.unwrap();
    assert_eq!(again.status(), reqwest::StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn without_the_upgrade_header_the_watch_is_plain_sse() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let token = create_worker_token(&pamd, "plain-1").await.unwrap();
    register(&pamd, &token, "plain-1").await;
    let mut resp = watch_request(&pamd, &token, false).send().await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::OK);
    assert_eq!(
        resp.headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    let chunk = tokio::time::timeout(T, resp.chunk())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let text = String::from_utf8_lossy(&chunk);
    assert!(text.contains("event: desired"), "{text:?}");
}

/// Forwards loopback connections to `upstream`, counting responses that
/// switch protocols to the watch's.
async fn counting_proxy(upstream: String, upgraded: Arc<AtomicUsize>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (upstream, upgraded) = (upstream.clone(), upgraded.clone());
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let up = tokio::spawn(async move { tokio::io::copy(&mut cr, &mut sw).await });
                let mut buf = vec![0u8; 16 * 1024];
                while let Ok(n) = sr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]);
                    if text.starts_with("HTTP/1.1 101")
                        && text
                            .to_ascii_lowercase()
                            .contains(&format!("upgrade: {WATCH_UPGRADE}"))
                    {
                        upgraded.fetch_add(1, Ordering::SeqCst);
                    }
                    if cw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
                up.abort();
            });
        }
    });
    url
}

#[tokio::test]
async fn pam_worker_upgrades_its_watch_and_runs_what_is_claimed() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let upgraded = Arc::new(AtomicUsize::new(0));
    let upstream = pamd.url.trim_start_matches("http://").to_string();
    let url = counting_proxy(upstream, upgraded.clone()).await;
    let token = create_worker_token(&pamd, "w-up").await.unwrap();
    // No safety net but the watch: the run is spawned because a frame
    // came over the upgraded connection.
    let toml = "heartbeat_seconds = 600\ntick_seconds = 3600\nresync_seconds = 3600\n";
    let w = Worker::start_with_token(&url, &token, "w-up", toml).unwrap();
    wait_online(&pamd, "w-up").await;
    apply(&pamd, &project_yaml());
    apply(
        &pamd,
        &run_yaml("w-up-run", w.tmp(), &fake(&["--lines", "1"]), ""),
    );
    wait_phase(&pamd, "w-up-run", "exited", T).await;
    assert!(
        upgraded.load(Ordering::SeqCst) >= 1,
        "pam-worker's watch was not upgraded"
    );
}
