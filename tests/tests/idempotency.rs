//! `Idempotency-Key` on mutating POSTs end to end, against a
//! real pamd and PostgreSQL. An apply whose answer the client lost (its
//! short timeout) and that it sends again with the same key is done once
//! and answered the same (`created`, not `unchanged`), replayed; the key
//! with another body is a 422 in the one JSON error shape; a created
//! token is never replayed; pamctl sends a key on every mutating call.

use std::time::Duration;

use pam_tests::{eventually, ok, Pamd, PamdOptions};
use serde_json::{json, Value};

const T: Duration = Duration::from_secs(25);

fn batch(tasks: usize) -> String {
    let mut y =
        String::from("apiVersion: pam.dev/v1\nkind: Project\nmetadata:\n  name: idem\nspec: {}\n");
    for i in 0..tasks {
        y.push_str(&format!(
            "---\napiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t{i}\n  project: idem\nspec:\n  title: T{i}\n"
        ));
    }
    y
}

/// A proxy to `target` that passes requests on and drops the first
/// `drops` answers: it closes the client's connection when the answer
/// starts (reading the rest itself), as a network cut or a client timeout
/// would; later connections pass through.
async fn answer_dropping_proxy(target: &str, drops: usize) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::AsyncReadExt;
    let dropped = std::sync::Arc::new(AtomicUsize::new(0));
    let target = target.trim_start_matches("http://").to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let target = target.clone();
            let drop_this = dropped.fetch_add(1, Ordering::SeqCst) < drops;
            tokio::spawn(async move {
                let mut server = tokio::net::TcpStream::connect(&target).await.unwrap();
                if !drop_this {
                    let mut client = client;
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    return;
                }
                let (mut cr, cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let up = tokio::spawn(async move { tokio::io::copy(&mut cr, &mut sw).await });
                let mut first = [0u8; 1];
                let _ = sr.read(&mut first).await;
                up.abort();
                drop(cw);
                let _ = tokio::io::copy(&mut sr, &mut tokio::io::sink()).await;
            });
        }
    });
    format!("http://{addr}")
}

async fn post(
    pamd: &Pamd,
    client: &reqwest::Client,
    path: &str,
    key: &str,
    body: &Value,
) -> reqwest::Result<(u16, Option<String>, Value)> {
    post_to(&pamd.url, &pamd.token, client, path, key, body).await
}

