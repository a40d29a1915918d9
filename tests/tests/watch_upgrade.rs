//! The worker watch over an upgraded connection (docs/api.md,
//! "Worker watch"), against a real pamd over TCP.
//!
//! - `Upgrade: pam-watch` is answered `101 Switching Protocols`, and the
//!   connection then carries the watch's SSE frames with no HTTP framing:
//!   the resync frame first, a `desired` frame when the host's set
//!   changes, and the end of the connection when the token is revoked.
//! - Without the header the same watch is a plain `200 text/event-stream`.
//! - A real pam-worker upgrades its watch (seen on the wire by a loopback
//!   proxy) and runs what pamd claims for it.
//! - The `101` says pamd takes heartbeats and desired-set reads on the
//!   watch: each line is answered in order by a frame (the desired set, or
//!   the error); a real pam-worker sends them there, not as HTTP
//!   requests, its host stays online on them, and its run is started.
//! - A read no frame asked for (the resync) gets the same set from the
//!   heartbeat batch and does not write the host.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use pam_manifests::protocol::{
    DesiredSet, RegisterRequest, WatchError, PROTOCOL_VERSION, WATCH_ACCEPTS, WATCH_UPGRADE,
};
use pam_manifests::state::Platform;
use pam_tests::worker::{
    apply, create_worker_token, fake, project_yaml, run_yaml, wait_online, wait_phase, Worker,
};
use pam_tests::{Pamd, PamdOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const T: Duration = Duration::from_secs(60);

/// Registers host `name` with `token`, as a worker does: its instance id.
async fn register(pamd: &Pamd, token: &str, name: &str) -> uuid::Uuid {
    let instance_id = uuid::Uuid::new_v4();
    let req = RegisterRequest {
        name: name.into(),
        platform: Platform::Linux,
        instance_id,
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
    instance_id
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

/// Opens the watch with `Upgrade: pam-watch`: the `101`.
async fn upgraded(pamd: &Pamd, token: &str) -> reqwest::Response {
    let resp = watch_request(pamd, token, true).send().await.unwrap();
    assert_eq!(resp.status(), reqwest::StatusCode::SWITCHING_PROTOCOLS);
    resp
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

/// Whether pamd ends the connection within `T` (what comes meanwhile is
/// read and dropped).
async fn ends(io: &mut reqwest::Upgraded) -> bool {
    let mut buf = [0u8; 1024];
    tokio::time::timeout(T, async {
        loop {
            match io.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn an_upgraded_watch_carries_the_frames_and_ends_on_revocation() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let token = create_worker_token(&pamd, "up-1").await.unwrap();
    register(&pamd, &token, "up-1").await;

    let resp = upgraded(&pamd, &token).await;
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
    assert!(ends(&mut io).await, "the upgraded watch outlived its token");
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

/// What [`counting_proxy`] saw.
#[derive(Default)]
struct Seen {
    /// Responses that switched protocols to the watch's.
    upgraded: AtomicUsize,
    /// `POST /api/v1/workers/heartbeat` requests.
    posted: AtomicUsize,
    /// Heartbeats written on a watch.
    on_watch: AtomicUsize,
    /// `GET /api/v1/workers/desired` requests.
    desired_got: AtomicUsize,
    /// Desired-set reads written on a watch.
    desired_on_watch: AtomicUsize,
}

/// Forwards loopback connections to `upstream`, counting what it sees.
async fn counting_proxy(upstream: String, seen: Arc<Seen>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let (upstream, seen) = (upstream.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let sent = seen.clone();
                let up = tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    while let Ok(n) = cr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        let text = String::from_utf8_lossy(&buf[..n]);
                        let posts = text.matches("POST /api/v1/workers/heartbeat ").count();
                        sent.posted.fetch_add(posts, Ordering::SeqCst);
                        let lines = text.matches("{\"heartbeat\":").count();
                        sent.on_watch.fetch_add(lines, Ordering::SeqCst);
                        let gets = text.matches("GET /api/v1/workers/desired ").count();
                        sent.desired_got.fetch_add(gets, Ordering::SeqCst);
                        let reads = text.matches("{\"desired_set\":").count();
                        sent.desired_on_watch.fetch_add(reads, Ordering::SeqCst);
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
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
                        seen.upgraded.fetch_add(1, Ordering::SeqCst);
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
    let seen = Arc::new(Seen::default());
    let upstream = pamd.url.trim_start_matches("http://").to_string();
    let url = counting_proxy(upstream, seen.clone()).await;
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
        seen.upgraded.load(Ordering::SeqCst) >= 1,
        "pam-worker's watch was not upgraded"
    );
}

#[tokio::test]
async fn heartbeats_on_the_watch_are_answered_in_order() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let token = create_worker_token(&pamd, "hb-1").await.unwrap();
    let instance = register(&pamd, &token, "hb-1").await;
    let resp = upgraded(&pamd, &token).await;
    assert_eq!(
        resp.headers()
            .get(WATCH_ACCEPTS)
            .and_then(|v| v.to_str().ok()),
        Some("heartbeat, desired_set")
    );
    let mut io = resp.upgrade().await.unwrap();
    read_until(&mut io, "event: desired").await;
    let before = pam_tests::worker::host(&pamd, "hb-1").await["status"]["lastSeenAt"].clone();
    assert!(
        before.is_string(),
        "no lastSeenAt after registering: {before}"
    );
    // lastSeenAt is in whole seconds.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // A heartbeat, a line that is not a request, a read of the desired
    // set: three answers, in that order.
    let hb = serde_json::json!({"heartbeat": {"instance_id": instance, "running": []}});
    let lines = format!("{hb}\nnot json\n{{\"desired_set\":{{}}}}\n");
    io.write_all(lines.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 1024];
    tokio::time::timeout(T, async {
        while String::from_utf8_lossy(&got).matches("\n\n").count() < 3 {
            let n = io.read(&mut buf).await.unwrap();
            assert!(
                n > 0,
                "the watch ended: {:?}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("three answers");
    let text = String::from_utf8_lossy(&got).into_owned();
    let frames: Vec<&str> = text
        .split("\n\n")
        .filter(|f| !f.is_empty() && !f.starts_with(':'))
        .collect();
    let event = |f: &str| {
        f.lines()
            .find_map(|l| l.strip_prefix("event: "))
            .map(str::to_string)
    };
    let data = |f: &str| {
        f.lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap()
            .to_string()
    };
    assert_eq!(
        frames.iter().map(|f| event(f)).collect::<Vec<_>>(),
        [
            Some("heartbeat".into()),
            Some("error".into()),
            Some("desired_set".into())
        ],
        "{text:?}"
    );
    let set: DesiredSet = serde_json::from_str(&data(frames[0])).unwrap();
    assert!(set.runs.is_empty());
    let e: WatchError = serde_json::from_str(&data(frames[1])).unwrap();
    assert_eq!((e.status, e.error.code.as_str()), (400, "bad_request"));
    let set: DesiredSet = serde_json::from_str(&data(frames[2])).unwrap();
    assert!(set.runs.is_empty());
    // Written: the host was seen again.
    let after = pam_tests::worker::host(&pamd, "hb-1").await["status"]["lastSeenAt"].clone();
    assert_ne!(
        before, after,
        "the heartbeats on the watch were not written"
    );

    // A line longer than a request may be (1 MiB) ends the connection.
    let long = vec![b'x'; 2 * 1024 * 1024];
    let _ = io.write_all(&long).await;
    assert!(ends(&mut io).await, "an endless line did not end the watch");
}

#[tokio::test]
async fn pam_worker_heartbeats_on_its_watch() {
    let pamd = Pamd::start(PamdOptions {
        config_toml: pam_tests::worker::FAST_PAMD_TOML.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    let seen = Arc::new(Seen::default());
    let upstream = pamd.url.trim_start_matches("http://").to_string();
    let url = counting_proxy(upstream, seen.clone()).await;
    let token = create_worker_token(&pamd, "w-hb").await.unwrap();
    let w = Worker::start_with_token(&url, &token, "w-hb", "heartbeat_seconds = 1\n").unwrap();
    wait_online(&pamd, "w-hb").await;
    let posted = seen.posted.load(Ordering::SeqCst);
    // pamd takes a host offline 4 s after its last heartbeat: online after
    // 8 s is heartbeats written, and they went on the watch.
    tokio::time::sleep(Duration::from_secs(8)).await;
    let h = pam_tests::worker::host(&pamd, "w-hb").await;
    assert_eq!(h["status"]["phase"], "online", "{h}");
    let on_watch = seen.on_watch.load(Ordering::SeqCst);
    assert!(on_watch >= 5, "{on_watch} heartbeats on the watch in 8 s");
    assert_eq!(
        seen.posted.load(Ordering::SeqCst),
        posted,
        "heartbeats were posted while the watch took them"
    );
    // A run: the frame's read of the desired set goes on the watch too.
    let got = seen.desired_got.load(Ordering::SeqCst);
    apply(&pamd, &project_yaml());
    apply(
        &pamd,
        &run_yaml("w-hb-run", w.tmp(), &fake(&["--lines", "1"]), ""),
    );
    wait_phase(&pamd, "w-hb-run", "exited", T).await;
    assert!(seen.desired_on_watch.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        seen.desired_got.load(Ordering::SeqCst),
        got,
        "the desired set was read by GET while the watch took the read"
    );
}

/// Writes a read of the desired set on the watch and reads up to its
/// answer: the set.
async fn read_desired(io: &mut reqwest::Upgraded) -> DesiredSet {
    io.write_all(b"{\"desired_set\":{}}\n").await.unwrap();
    let text = read_until(io, "event: desired_set\ndata: ").await;
    let mut rest = text
        .split("event: desired_set\ndata: ")
        .nth(1)
        .unwrap()
        .to_string();
    while !rest.contains('\n') {
        let mut buf = [0u8; 1024];
        let n = io.read(&mut buf).await.unwrap();
        assert!(n > 0, "the watch ended in an answer");
        rest.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    serde_json::from_str(rest.lines().next().unwrap()).unwrap()
}

/// A read of the desired set no frame asked for (a worker's safety-net
/// resync) is answered with the next heartbeat batch: the same set as a
/// read a frame asked for, and the host is not written (a read is not a
/// heartbeat).
#[tokio::test]
async fn a_resync_read_on_the_watch_is_the_set_and_writes_nothing() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let token = create_worker_token(&pamd, "rs-1").await.unwrap();
    register(&pamd, &token, "rs-1").await;
    let resp = upgraded(&pamd, &token).await;
    let mut io = resp.upgrade().await.unwrap();
    read_until(&mut io, "event: desired\n").await;

    apply(&pamd, &project_yaml());
    let tmp = tempfile::tempdir().unwrap();
    apply(
        &pamd,
        &run_yaml("rs-run", tmp.path(), &fake(&["--lines", "1"]), ""),
    );
    // The claim's frame, then the read it asks for.
    read_until(&mut io, "event: desired\n").await;
    let caught_up = read_desired(&mut io).await;
    assert_eq!(caught_up.runs.len(), 1, "{caught_up:?}");
    let seen = pam_tests::worker::host(&pamd, "rs-1").await["status"]["lastSeenAt"].clone();
    // lastSeenAt is in whole seconds.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // No frame since: a resync.
    let resynced = read_desired(&mut io).await;
    let ids = |s: &DesiredSet| {
        s.runs
            .iter()
            .map(|r| (r.run_id, r.attempt, r.session_name.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&resynced), ids(&caught_up));
    assert_eq!(
        pam_tests::worker::host(&pamd, "rs-1").await["status"]["lastSeenAt"],
        seen,
        "a read of the desired set wrote the host"
    );
}
