//! Revoking a token ends what it holds open — its event streams and its
//! attach leases — at once on the pamd that revoked it, and within a second
//! on another pamd sharing the database (the per-token re-check). Real
//! PostgreSQL, the real router served on loopback sockets, reqwest clients.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pam_controller::api::{operator::attach, router, AppState};
use pam_controller::clock::SystemClock;
use pam_store::{Store, TokenKind};
use serde_json::{json, Value};
use uuid::Uuid;

mod common;
use common::token_with_id as token;

/// One pamd's API (a replica) over a shared store, with the lease
/// expiry/revocation loop pamd runs beside it.
struct Replica {
    state: AppState,
    base: String,
    http: reqwest::Client,
}

impl Replica {
    async fn start(store: Arc<dyn Store>) -> Replica {
        let state = AppState::new(store, Arc::new(SystemClock), Default::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let app = router(state.clone());
        tokio::spawn(async move { axum::serve(listener, app).await });
        tokio::spawn(attach::expire_loop(state.clone()));
        Replica {
            state,
            base,
            http: reqwest::Client::new(),
        }
    }

    async fn call(
        &self,
        token: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .http
            .request(method.parse().unwrap(), format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(json!(text)))
    }

    /// Attaches to run r1 with `token`, asserting 201: the lease.
    async fn attach(&self, token: &str) -> Value {
        let (s, v) = self
            .call(token, "POST", "/api/v1/projects/web/runs/r1/attach", None)
            .await;
        assert_eq!(s, 201, "{v}");
        v
    }

    /// Revokes token `id` with `admin`, asserting 204: when it was asked.
    async fn revoke(&self, admin: &str, id: Uuid) -> Instant {
        let asked = Instant::now();
        let (s, v) = self
            .call(admin, "DELETE", &format!("/api/v1/tokens/{id}"), None)
            .await;
        assert_eq!(s, 204, "{v}");
        asked
    }

    /// Opens the event stream with `token`: the response, or the status.
    async fn stream(&self, token: &str) -> Result<reqwest::Response, u16> {
        let r = self
            .http
            .get(format!("{}/api/v1/events/stream", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap();
        if r.status().as_u16() == 200 {
            Ok(r)
        } else {
            Err(r.status().as_u16())
        }
    }
}

const RUN: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {displayName: Web}\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: cart, project: web}\nspec: {title: Cart}\n---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: web}\nspec: {task: cart, provider: claude, prompt: hi, cwd: /tmp}\n";

/// Applies run r1 and has worker box-a claim it, so it can be attached.
async fn live_run(r: &Replica, admin: &str) {
    let (s, v) = r
        .call(
            admin,
            "POST",
            "/api/v1/apply",
            Some(json!({"files": [{"name": "r.yaml", "content": RUN}]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    let (_, wt) = token(&r.state, TokenKind::Worker, "w", Some("box-a")).await;
    let (s, v) = r
        .call(&wt, "POST", "/api/v1/workers/register", Some(json!({"name": "box-a", "platform": "linux", "instance_id": Uuid::new_v4(), "capacity": 1, "labels": {}, "version": "t"})))
        .await;
    assert_eq!(s, 200, "{v}");
    let (s, v) = r
        .call(&wt, "POST", "/api/v1/workers/claim?wait=0", None)
        .await;
    assert_eq!(
        (s, v["runs"].as_array().map(Vec::len)),
        (200, Some(1)),
        "{v}"
    );
}

/// Reads the stream until it ends; panics if it is still open at
/// `deadline`. Returns every byte it carried.
async fn ends_by(mut resp: reqwest::Response, deadline: Instant) -> String {
    let mut text = String::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, resp.chunk()).await {
            Ok(Ok(Some(b))) => text.push_str(&String::from_utf8_lossy(&b)),
            Ok(Ok(None)) | Ok(Err(_)) => return text,
            Err(_) => panic!("the stream was still open at the deadline; it carried:\n{text}"),
        }
    }
}

/// Reads the stream until `needle` shows up (20 s at most).
async fn carries(resp: &mut reqwest::Response, needle: &str) {
    let mut text = String::new();
    while !text.contains(needle) {
        text.push_str(&common::next_chunk(resp).await);
    }
}

async fn lease_released(r: &Replica, admin: &str) -> Vec<Value> {
    let (s, v) = r
        .call(
            admin,
            "GET",
            "/api/v1/events?topic=run.lease_released",
            None,
        )
        .await;
    assert_eq!(s, 200, "{v}");
    v["items"].as_array().unwrap().clone()
}

async fn pg() -> Arc<dyn Store> {
    Arc::new(pam_store::postgres::PgStore::new(
        pam_testkit::testdb::fresh_pool().await.unwrap(),
    ))
}

#[tokio::test]
async fn revoking_a_token_ends_its_streams_and_releases_its_leases_at_once() {
    let store = pg().await;
    let r = Replica::start(store.clone()).await;
    let (_, admin) = token(&r.state, TokenKind::Operator, "admin", None).await;
    let (alice_id, alice) = token(&r.state, TokenKind::Operator, "alice", None).await;
    live_run(&r, &admin).await;
    let a1 = r.stream(&alice).await.unwrap();
    let a2 = r.stream(&alice).await.unwrap();
    let mut other = r.stream(&admin).await.unwrap();
    assert_eq!(r.attach(&alice).await["holder"], "alice");

    let revoked = r.revoke(&admin, alice_id).await;
    let deadline = revoked + Duration::from_secs(1);
    ends_by(a1, deadline).await;
    ends_by(a2, deadline).await;
    // The lease was released before the revoke answered.
    let released = lease_released(&r, &admin).await;
    assert_eq!(released.len(), 1, "{released:#?}");
    assert_eq!(released[0]["payload"]["reason"], "revoked");
    assert_eq!(released[0]["payload"]["holder"], "alice");
    assert_eq!(released[0]["payload"]["attempt"], 1);
    // Someone else may attach now; the other token's stream goes on.
    r.attach(&admin).await;
    carries(&mut other, "event: run.lease_acquired").await;
    assert_eq!(r.stream(&alice).await.err(), Some(401));
}

#[tokio::test]
async fn a_revocation_through_another_replica_ends_streams_and_leases_within_a_second() {
    let store = pg().await;
    let a = Replica::start(store.clone()).await;
    let b = Replica::start(store.clone()).await;
    let (_, admin) = token(&a.state, TokenKind::Operator, "admin", None).await;
    let (alice_id, alice) = token(&a.state, TokenKind::Operator, "alice", None).await;
    live_run(&a, &admin).await;
    let stream = a.stream(&alice).await.unwrap();
    a.attach(&alice).await;

    let revoked = b.revoke(&admin, alice_id).await;
    // The re-check runs once a second: a little slack for a busy machine.
    ends_by(stream, revoked + Duration::from_millis(1500)).await;
    let took = revoked.elapsed();
    loop {
        let released = lease_released(&a, &admin).await;
        if let Some(e) = released.first() {
            assert_eq!(e["payload"]["reason"], "revoked");
            break;
        }
        assert!(
            revoked.elapsed() < Duration::from_millis(1500),
            "the lease was not released in time"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!("stream ended {took:?} after the revocation on the other replica");
    // Nothing is held any more: no re-check outlives what needed it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while a.state.revocations.held_tokens() > 0 {
        assert!(Instant::now() < deadline, "a token is still held");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A worker's watch stream claims for its host while it is
/// open: revoking the worker's token ends it at once, and no run is
/// claimed for the host after.
#[tokio::test]
async fn revoking_a_worker_token_ends_its_watch_and_its_claims() {
    let store = pg().await;
    let r = Replica::start(store.clone()).await;
    let (_, admin) = token(&r.state, TokenKind::Operator, "admin", None).await;
    let (wid, wt) = token(&r.state, TokenKind::Worker, "w", Some("box-a")).await;
    let (s, v) = r
        .call(&wt, "POST", "/api/v1/workers/register", Some(json!({"name": "box-a", "platform": "linux", "instance_id": Uuid::new_v4(), "capacity": 4, "labels": {}, "version": "t"})))
        .await;
    assert_eq!(s, 200, "{v}");
    let watch = r
        .http
        .get(format!("{}/api/v1/workers/watch", r.base))
        .bearer_auth(&wt)
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status().as_u16(), 200);

    let revoked = r.revoke(&admin, wid).await;
    ends_by(watch, revoked + Duration::from_secs(1)).await;
    // A run applied now stays pending: nothing claims for box-a.
    let (s, v) = r
        .call(
            &admin,
            "POST",
            "/api/v1/apply",
            Some(json!({"files": [{"name": "r.yaml", "content": RUN}]})),
        )
        .await;
    assert_eq!(s, 200, "{v}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (s, v) = r
        .call(&admin, "GET", "/api/v1/projects/web/runs/r1", None)
        .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"]["phase"], "pending", "{v}");
    let (s, _) = r.call(&wt, "GET", "/api/v1/workers/watch", None).await;
    assert_eq!(s, 401);
}