async fn post_to(
    base: &str,
    token: &str,
    client: &reqwest::Client,
    path: &str,
    key: &str,
    body: &Value,
) -> reqwest::Result<(u16, Option<String>, Value)> {
    let r = client
        .post(format!("{base}{path}"))
        .bearer_auth(token)
        .header("idempotency-key", key)
        .json(body)
        .send()
        .await?;
    let status = r.status().as_u16();
    let replayed = r
        .headers()
        .get("idempotent-replayed")
        .map(|v| v.to_str().unwrap().to_string());
    Ok((status, replayed, r.json().await.unwrap_or(Value::Null)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_retried_with_its_key_is_done_once_and_answered_the_same() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let body = json!({"files": [{"name": "idem.yaml", "content": batch(300)}]});
    // The first answer is lost on the way back (the client sees the
    // connection close, as after a timeout).
    let proxy = answer_dropping_proxy(&pamd.url, usize::MAX).await;
    let client = pamd.http();
    let lost = post_to(
        &proxy,
        &pamd.token,
        &client,
        "/api/v1/apply",
        "key-1",
        &body,
    )
    .await;
    assert!(lost.is_err(), "expected the answer to be lost: {lost:?}");

    // The retry (waiting while the first is in progress, if it still is)
    // gets the first one's answer back.
    let (status, replayed, answer) = eventually(T, "the stored answer", || async {
        let r = post(&pamd, &client, "/api/v1/apply", "key-1", &body)
            .await
            .unwrap();
        if r.0 == 409 {
            assert_eq!(r.2["error"]["code"], "idempotency_in_progress", "{}", r.2);
            return None;
        }
        Some(r)
    })
    .await;
    assert_eq!(status, 200, "{answer}\n{}", pamd.log());
    assert_eq!(replayed.as_deref(), Some("true"));
    let results = answer["results"]
        .as_array()
        .or(answer.as_array())
        .cloned()
        .unwrap_or_default();
    assert_eq!(results.len(), 301, "{answer}");
    assert!(
        results.iter().all(|r| r["action"] == "created"),
        "the first request's answer, not a second apply's `unchanged`"
    );
    // Done once: one creation event per object.
    let events = pamd
        .get("/api/v1/events?topic=project.created,work_item.created&limit=5000")
        .await
        .unwrap();
    assert_eq!(events["items"].as_array().unwrap().len(), 301);

    // The same key with another request: refused, in the one error shape.
    let other = json!({"files": [{"name": "idem.yaml", "content": batch(1)}]});
    let (status, _, err) = post(&pamd, &client, "/api/v1/apply", "key-1", &other)
        .await
        .unwrap();
    assert_eq!(status, 422, "{err}");
    assert_eq!(err["error"]["code"], "idempotency_key_reused");
    assert!(err["error"]["message"]
        .as_str()
        .unwrap()
        .contains("different request"));
    // Without a key, or with a new one, the work is done (and apply finds
    // nothing to change).
    let (status, replayed, answer) = post(&pamd, &client, "/api/v1/apply", "key-2", &body)
        .await
        .unwrap();
    assert_eq!((status, replayed), (200, None));
    let results = answer["results"]
        .as_array()
        .or(answer.as_array())
        .cloned()
        .unwrap_or_default();
    assert!(results.iter().all(|r| r["action"] == "unchanged"));
    // A bad key is a 400.
    let (status, _, err) = post(&pamd, &client, "/api/v1/apply", &"k".repeat(300), &other)
        .await
        .unwrap();
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("bad_request"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_created_token_is_never_replayed_and_pamctl_sends_keys() {
    let pamd = Pamd::start(PamdOptions::default()).await.unwrap();
    let client = pamd.http();
    let (status, _, first) = post(
        &pamd,
        &client,
        "/api/v1/tokens",
        "tok-1",
        &json!({"name": "ci"}),
    )
    .await
    .unwrap();
    assert_eq!(status, 201, "{first}");
    assert!(first["token"].as_str().is_some());
    let (status, _, again) = post(
        &pamd,
        &client,
        "/api/v1/tokens",
        "tok-1",
        &json!({"name": "ci"}),
    )
    .await
    .unwrap();
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "idempotency_conflict");
    assert!(again["error"]["message"]
        .as_str()
        .unwrap()
        .contains("credential"));
    let tokens = pamd.get("/api/v1/tokens").await.unwrap();
    let named_ci = tokens["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] == "ci")
        .count();
    assert_eq!(named_ci, 1, "created once: {tokens}");

    // pamctl sends a key with every mutating call and the same key on its
    // own retry: through a proxy that loses the first answer, its apply
    // is retried and answered `created` (the first one's answer replayed,
    // not a second apply's `unchanged`).
    let proxy = answer_dropping_proxy(&pamd.url, 1).await;
    let yaml = batch(2);
    let out = pamd.pamctl_stdin(&["--server", &proxy, "apply", "-f", "-"], Some(&yaml));
    let stdout = ok(&out);
    assert!(
        stdout.contains("created") && !stdout.contains("unchanged"),
        "{stdout}"
    );
    // Two calls are two keys: the second apply does the work again.
    let out = ok(&pamd.pamctl_stdin(&["apply", "-f", "-"], Some(&yaml)));
    assert!(out.contains("unchanged"), "{out}");

    // Keys are per token; a revoked token gets no replay.
    let ci = first["token"].as_str().unwrap();
    let body = json!({"files": [{"name": "p.yaml", "content": batch(0)}]});
    let (status, _, _) = post_to(&pamd.url, ci, &client, "/api/v1/apply", "k", &body)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let (status, replayed, _) = post_to(&pamd.url, ci, &client, "/api/v1/apply", "k", &body)
        .await
        .unwrap();
    assert_eq!((status, replayed.as_deref()), (200, Some("true")));
    let (status, replayed, _) = post(&pamd, &client, "/api/v1/apply", "k", &body)
        .await
        .unwrap();
    assert_eq!((status, replayed), (200, None), "another token's key");
    let id = first["id"].as_str().unwrap();
    let revoked = client
        .delete(format!("{}/api/v1/tokens/{id}", pamd.url))
        .bearer_auth(&pamd.token)
        .send()
        .await
        .unwrap();
    assert!(revoked.status().is_success());
    let (status, _, err) = post_to(&pamd.url, ci, &client, "/api/v1/apply", "k", &body)
        .await
        .unwrap();
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (401, Some("unauthorized"))
    );
}
