//! The dashboard's endpoints through the real router on real PostgreSQL: a
//! project's charts, re-run of a finished run, suspend/resume of a Source
//! and a Schedule — with the deny paths (no token 401, a worker token 403,
//! unknown 404, bad input 400 in the one error shape).

mod common;

use axum::http::StatusCode;
use chrono::Duration;
use pam_store::TokenKind;
use serde_json::{json, Value};
use uuid::Uuid;

/// An operator's API and a worker token for host box-a.
struct Api {
    ops: common::OpsApi,
    worker: String,
}

impl std::ops::Deref for Api {
    type Target = common::OpsApi;
    fn deref(&self) -> &common::OpsApi {
        &self.ops
    }
}

const TREE: &str = r#"
apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {budget: {maxCostUsd: 5}}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart, project: web}
spec: {title: Cart}
---
apiVersion: pam.dev/v1
kind: Schedule
metadata: {name: nightly, project: web}
spec:
  schedule: "30 2 * * *"
  runTemplate: {task: cart, provider: claude, prompt: hi, cwd: /tmp}
"#;

impl Api {
    async fn new() -> Api {
        let ops = common::OpsApi::new().await;
        let worker = common::token(&ops.state, TokenKind::Worker, "w", Some("box-a")).await;
        let api = Api { ops, worker };
        let (s, v) = api.apply(TREE).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        api
    }

    async fn call(&self, method: &str, uri: &str) -> (StatusCode, Value) {
        self.call_as(Some(&self.token), method, uri, None).await
    }

    async fn apply(&self, yaml: &str) -> (StatusCode, Value) {
        common::apply(&self.state, &self.token, "x.yaml", yaml).await
    }

    async fn signal(&self, run_id: &str, kind: &str, extra: Value) {
        let mut s = json!({"run_id": run_id, "attempt": 1, "kind": kind, "at": self.clock_now()});
        s.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (st, v) = self
            .call_as(
                Some(&self.worker),
                "POST",
                "/api/v1/workers/signals",
                Some(json!({ "signals": [s] })),
            )
            .await;
        assert_eq!(st, StatusCode::OK, "{v}");
    }

    fn clock_now(&self) -> String {
        use pam_controller::clock::Clock;
        self.clock.now().to_rfc3339()
    }

    /// Applies runs `names` of task cart and claims them as host box-a
    /// after `wait` seconds: their ids.
    async fn claim(&self, names: &[&str], wait: i64) -> Vec<String> {
        self.apply_runs(names).await;
        self.clock.advance(Duration::seconds(wait));
        self.register_and_claim(&self.worker, 10, names.len()).await
    }

    /// No token: 401; a worker token: 403; both in the one error shape.
    async fn denied(&self, method: &str, uri: &str) {
        let (s, v) = self.call_as(None, method, uri, None).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{uri}: {v}");
        assert!(v["error"]["code"].is_string(), "{v}");
        let (s, v) = self.call_as(Some(&self.worker), method, uri, None).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{uri}: {v}");
        assert!(v["error"]["code"].is_string(), "{v}");
    }
}

