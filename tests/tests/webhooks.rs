//! Webhooks end to end: real pamd, real PostgreSQL, and an HTTP receiver
//! started by the test that verifies the signature of every delivery it
//! gets. A receiver failing its first 3 deliveries gets the 4th with the
//! same delivery id; pamd SIGKILLed with 500 deliveries queued delivers
//! all of them after restart, duplicates only under the same id, each
//! webhook in seq order; a receiver that hangs delays no other webhook;
//! a bad Webhook manifest is refused at its file:line and writes nothing;
//! a receiver on loopback is refused unless `[webhooks] allow_networks`
//! allows it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use hmac::{Hmac, Mac};
use pam_tests::{eventually, fails, ok, Pamd, PamdOptions};
use serde_json::Value;
use sha2::Sha256;

const T: Duration = Duration::from_secs(25);
const SECRET: &[u8] = b"s3cr3t-signing-key";

/// What one endpoint of the receiver does.
#[derive(Default, Clone)]
struct Mode {
    /// Answer 500 to this many requests first.
    fail_first: usize,
    /// Answer 503 to everything while set.
    down: bool,
    /// Never answer.
    hang: bool,
}

/// One request the receiver got.
#[derive(Debug, Clone)]
struct Got {
    delivery: String,
    seq: i64,
    topic: String,
    /// What the receiver answered.
    status: u16,
}

#[derive(Default)]
struct Inner {
    modes: HashMap<String, Mode>,
    got: HashMap<String, Vec<Got>>,
    /// Requests whose signature did not verify (or whose header and
    /// body disagree).
    bad: Vec<String>,
}

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Inner>>);

impl Receiver {
    fn set(&self, endpoint: &str, mode: Mode) {
        self.0.lock().unwrap().modes.insert(endpoint.into(), mode);
    }
    fn got(&self, endpoint: &str) -> Vec<Got> {
        self.0
            .lock()
            .unwrap()
            .got
            .get(endpoint)
            .cloned()
            .unwrap_or_default()
    }
    fn bad(&self) -> Vec<String> {
        self.0.lock().unwrap().bad.clone()
    }
}

/// Checks `Pam-Signature: t=…,v1=…` against HMAC-SHA256(SECRET, "t.body")
/// and a fresh `t`, as docs/api.md tells receivers to.
fn verify(headers: &HeaderMap, body: &[u8]) -> Result<(), String> {
    let sig = headers
        .get("pam-signature")
        .and_then(|v| v.to_str().ok())
        .ok_or("no Pam-Signature")?;
    let mut t = None;
    let mut v1 = None;
    for part in sig.split(',') {
        match part.split_once('=') {
            Some(("t", x)) => t = x.parse::<i64>().ok(),
            Some(("v1", x)) => v1 = Some(x.to_string()),
            _ => {}
        }
    }
    let (t, v1) = (t.ok_or("no t")?, v1.ok_or("no v1")?);
    let now = chrono::Utc::now().timestamp();
    if (now - t).abs() > 300 {
        return Err(format!("stale t={t} (now {now})"));
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(SECRET).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    let want = hex::decode(&v1).map_err(|e| e.to_string())?;
    mac.verify_slice(&want).map_err(|_| format!("bad v1 {v1}"))
}

async fn receive(
    State(r): State<Receiver>,
    Path(endpoint): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let delivery = json["id"].as_str().unwrap_or("").to_string();
    let header_id = headers
        .get("pam-delivery")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let checked = verify(&headers, &body).and_then(|()| {
        if header_id == delivery && !delivery.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "Pam-Delivery {header_id:?} is not the body's id {delivery:?}"
            ))
        }
    });
    let mode = {
        let mut g = r.0.lock().unwrap();
        if let Err(e) = checked {
            g.bad.push(e);
        }
        g.modes.get(&endpoint).cloned().unwrap_or_default()
    };
    if mode.hang {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    let mut g = r.0.lock().unwrap();
    let seen = g.got.get(&endpoint).map_or(0, Vec::len);
    let status = if mode.down {
        StatusCode::SERVICE_UNAVAILABLE
    } else if seen < mode.fail_first {
        StatusCode::INTERNAL_SERVER_ERROR
    } else {
        StatusCode::NO_CONTENT
    };
    g.got.entry(endpoint).or_default().push(Got {
        delivery,
        seq: json["seq"].as_i64().unwrap_or(-1),
        topic: json["topic"].as_str().unwrap_or("").to_string(),
        status: status.as_u16(),
    });
    status
}