fn bucket_with(v: &Value, f: impl Fn(&Value) -> bool) -> Vec<&Value> {
    v["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| f(b))
        .collect()
}

#[tokio::test]
async fn charts_count_finished_runs_their_cost_durations_and_latency() {
    let api = Api::new().await;
    // Nothing ran yet: every bucket empty, the budget and spend given.
    let (s, v) = api.call("GET", "/api/v1/projects/web/charts?hours=1").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["window"]["bucketSeconds"], 60);
    assert_eq!(v["buckets"].as_array().unwrap().len(), 60);
    assert_eq!(v["budget"], json!({"maxCostUsd": 5.0}));
    assert_eq!(v["spentUsd"], 0.0);
    assert!(bucket_with(&v, |b| b["started"] != 0 || b["durationMs"] != Value::Null).is_empty());

    // Two runs are claimed 30 s after they became dispatchable, start 5 s
    // later, then run 10 s (exit 0, $1.50) and 20 s (exit 3).
    let ids = api.claim(&["r1", "r2"], 30).await;
    // Spawning takes 5 s: not part of the dispatch latency.
    api.clock.advance(Duration::seconds(5));
    for id in &ids {
        api.signal(id, "started", json!({})).await;
    }
    api.clock.advance(Duration::seconds(10));
    let usage =
        json!({"usage": {"input_tokens": 10, "output_tokens": 5, "cost_usd": 1.5}, "exit_code": 0});
    api.signal(&ids[0], "finished", usage).await;
    api.clock.advance(Duration::seconds(10));
    api.signal(&ids[1], "finished", json!({"exit_code": 3}))
        .await;

    let (s, v) = api.call("GET", "/api/v1/projects/web/charts?hours=1").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let finished = bucket_with(&v, |b| {
        b["finished"]["exited"] != 0 || b["finished"]["failed"] != 0
    });
    assert_eq!(
        finished.len(),
        1,
        "12:00:40 and 12:00:50 share a minute: {v}"
    );
    let b = finished[0];
    assert_eq!(
        b["finished"],
        json!({"exited": 1, "failed": 1, "stopped": 0})
    );
    assert_eq!(b["costUsd"], 1.5);
    assert_eq!(b["durationMs"], json!({"p50": 15000, "p90": 19000}));
    assert_eq!(b["started"], 2);
    assert_eq!(b["claims"], 2);
    assert_eq!(b["dispatchLatencyMs"], json!({"p50": 30000, "p90": 30000}));
    assert_eq!(v["spentUsd"], 1.5);
    // The default window is a day in half hours.
    let (_, v) = api.call("GET", "/api/v1/projects/web/charts").await;
    assert_eq!(v["window"]["hours"], 24);
    assert_eq!(v["window"]["bucketSeconds"], 1800);
    assert_eq!(bucket_with(&v, |b| b["started"] == 2).len(), 1, "{v}");

    for bad in ["hours=0", "hours=721", "hours=abc", "days=1"] {
        let (s, v) = api
            .call("GET", &format!("/api/v1/projects/web/charts?{bad}"))
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {v}");
        assert_eq!(v["error"]["code"], "bad_request", "{bad}: {v}");
    }
    let (s, v) = api.call("GET", "/api/v1/projects/nope/charts").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    api.denied("GET", "/api/v1/projects/web/charts").await;
}

#[tokio::test]
async fn rerun_creates_a_new_run_from_a_finished_one_only() {
    let api = Api::new().await;
    let ids = api.claim(&["r1"], 0).await;
    api.signal(&ids[0], "started", json!({})).await;
    // Running: not yet.
    let (s, v) = api.call("POST", "/api/v1/projects/web/runs/r1/rerun").await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "conflict");
    api.signal(&ids[0], "finished", json!({"exit_code": 0}))
        .await;

    let (s, v) = api.call("POST", "/api/v1/projects/web/runs/r1/rerun").await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["metadata"]["name"], "r1-r1");
    assert_eq!(v["metadata"]["annotations"]["pam.dev/rerun-of"], "r1");
    assert_eq!(v["status"]["phase"], "pending");
    let (_, old) = api.call("GET", "/api/v1/projects/web/runs/r1").await;
    assert_eq!(v["spec"], old["spec"], "the same spec");
    // Again: the next free name; the original is unchanged.
    let (s, v) = api.call("POST", "/api/v1/projects/web/runs/r1/rerun").await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    assert_eq!(v["metadata"]["name"], "r1-r2");
    assert_eq!(old["status"]["phase"], "exited");
    // A pending re-run is not finished either.
    let (s, _) = api
        .call("POST", "/api/v1/projects/web/runs/r1-r1/rerun")
        .await;
    assert_eq!(s, StatusCode::CONFLICT);
    let (s, v) = api
        .call("POST", "/api/v1/projects/web/runs/nope/rerun")
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    api.denied("POST", "/api/v1/projects/web/runs/r1/rerun")
        .await;
}