/// Starts the receiver on a free port; its base URL.
async fn start_receiver(r: &Receiver) -> String {
    let app = axum::Router::new()
        .route("/{endpoint}", axum::routing::post(receive))
        .with_state(r.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// pamd with the signing key at `<keys>/hooks/signing/key`, fast
/// retries, and loopback allowed (the receivers are on 127.0.0.1; the
/// egress rule refuses it by default).
async fn pamd(keys: &std::path::Path, extra: &str) -> Pamd {
    start_pamd(
        keys,
        &format!("allow_networks = [\"127.0.0.0/8\"]\n{extra}"),
    )
    .await
}

/// [`pamd`] with `[webhooks]` as `extra` says (no networks allowed unless
/// it allows them).
async fn start_pamd(keys: &std::path::Path, extra: &str) -> Pamd {
    let dir = keys.join("hooks").join("signing");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("key"), SECRET).unwrap();
    Pamd::start(PamdOptions {
        config_toml: format!(
            "[webhooks]\nsigning_keys_dir = {:?}\nretry_initial_ms = 100\nretry_max_seconds = 1\n{extra}",
            keys.display().to_string()
        ),
        ..PamdOptions::default()
    })
    .await
    .unwrap()
}

fn webhook_yaml(name: &str, url: &str, topics: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Webhook\nmetadata:\n  name: {name}\nspec:\n  url: {url}\n  topics: {topics}\n  signingSecretRef:\n    project: hooks\n    name: signing\n    key: key\n"
    )
}

fn project_yaml(name: &str) -> String {
    format!("apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: {name}\nspec: {{}}\n---\n")
}

fn apply(pamd: &Pamd, yaml: &str) {
    ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(yaml)));
}