#[tokio::test]
async fn suspend_and_resume_a_source_and_a_schedule() {
    let api = Api::new().await;
    let dir = tempfile::tempdir().unwrap();
    let source = format!(
        "apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: repo}}\nspec: {{path: {:?}, projects: [web]}}\n",
        dir.path().display().to_string()
    );
    let (s, v) = api.apply(&source).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, before) = api.call("GET", "/api/v1/sources/repo").await;

    let (s, v) = api.call("POST", "/api/v1/sources/repo/suspend").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["spec"]["suspend"], true);
    let gen = |v: &Value| v["metadata"]["generation"].as_i64().unwrap();
    assert_eq!(gen(&v), gen(&before) + 1, "a spec change: {v}");
    // Suspending again changes nothing.
    let (_, again) = api.call("POST", "/api/v1/sources/repo/suspend").await;
    assert_eq!(gen(&again), gen(&v));
    let (s, v) = api.call("POST", "/api/v1/sources/repo/resume").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // false is the default, printed as nothing.
    assert_ne!(v["spec"]["suspend"], true, "{v}");
    assert_eq!(gen(&v), gen(&again) + 1, "{v}");

    let (s, v) = api
        .call("POST", "/api/v1/projects/web/schedules/nightly/suspend")
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["spec"]["suspend"], true);
    assert!(
        v["status"]["nextScheduleTime"].is_null(),
        "suspended: no next tick: {v}"
    );
    let (s, v) = api
        .call("POST", "/api/v1/projects/web/schedules/nightly/resume")
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_ne!(v["spec"]["suspend"], true, "{v}");
    assert!(v["status"]["nextScheduleTime"].is_string(), "{v}");

    let (s, v) = api.call("POST", "/api/v1/sources/nope/suspend").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    let (s, _) = api
        .call("POST", "/api/v1/projects/web/schedules/nope/resume")
        .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    for uri in [
        "/api/v1/sources/repo/suspend",
        "/api/v1/sources/repo/resume",
        "/api/v1/projects/web/schedules/nightly/suspend",
    ] {
        api.denied("POST", uri).await;
    }
}

/// The Webhooks page's Redeliver (the existing endpoint):
/// its deny paths, an unknown delivery 404 and a malformed id 400.
#[tokio::test]
async fn redeliver_deny_paths() {
    let api = Api::new().await;
    let unknown = format!("/api/v1/webhookdeliveries/{}/redeliver", Uuid::new_v4());
    let (s, v) = api.call("POST", &unknown).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "not_found");
    let (s, v) = api
        .call("POST", "/api/v1/webhookdeliveries/not-a-uuid/redeliver")
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    api.denied("POST", &unknown).await;
    api.denied("GET", "/api/v1/webhookdeliveries").await;
}

/// Deleting a host that finished runs name (their history says where they ran) is
/// a 409 naming the runs and what to do instead, and no database
/// constraint; nothing is deleted.
#[tokio::test]
async fn a_host_that_runs_name_is_not_deleted_and_the_answer_says_why() {
    let api = Api::new().await;
    let ids = api.claim(&["r1", "r2"], 0).await;
    for id in &ids {
        api.signal(id, "started", json!({})).await;
        api.signal(id, "finished", json!({"exit_code": 0})).await;
    }
    let (s, v) = api.call("DELETE", "/api/v1/hosts/box-a").await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    let m = v["error"]["message"].as_str().unwrap();
    assert!(
        m.contains("2 run(s)")
            && m.contains("run r1, run r2")
            && m.contains("pamctl host disable box-a"),
        "{m}"
    );
    assert!(!m.contains("fkey") && !m.contains("runs_host_id"), "{m}");
    let (s, v) = api.call("GET", "/api/v1/hosts/box-a").await;
    assert_eq!(s, StatusCode::OK, "still there: {v}");
}