async fn deliveries(pamd: &Pamd, webhook: &str) -> Vec<Value> {
    let out = ok(&pamd.pamctl(&["get", "webhookdeliveries", webhook, "-o", "json"]));
    let v: Value = serde_json::from_str(&out).unwrap();
    v["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_receiver_gets_the_same_delivery_until_it_succeeds() {
    let keys = tempfile::tempdir().unwrap();
    let r = Receiver::default();
    let base = start_receiver(&r).await;
    r.set(
        "flaky",
        Mode {
            fail_first: 3,
            ..Mode::default()
        },
    );
    let pamd = pamd(keys.path(), "").await;
    apply(
        &pamd,
        &webhook_yaml("flaky", &format!("{base}/flaky"), "[project.created]"),
    );
    apply(&pamd, &project_yaml("web"));

    let got = eventually(T, "the 4th attempt to succeed", || async {
        let got = r.got("flaky");
        (got.len() >= 4).then_some(got)
    })
    .await;
    let statuses: Vec<u16> = got.iter().map(|g| g.status).collect();
    assert_eq!(statuses, [500, 500, 500, 204], "{got:?}");
    assert!(
        got.iter().all(|g| g.delivery == got[0].delivery),
        "one delivery id: {got:?}"
    );
    assert!(got.iter().all(|g| g.topic == "project.created"));
    assert!(
        r.bad().is_empty(),
        "every signature verifies: {:?}",
        r.bad()
    );

    let d = eventually(T, "the delivery recorded as delivered", || async {
        let ds = deliveries(&pamd, "flaky").await;
        ds.into_iter().find(|d| d["status"] == "delivered")
    })
    .await;
    assert_eq!(d["id"].as_str(), Some(got[0].delivery.as_str()));
    assert_eq!(
        (d["attempts"].as_i64(), d["lastCode"].as_i64()),
        (Some(4), Some(204))
    );
    assert_eq!(d["payload"]["object"]["kind"], "Project");
    assert_eq!(d["payload"]["link"], "/api/v1/projects/web");
    let table = ok(&pamd.pamctl(&["get", "webhookdeliveries"]));
    let header = table.lines().next().unwrap();
    for col in ["STATUS", "ATTEMPTS", "LAST-CODE"] {
        assert!(header.contains(col), "{table}");
    }
    assert!(table.contains("delivered"), "{table}");
    // Nothing more is sent; redelivery sends the same delivery again.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(r.got("flaky").len(), 4);
    let out = ok(&pamd.pamctl(&["webhook", "redeliver", &got[0].delivery]));
    assert!(out.contains("queued again"), "{out}");
    let again = eventually(T, "the redelivery", || async {
        let got = r.got("flaky");
        (got.len() == 5).then(|| got[4].clone())
    })
    .await;
    assert_eq!(
        (again.delivery.as_str(), again.status),
        (got[0].delivery.as_str(), 204)
    );

    // The receiver has its answer a moment before the sender records it
    // (the pending gauge is read from the deliveries' rows at the scrape).
    let settled = r#"pam_webhook_deliveries_pending{webhook="flaky"} 0"#;
    let metrics = eventually(T, "the redelivery recorded", || async {
        let text = pamd
            .http()
            .get(format!("{}/metrics", pamd.url))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.contains(settled).then_some(text)
    })
    .await;
    assert!(
        metrics.contains(r#"pam_webhook_deliveries_total{webhook="flaky",outcome="delivered"} 2"#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"pam_webhook_deliveries_total{webhook="flaky",outcome="retry"} 3"#),
        "{metrics}"
    );
    assert!(metrics.contains(settled), "{metrics}");
    assert!(
        metrics.contains("pam_webhook_attempt_duration_seconds_bucket"),
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_queued_before_a_sigkill_are_all_delivered_after_restart() {
    let keys = tempfile::tempdir().unwrap();
    let r = Receiver::default();
    let base = start_receiver(&r).await;
    r.set(
        "ci",
        Mode {
            down: true,
            ..Mode::default()
        },
    );
    let mut pamd = pamd(keys.path(), "").await;
    apply(
        &pamd,
        &webhook_yaml("ci", &format!("{base}/ci"), "[work_item.created]"),
    );
    // 500 tasks in one apply: 500 events, 500 deliveries, one commit.
    let mut yaml = project_yaml("bulk");
    for i in 0..500 {
        yaml.push_str(&format!(
            "apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t{i}\n  project: bulk\nspec:\n  title: T{i}\n---\n"
        ));
    }
    apply(&pamd, &yaml);
    let hook = pamd.get("/api/v1/webhooks/ci").await.unwrap();
    assert_eq!(hook["status"]["pending"], 500, "{hook}");

    // The receiver comes back; pamd is killed part way through.
    r.set("ci", Mode::default());
    eventually(T, "some deliveries", || async {
        let n = r.got("ci").iter().filter(|g| g.status == 204).count();
        (n >= 50).then_some(())
    })
    .await;
    pamd.kill9();
    let before = r.got("ci").iter().filter(|g| g.status == 204).count();
    assert!(before < 500, "killed before the end ({before} delivered)");
    pamd.start_again().await.unwrap();

    let got = eventually(T, "all 500 delivered after the restart", || async {
        let got = r.got("ci");
        let mut seqs: Vec<i64> = got
            .iter()
            .filter(|g| g.status == 204)
            .map(|g| g.seq)
            .collect();
        seqs.sort();
        seqs.dedup();
        (seqs.len() == 500).then_some(got)
    })
    .await;
    assert!(
        r.bad().is_empty(),
        "every signature verifies: {:?}",
        r.bad()
    );
    // Duplicates only with the same delivery id: one id per seq.
    let mut ids: BTreeMap<i64, &str> = BTreeMap::new();
    for g in got.iter().filter(|g| g.status == 204) {
        let id = ids.entry(g.seq).or_insert(g.delivery.as_str());
        assert_eq!(*id, g.delivery, "seq {} came under two ids", g.seq);
    }
    let distinct: std::collections::HashSet<&str> = ids.values().copied().collect();
    assert_eq!(distinct.len(), 500);
    // In seq order: each seq's first success comes after the one before.
    let mut first: Vec<i64> = Vec::new();
    for g in got.iter().filter(|g| g.status == 204) {
        if !first.contains(&g.seq) {
            first.push(g.seq);
        }
    }
    assert!(
        first.windows(2).all(|w| w[0] < w[1]),
        "out of order: {first:?}"
    );
    let hook = eventually(T, "nothing pending", || async {
        let h = pamd.get("/api/v1/webhooks/ci").await.ok()?;
        (h["status"]["pending"] == 0).then_some(h)
    })
    .await;
    assert_eq!(hook["status"]["failed"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_receiver_does_not_delay_another_webhook() {
    let keys = tempfile::tempdir().unwrap();
    let r = Receiver::default();
    let base = start_receiver(&r).await;
    r.set(
        "stuck",
        Mode {
            hang: true,
            ..Mode::default()
        },
    );
    let pamd = pamd(keys.path(), "timeout_seconds = 60\n").await;
    apply(
        &pamd,
        &format!(
            "{}---\n{}",
            webhook_yaml("stuck", &format!("{base}/stuck"), "[project.]"),
            webhook_yaml("fast", &format!("{base}/fast"), "[project.]")
        ),
    );
    for (i, p) in ["one", "two", "three"].iter().enumerate() {
        let started = std::time::Instant::now();
        apply(&pamd, &project_yaml(p));
        eventually(
            Duration::from_secs(5),
            "the fast webhook's delivery",
            || async { (r.got("fast").len() > i).then_some(()) },
        )
        .await;
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    let fast: Vec<String> = r.got("fast").iter().map(|g| g.topic.clone()).collect();
    assert_eq!(fast, ["project.created"; 3]);
    // The stuck one got its first request and is still waiting on it.
    assert_eq!(r.got("stuck").len(), 0, "no answer recorded yet");
    let stuck = deliveries(&pamd, "stuck").await;
    assert_eq!(stuck.len(), 3);
    assert!(stuck
        .iter()
        .all(|d| d["status"] == "pending" && d["attempts"] == 0));
    assert!(r.bad().is_empty(), "{:?}", r.bad());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_webhook_is_refused_at_its_line_and_nothing_is_written() {
    let keys = tempfile::tempdir().unwrap();
    let pamd = pamd(keys.path(), "").await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hooks.yaml");
    let good = webhook_yaml("good", "https://ci.example/h", "[run.]");
    let bad_url = webhook_yaml("bad-url", "ftp://ci.example/h", "[run.]");
    let bad_topic = webhook_yaml("bad-topic", "https://ci.example/h", "[run., jobs.]");
    let bad_secret = good
        .replace("name: good", "name: bad-secret")
        .replace("name: signing", "name: nope");
    let with_password = webhook_yaml(
        "with-password",
        "https://ci:pa55w0rd@ci.example/h",
        "[run.]",
    );
    // The URL is checked when the file is read (no server state needed);
    // one with user info is refused and printed without it.
    std::fs::write(&file, format!("{good}---\n{bad_url}---\n{with_password}")).unwrap();
    let err = fails(&pamd.pamctl(&["apply", "-f", file.to_str().unwrap()]), 3);
    assert!(
        err.contains("hooks.yaml: document 1, line 18, column 8: spec.url: \"ftp://ci.example/h\" is not an http(s) URL"),
        "{err}"
    );
    assert!(
        err.contains("hooks.yaml: document 2, line 30, column 8: spec.url: \"https://ci.example/h\" holds a password or token"),
        "{err}"
    );
    assert!(!err.contains("pa55w0rd"), "{err}");
    // Topics and the secret are checked against pamd's state.
    std::fs::write(&file, format!("{good}---\n{bad_topic}---\n{bad_secret}")).unwrap();
    let err = fails(&pamd.pamctl(&["apply", "-f", file.to_str().unwrap()]), 3);
    assert!(
        err.contains("hooks.yaml: document 1, line 19, column 18: spec.topics[1]: \"jobs.\" matches no event topic"),
        "{err}"
    );
    assert!(
        err.contains("hooks.yaml: document 2, line 32, column 3: spec.signingSecretRef: no Secret \"nope\" with key \"key\" in project \"hooks\""),
        "{err}"
    );
    let hooks = pamd.get("/api/v1/webhooks").await.unwrap();
    assert_eq!(hooks["items"], serde_json::json!([]), "nothing written");

    // The good one alone applies; it reads back, round-trips and deletes
    // like any kind.
    apply(&pamd, &good);
    let table = ok(&pamd.pamctl(&["get", "webhooks"]));
    assert!(table.starts_with("NAME"), "{table}");
    assert!(
        table.contains("good") && table.contains("https://ci.example/h"),
        "{table}"
    );
    let yaml = ok(&pamd.pamctl(&["get", "webhook", "good", "-o", "yaml"]));
    let again = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&yaml)));
    assert!(again.contains("unchanged"), "{again}");
    let described = ok(&pamd.pamctl(&["describe", "webhook", "good"]));
    assert!(
        described.contains("signingSecretRef") || described.contains("Signing"),
        "{described}"
    );
    let deleted = ok(&pamd.pamctl(&["delete", "webhook", "good"]));
    assert!(deleted.contains("deleted"), "{deleted}");
    let hooks = pamd.get("/api/v1/webhooks").await.unwrap();
    assert_eq!(hooks["items"], serde_json::json!([]));
}

/// By default no delivery reaches loopback (nor any private
/// address): the attempt fails naming the address and the key that would
/// allow it, and the receiver gets nothing. `[webhooks] allow_networks`
/// is what the other tests of this file allow 127.0.0.0/8 with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_on_loopback_is_refused_unless_allowed() {
    let keys = tempfile::tempdir().unwrap();
    let r = Receiver::default();
    let base = start_receiver(&r).await;
    let pamd = start_pamd(keys.path(), "").await;
    apply(
        &pamd,
        &webhook_yaml("local", &format!("{base}/local"), "[project.created]"),
    );
    apply(&pamd, &project_yaml("web"));
    let d = eventually(T, "an attempt recorded", || async {
        let ds = deliveries(&pamd, "local").await;
        ds.into_iter().find(|d| d["attempts"].as_i64() >= Some(1))
    })
    .await;
    assert_eq!(d["status"], "pending", "{d}");
    let why = d["lastError"].as_str().unwrap_or("");
    assert!(
        why.contains("address 127.0.0.1 is not allowed: loopback; see [webhooks] allow_networks"),
        "{d}"
    );
    assert!(r.got("local").is_empty(), "{:?}", r.got("local"));
}
