//! The declarative API and the worker protocol through the real router on
//! real PostgreSQL (`tower::ServiceExt::oneshot`).

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use common::request;
use pam_store::TokenKind;
use serde_json::{json, Value};
use uuid::Uuid;

use common::OpsApi as Api;

impl Api {
    /// Applies Runs named `names` (task cart of project web, which TREE
    /// must have created), registers host box-a and claims them: its worker
    /// token and the claimed run ids.
    async fn claimed_runs(&self, names: &[&str]) -> (String, Vec<String>) {
        self.apply_runs(names).await;
        let wt = common::token(&self.state, TokenKind::Worker, "w", Some("box-a")).await;
        let ids = self.register_and_claim(&wt, names.len(), names.len()).await;
        (wt, ids)
    }

    async fn call(&self, method: &str, uri: &str, body: Option<Value>) -> (StatusCode, Value) {
        let t = self.token.clone();
        self.call_as(Some(&t), method, uri, body).await
    }

    /// The body of a GET, whatever its status (tests assert on the body).
    async fn get(&self, uri: &str) -> Value {
        self.call("GET", uri, None).await.1
    }

    async fn apply(&self, name: &str, yaml: &str) -> (StatusCode, Value) {
        common::apply(&self.state, &self.token, name, yaml).await
    }

    /// Applies `yaml` and expects it refused (422) with `why` in the first
    /// error's display.
    async fn apply_refused(&self, name: &str, yaml: &str, why: &str) {
        let (s, v) = self.apply(name, yaml).await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
        let display = v["errors"][0]["display"].as_str().unwrap();
        assert!(display.contains(why), "{v}");
    }

    async fn events(&self, topic: &str) -> Vec<Value> {
        let (s, v) = self
            .call("GET", &format!("/api/v1/events?topic={topic}"), None)
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v["items"].as_array().unwrap().clone()
    }
}

const TREE: &str = r#"
apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {displayName: Web shop}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: launch, project: web}
spec: {type: milestone, title: Launch}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: checkout, project: web}
spec: {type: epic, title: Checkout, parent: launch}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart, project: web, labels: {team: pay}}
spec: {title: Cart, parent: checkout}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart-ui, project: web}
spec: {type: subtask, title: Cart UI, parent: cart}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: pay, project: web}
spec: {title: Payment, parent: checkout, status: done}
"#;

fn actions(v: &Value) -> Vec<String> {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            format!(
                "{} {} {}",
                r["kind"].as_str().unwrap(),
                r["name"].as_str().unwrap(),
                r["action"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test]
async fn apply_create_unchanged_configured_and_generation() {
    let api = Api::new().await;
    let (s, v) = api.apply("tree.yaml", TREE).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(actions(&v).iter().all(|a| a.ends_with("created")), "{v}");
    assert_eq!(actions(&v).len(), 6);
    let created = api.events("work_item.created").await.len();
    assert_eq!(created, 5);

    // The same input again: unchanged, no event, same generation.
    let before = api.events("").await.len();
    let (s, v) = api.apply("tree.yaml", TREE).await;
    assert_eq!(s, StatusCode::OK);
    assert!(actions(&v).iter().all(|a| a.ends_with("unchanged")), "{v}");
    assert_eq!(api.events("").await.len(), before);

    // A spec change bumps generation; a label change does not.
    let changed = TREE.replace("title: Cart,", "title: Shopping cart,");
    let (_, v) = api.apply("tree.yaml", &changed).await;
    assert!(
        actions(&v).contains(&"Task cart configured".to_string()),
        "{v}"
    );
    let cart = api.get("/api/v1/projects/web/tasks/cart").await;
    assert_eq!(cart["metadata"]["generation"], 2);
    assert_eq!(cart["status"]["observedGeneration"], 2);
    assert_eq!(cart["spec"]["title"], "Shopping cart");
    assert_eq!(
        cart["status"]["path"].as_str().unwrap().split('/').count(),
        3
    );
    let relabel = changed.replace("labels: {team: pay}", "labels: {team: shop}");
    let (_, v) = api.apply("tree.yaml", &relabel).await;
    assert!(actions(&v).contains(&"Task cart configured".to_string()));
    let cart = api.get("/api/v1/projects/web/tasks/cart").await;
    assert_eq!(cart["metadata"]["generation"], 2);
    // Parents show completion (display only): checkout has cart + pay, one done.
    let checkout = api.get("/api/v1/projects/web/tasks/checkout").await;
    assert_eq!(
        checkout["status"]["completion"],
        json!({"done": 1, "total": 2})
    );
    assert_eq!(
        checkout["status"]["phase"], "todo",
        "a parent never auto-completes"
    );
}

#[tokio::test]
async fn a_bad_document_writes_nothing_and_names_file_line_column() {
    let api = Api::new().await;
    let bad = format!(
        "{TREE}---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: loop, project: web}}\nspec: {{title: Loop, parent: loop}}\n"
    );
    let (s, v) = api.apply("bad.yaml", &bad).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let display = v["errors"][0]["display"].as_str().unwrap();
    assert!(
        display.starts_with("bad.yaml: document 6, line "),
        "{display}"
    );
    assert!(display.contains("spec.parent"), "{display}");
    let projects = api.get("/api/v1/projects").await;
    assert_eq!(
        projects["items"],
        json!([]),
        "nothing of the batch is written"
    );
}

/// The objects path (what `pamctl run start` sends) applies the
/// file path's per-document rules: an exec run without a command is refused
/// on both, with the same words, and nothing is written.
#[tokio::test]
async fn an_exec_run_without_a_command_is_refused_on_the_objects_path_too() {
    let api = Api::new().await;
    let (s, v) = api.apply("tree.yaml", TREE).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let run = json!({
        "apiVersion": "pam.dev/v1", "kind": "Run",
        "metadata": {"name": "r2", "project": "web"},
        "spec": {"task": "cart", "provider": "exec", "cwd": "/tmp"},
    });
    let (s, v) = api
        .call("POST", "/api/v1/apply", Some(json!({ "objects": [run] })))
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["errors"][0]["path"], "spec.command", "{v}");
    assert!(
        v["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("missing required field for provider exec"),
        "{v}"
    );
    let file = "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r2, project: web}\nspec: {task: cart, provider: exec, cwd: /tmp}\n";
    let (s, f) = api.apply("run.yaml", file).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{f}");
    assert_eq!(f["errors"][0]["message"], v["errors"][0]["message"]);
    let runs = api.get("/api/v1/projects/web/runs").await;
    assert_eq!(runs["items"], json!([]), "nothing is written");
}

#[tokio::test]
async fn stale_resource_version_is_a_409_naming_the_object() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    let stale = "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: cart, project: web, resourceVersion: \"1\"}\nspec: {title: New, parent: checkout}\n";
    // Move it past rv 1 first.
    api.apply(
        "t.yaml",
        &stale
            .replace(", resourceVersion: \"1\"", "")
            .replace("New", "Newer"),
    )
    .await;
    let (s, v) = api.apply("t.yaml", stale).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert!(common::error_message(&v).contains("Task web/cart"), "{v}");
}

#[tokio::test]
async fn immutable_fields_and_illegal_status_edges_are_refused() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    api.apply_refused(
        "tree.yaml",
        &TREE.replace("type: epic", "type: task"),
        "spec.type: is immutable",
    )
    .await;
    // pay is done; cancelled → done is illegal, but done → cancelled is fine,
    // then cancelled → done is refused.
    let (s, _) = api
        .apply(
            "tree.yaml",
            &TREE.replace("status: done", "status: cancelled"),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    api.apply_refused(
        "tree.yaml",
        TREE,
        "illegal work item transition cancelled → done",
    )
    .await;
}

#[tokio::test]
async fn cancel_cascades_to_non_done_descendants() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    let (s, v) = api
        .call(
            "POST",
            "/api/v1/projects/web/tasks/checkout/transition",
            Some(json!({"to": "cancelled", "dryRun": true})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let mut cascade: Vec<String> = serde_json::from_value(v["cascade"].clone()).unwrap();
    cascade.sort();
    assert_eq!(cascade, ["cart", "cart-ui"]);
    let cart = api.get("/api/v1/projects/web/tasks/cart").await;
    assert_eq!(cart["status"]["phase"], "todo", "dry run wrote nothing");
    let (s, _) = api
        .call(
            "POST",
            "/api/v1/projects/web/tasks/checkout/transition",
            Some(json!({"to": "cancelled"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    for (name, phase) in [
        ("cart", "cancelled"),
        ("cart-ui", "cancelled"),
        ("pay", "done"),
    ] {
        let t = api.get(&format!("/api/v1/projects/web/tasks/{name}")).await;
        assert_eq!(t["status"]["phase"], phase, "{name}");
    }
    // cancelled → doing is illegal through the verb too.
    let (s, v) = api
        .call(
            "POST",
            "/api/v1/projects/web/tasks/cart/transition",
            Some(json!({"to": "doing"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(v["error"]["code"], "illegal_transition");
}

#[tokio::test]
async fn reparent_rewrites_paths_and_journals_once() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    // Move cart (with cart-ui) from checkout to the milestone.
    let moved = TREE.replace(
        "spec: {title: Cart, parent: checkout}",
        "spec: {title: Cart, parent: launch}",
    );
    let (s, v) = api.apply("tree.yaml", &moved).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(api.events("work_item.reparented").await.len(), 1);
    let launch = api.get("/api/v1/projects/web/tasks/launch").await;
    let cart = api.get("/api/v1/projects/web/tasks/cart").await;
    let ui = api.get("/api/v1/projects/web/tasks/cart-ui").await;
    let lp = launch["status"]["path"].as_str().unwrap();
    let cp = cart["status"]["path"].as_str().unwrap();
    assert_eq!(
        cp,
        format!("{lp}/{}", &cart["metadata"]["uid"].as_str().unwrap()[..8])
    );
    assert!(ui["status"]["path"]
        .as_str()
        .unwrap()
        .starts_with(&format!("{cp}/")));
    // A cycle that only appears after a reparent is refused (OQ-6).
    let cyc = moved.replace(
        "spec: {type: milestone, title: Launch}",
        "spec: {type: milestone, title: Launch, parent: cart-ui}",
    );
    api.apply_refused("tree.yaml", &cyc, "cycle").await;
}

#[tokio::test]
async fn archived_project_refuses_new_tasks_and_runs() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    let archived = TREE.replace(
        "spec: {displayName: Web shop}",
        "spec: {displayName: Web shop, archived: true}",
    );
    let (s, _) = api.apply("tree.yaml", &archived).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(api.events("project.archived").await.len(), 1);
    let new_task = format!("{archived}---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: late, project: web}}\nspec: {{title: Late}}\n");
    api.apply_refused("tree.yaml", &new_task, "archived").await;
    // Un-archiving restores.
    let (s, v) = api
        .apply("tree.yaml", &new_task.replace(", archived: true", ""))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
}

#[tokio::test]
async fn runs_on_milestones_are_refused_and_runs_are_created_pending() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    let run = "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: web}\nspec: {task: launch, provider: claude, prompt: hi, cwd: /tmp}\n";
    let (s, v) = api.apply("run.yaml", run).await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    let (s, v) = api
        .apply("run.yaml", &run.replace("task: launch", "task: cart"))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let r = api.get("/api/v1/projects/web/runs/r1").await;
    assert_eq!(r["status"]["phase"], "pending");
    assert_eq!(r["status"]["attempt"], 1);
    assert_eq!(
        r["status"]["sessionName"],
        format!("pam-{}", &r["metadata"]["uid"].as_str().unwrap()[..8])
    );
    let ev = api.events("run.created").await;
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["payload"]["attempt"], 1);
    // Immutable: prompt.
    api.apply_refused(
        "run.yaml",
        &run.replace("task: launch", "task: cart")
            .replace("prompt: hi", "prompt: bye"),
        "spec.prompt",
    )
    .await;
}

#[tokio::test]
async fn prune_needs_a_selector_and_deletes_only_the_set() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    let body = |prune: bool, sel: Option<&str>, dry: bool, content: &str| json!({"files": [{"name": "t.yaml", "content": content}], "prune": prune, "selector": sel, "dryRun": dry});
    let without_pay = TREE.replace(
        "metadata: {name: pay, project: web}",
        "metadata: {name: pay2, project: web}",
    );
    let (s, v) = api
        .call(
            "POST",
            "/api/v1/apply",
            Some(body(true, None, false, &without_pay)),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
    // pay has no labels: a selector on team=pay only reaches cart, which is in the input.
    let (s, v) = api
        .call(
            "POST",
            "/api/v1/apply",
            Some(body(true, Some("team=pay"), true, &without_pay)),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(!actions(&v).iter().any(|a| a.ends_with("pruned")), "{v}");
    let pay2 = api.get("/api/v1/projects/web/tasks/pay2").await;
    assert_eq!(pay2["error"]["code"], "not_found", "dry run wrote nothing");
    // With an applyset: everything applied carries the label; prune removes pay.
    let (s, _) = api
        .call(
            "POST",
            "/api/v1/apply",
            Some(json!({"files": [{"name": "t.yaml", "content": TREE}], "applyset": "web"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, v) = api.call("POST", "/api/v1/apply", Some(json!({"files": [{"name": "t.yaml", "content": without_pay}], "applyset": "web", "prune": true}))).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert!(actions(&v).contains(&"Task pay pruned".to_string()), "{v}");
    assert!(
        !actions(&v)
            .iter()
            .any(|a| a.contains("Project") && a.ends_with("pruned")),
        "{v}"
    );
}

/// `lastUsedAt` is written when a token is used — at most once a
/// minute (by the injected clock), not once per request.
#[tokio::test]
async fn token_last_used_is_written_at_most_once_a_minute() {
    let api = Api::new().await;
    let last_used = || async {
        let list = api.get("/api/v1/tokens").await;
        list["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == "ops")
            .map(|t| t["lastUsedAt"].clone())
            .unwrap()
    };
    let settled = |want: Value| async move {
        for _ in 0..100 {
            if last_used().await == want {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        panic!("lastUsedAt never became {want}: {}", last_used().await);
    };
    use pam_controller::clock::Clock;
    let t0 = api.clock.now();
    settled(json!(pam_controller::clock::ts(t0))).await;
    api.clock.advance(chrono::Duration::seconds(30));
    for _ in 0..5 {
        api.call("GET", "/api/v1/projects", None).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(
        last_used().await,
        json!(pam_controller::clock::ts(t0)),
        "within a minute: not written again"
    );
    api.clock.advance(chrono::Duration::seconds(31));
    settled(json!(pam_controller::clock::ts(
        t0 + chrono::Duration::seconds(61)
    )))
    .await;
}

/// A host's one label set is what `-l` selects and what the host
/// shows (`status.labels`): the labels of examples/hosts.yaml (metadata)
/// and those a worker reports at registration alike — the latter under
/// `worker.pam.dev/`, so `os=linux` selects the operator's
/// label only.
#[tokio::test]
async fn host_selectors_match_the_labels_users_see() {
    let api = Api::new().await;
    let hosts = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/hosts.yaml"),
    )
    .unwrap();
    let (s, v) = api.apply("hosts.yaml", &hosts).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = api
        .call("POST", "/api/v1/tokens", Some(json!({"worker": "box-r"})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let wt = v["token"].as_str().unwrap().to_string();
    let inst = Uuid::new_v4();
    let reg = json!({"name": "box-r", "platform": "linux", "instance_id": inst,
        "capacity": 2, "labels": {"os": "linux"}, "version": "t"});
    let (s, v) = api
        .call_as(Some(&wt), "POST", "/api/v1/workers/register", Some(reg))
        .await;
    assert!(s.is_success(), "{s} {v}");
    for (selector, want) in [
        ("os%3Dlinux", ["build-linux-1"]),
        ("worker.pam.dev%2Fos%3Dlinux", ["box-r"]),
    ] {
        let (s, v) = api
            .call(
                "GET",
                &format!("/api/v1/hosts?labelSelector={selector}"),
                None,
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        let names: Vec<&str> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, want, "{selector}: {v}");
    }
    let h = api.get("/api/v1/hosts/box-r").await;
    assert_eq!(
        h["status"]["labels"],
        json!({"worker.pam.dev/os": "linux"}),
        "{h}"
    );
    assert!(h["spec"].get("labels").is_none(), "{h}");
    // Declared by an operator, the host keeps both sets apart; the
    // worker's report is replaced at each registration all the same.
    let declared = "apiVersion: pam.dev/v1\nkind: Host\nmetadata: {name: box-r, labels: {os: linux}}\nspec: {platform: linux, labels: {pool: gpu}}\n";
    let (s, v) = api.apply("box-r.yaml", declared).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let reg = json!({"name": "box-r", "platform": "linux", "instance_id": inst,
        "capacity": 2, "labels": {"pool": "cpu", "worker.pam.dev/os": "bsd"}, "version": "t"});
    let (s, v) = api
        .call_as(Some(&wt), "POST", "/api/v1/workers/register", Some(reg))
        .await;
    assert!(s.is_success(), "{s} {v}");
    let h = api.get("/api/v1/hosts/box-r").await;
    assert_eq!(
        h["status"]["labels"],
        json!({"os": "linux", "pool": "gpu", "worker.pam.dev/os": "bsd", "worker.pam.dev/pool": "cpu"}),
        "{h}"
    );
    assert_eq!(h["spec"]["labels"], json!({"pool": "gpu"}), "{h}");
    let h = api.get("/api/v1/hosts/build-linux-1").await;
    assert_eq!(
        h["status"]["labels"],
        json!({"os": "linux", "pam.dev/pool": "fast"}),
        "{h}"
    );
}

#[tokio::test]
async fn tokens_unauthenticated_revoked_and_worker_scopes() {
    let api = Api::new().await;
    let (s, v) = api.call_as(None, "GET", "/api/v1/projects", None).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert_eq!(v["error"]["code"], "unauthorized");
    let (s, _) = api
        .call_as(Some("pam_nope"), "GET", "/api/v1/projects", None)
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, v) = api
        .call("POST", "/api/v1/tokens", Some(json!({"name": "ci"})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let ci = v["token"].as_str().unwrap().to_string();
    let id = v["id"].as_str().unwrap().to_string();
    let (s, list) = api.call("GET", "/api/v1/tokens", None).await;
    assert_eq!(s, StatusCode::OK);
    assert!(!list.to_string().contains(&ci), "tokens are never listed");
    assert_eq!(
        api.call_as(Some(&ci), "GET", "/api/v1/projects", None)
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(
        api.call("DELETE", &format!("/api/v1/tokens/{id}"), None)
            .await
            .0,
        StatusCode::NO_CONTENT
    );
    let (s, v) = api
        .call_as(Some(&ci), "GET", "/api/v1/projects", None)
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(common::error_message(&v).contains("revoked"), "{v}");
    // A worker token may not call operator endpoints, nor act for another host.
    let (s, v) = api
        .call("POST", "/api/v1/tokens", Some(json!({"worker": "box-a"})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{v}");
    let wt = v["token"].as_str().unwrap().to_string();
    assert_eq!(
        api.call_as(Some(&wt), "GET", "/api/v1/projects", None)
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    let reg = |name: &str| json!({"name": name, "platform": "linux", "instance_id": Uuid::new_v4(), "capacity": 2, "labels": {}, "version": "t"});
    assert_eq!(
        api.call_as(
            Some(&wt),
            "POST",
            "/api/v1/workers/register",
            Some(reg("box-b"))
        )
        .await
        .0,
        StatusCode::FORBIDDEN
    );
    let (s, v) = api
        .call_as(
            Some(&wt),
            "POST",
            "/api/v1/workers/register",
            Some(reg("box-a")),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        api.call_as(
            Some(&api.token.clone()),
            "POST",
            "/api/v1/workers/register",
            Some(reg("box-a"))
        )
        .await
        .0,
        StatusCode::FORBIDDEN
    );
}

#[tokio::test]
async fn worker_protocol_claim_signals_and_attempt_guard() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    let run = "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: web}\nspec: {task: cart, provider: claude, prompt: hi, cwd: /tmp}\n";
    api.apply("run.yaml", run).await;
    let wt = common::token(&api.state, TokenKind::Worker, "w", Some("box-a")).await;
    let inst = Uuid::new_v4();
    let (s, v) = api
        .call_as(Some(&wt), "POST", "/api/v1/workers/register", Some(json!({"name": "box-a", "platform": "linux", "instance_id": inst, "capacity": 2, "labels": {"gpu": "no"}, "version": "t"})))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = api
        .call_as(Some(&wt), "POST", "/api/v1/workers/claim?wait=0", None)
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(v["runs"].as_array().unwrap().len(), 1, "{v}");
    let run_id = v["runs"][0]["run_id"].as_str().unwrap().to_string();
    assert_eq!(v["runs"][0]["attempt"], 1);
    let sig = |kind: &str, attempt: i32, extra: Value| {
        let mut s = json!({"run_id": run_id, "attempt": attempt, "kind": kind, "at": "2026-03-01T12:00:00Z"});
        s.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        s
    };
    let started = sig("started", 1, json!({}));
    // Delivered ten times: applied once, then duplicates.
    let mut outcomes = Vec::new();
    for _ in 0..10 {
        let (s, v) = api
            .call_as(
                Some(&wt),
                "POST",
                "/api/v1/workers/signals",
                Some(json!({"signals": [started.clone()]})),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        outcomes.push(v["results"][0]["outcome"].as_str().unwrap().to_string());
    }
    assert_eq!(outcomes[0], "applied");
    assert!(outcomes[1..].iter().all(|o| o == "duplicate"));
    assert_eq!(api.events("run.started").await.len(), 1);
    // attempt + 1: 4xx, nothing applied.
    let (s, v) = api
        .call_as(
            Some(&wt),
            "POST",
            "/api/v1/workers/signals",
            Some(json!({"signals": [sig("finished", 2, json!({"exit_code": 0}))]})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(v["results"][0]["outcome"], "rejected");
    assert!(api.events("run.finished").await.is_empty());
    // Desired set shows the run; finished applies.
    let (_, d) = api
        .call_as(Some(&wt), "GET", "/api/v1/workers/desired", None)
        .await;
    assert_eq!(d["runs"][0]["run_id"], run_id.as_str());
    let (s, v) = api
        .call_as(
            Some(&wt),
            "POST",
            "/api/v1/workers/signals",
            Some(json!({"signals": [sig("finished", 1, json!({"exit_code": 0}))]})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let r = api.get("/api/v1/projects/web/runs/r1").await;
    assert_eq!(r["status"]["phase"], "exited");
    assert_eq!(r["status"]["exitCode"], 0);
    assert_eq!(r["status"]["host"], "box-a");
    let _ = &api.clock;
}

/// The same signal delivered 10 times CONCURRENTLY (ten requests
/// racing through the router on real PostgreSQL) → exactly one applied,
/// nine duplicates, one effect, one event (processed_signals' INSERT … ON
/// CONFLICT DO NOTHING decides the winner).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_same_signal_delivered_ten_times_concurrently_applies_once() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    let (wt, ids) = api.claimed_runs(&["r1"]).await;
    let run_id = ids[0].clone();
    for (kind, extra, topic) in [
        ("started", json!({}), "run.started"),
        ("finished", json!({"exit_code": 3}), "run.finished"),
    ] {
        let mut sig =
            json!({"run_id": run_id, "attempt": 1, "kind": kind, "at": "2026-03-01T12:00:00Z"});
        sig.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let body = json!({ "signals": [sig] });
        let barrier = Arc::new(tokio::sync::Barrier::new(10));
        let mut handles = Vec::new();
        for _ in 0..10 {
            let state = api.state.clone();
            let (wt, body, barrier) = (wt.clone(), body.clone(), barrier.clone());
            handles.push(tokio::spawn(async move {
                barrier.wait().await;
                let signals = "/api/v1/workers/signals";
                request(state, Some(&wt), "POST", signals, Some(body)).await
            }));
        }
        let mut outcomes = Vec::new();
        for h in handles {
            let (s, v) = h.await.unwrap();
            assert_eq!(s, StatusCode::OK, "{v}");
            outcomes.push(v["results"][0]["outcome"].as_str().unwrap().to_string());
        }
        outcomes.sort();
        let mut want = vec!["applied".to_string()];
        want.extend(std::iter::repeat_n("duplicate".to_string(), 9));
        want.sort();
        assert_eq!(outcomes, want, "{kind}");
        assert_eq!(api.events(topic).await.len(), 1, "{kind}: one event");
    }
    let r = api.get("/api/v1/projects/web/runs/r1").await;
    assert_eq!(r["status"]["phase"], "failed", "exit 3 → failed, once");
    assert_eq!(r["status"]["exitCode"], 3);
    assert!(
        api.events("run.failed").await.is_empty(),
        "a non-zero exit journals run.finished only"
    );
}

/// Set-based ingest on real PostgreSQL: concurrent batches naming the same
/// runs in opposite orders serialize on the runs' row locks (taken in id
/// order, so no deadlock), each one-shot signal applies exactly once, and
/// a whole life (started, progress, finished) in one batch lands in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_batches_over_the_same_runs_apply_each_signal_once() {
    let api = Api::new().await;
    api.apply("tree.yaml", TREE).await;
    let (wt, ids) = api.claimed_runs(&["r1", "r2"]).await;
    let sig = |id: &str, kind: &str, extra: Value| {
        let mut s = json!({"run_id": id, "attempt": 1, "kind": kind, "at": "2026-03-01T12:00:00Z"});
        s.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        s
    };
    let forward = json!({"signals": [sig(&ids[0], "started", json!({})), sig(&ids[1], "started", json!({}))]});
    let backward = json!({"signals": [sig(&ids[1], "started", json!({})), sig(&ids[0], "started", json!({}))]});
    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let mut handles = Vec::new();
    for i in 0..8 {
        let state = api.state.clone();
        let body = if i % 2 == 0 { &forward } else { &backward }.clone();
        let (wt, barrier) = (wt.clone(), barrier.clone());
        handles.push(tokio::spawn(async move {
            barrier.wait().await;
            let signals = "/api/v1/workers/signals";
            request(state, Some(&wt), "POST", signals, Some(body)).await
        }));
    }
    let mut applied = 0;
    for h in handles {
        let (s, v) = h.await.unwrap();
        assert_eq!(s, StatusCode::OK, "{v}");
        for r in v["results"].as_array().unwrap() {
            match r["outcome"].as_str().unwrap() {
                "applied" => applied += 1,
                "duplicate" => {}
                o => panic!("unexpected outcome {o}: {v}"),
            }
        }
    }
    assert_eq!(applied, 2, "each run's started applied once");
    assert_eq!(api.events("run.started").await.len(), 2);

    // One batch: progress out of order, then finished, for r1.
    let batch = json!({"signals": [
        sig(&ids[0], "progress", json!({"seq": 2})),
        sig(&ids[0], "progress", json!({"seq": 1})),
        sig(&ids[0], "finished", json!({"exit_code": 0})),
        sig(&ids[0], "progress", json!({"seq": 3})),
    ]});
    let (s, v) = api
        .call_as(Some(&wt), "POST", "/api/v1/workers/signals", Some(batch))
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        common::results(&v, "outcome"),
        ["applied", "duplicate", "applied", "stale"]
    );
    let finished = api.events("run.finished").await;
    assert_eq!(finished.len(), 1);
    let mut tx = api.state.ctx.store.begin().await.unwrap();
    let r1 = tx.get_run(ids[0].parse().unwrap()).await.unwrap().unwrap();
    assert_eq!(
        (r1.status, r1.exit_code, r1.last_progress_seq),
        (pam_manifests::state::RunStatus::Exited, Some(0), Some(2))
    );
}

/// An applyset records the kinds and projects it holds (as kubectl's
/// ApplySet parent records its group-kinds): re-applied with prune after
/// the last Secret and Schedule left the input, it prunes both, and a diff
/// with prune shows them going — though the input names no Secret or
/// Schedule any more.
#[tokio::test]
async fn an_applyset_prunes_kinds_that_left_its_input() {
    let api = Api::new().await;
    let with_extras = format!(
        "{TREE}---
apiVersion: pam.dev/v1
kind: Secret
metadata: {{name: keys, project: web}}
spec: {{stringData: {{A: b}}}}
---
apiVersion: pam.dev/v1
kind: Schedule
metadata: {{name: nightly, project: web}}
spec:
  schedule: \"30 2 * * *\"
  runTemplate: {{task: cart, provider: exec, command: [\"true\"], cwd: /tmp}}
"
    );
    let apply = |content: String, prune: bool, path: &'static str| {
        let api = &api;
        async move {
            api.call(
                "POST",
                path,
                Some(json!({"files": [{"name": "t.yaml", "content": content}], "applyset": "web", "prune": prune})),
            )
            .await
        }
    };
    let (s, v) = apply(with_extras, false, "/api/v1/apply").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = apply(TREE.to_string(), true, "/api/v1/diff").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let going: Vec<String> = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["action"] == "prune")
        .map(|i| {
            format!(
                "{} {}",
                i["kind"].as_str().unwrap(),
                i["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(going, ["Schedule nightly", "Secret keys"], "{v}");
    let (s, v) = apply(TREE.to_string(), true, "/api/v1/apply").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let acts = actions(&v);
    assert!(acts.contains(&"Secret keys pruned".to_string()), "{v}");
    assert!(acts.contains(&"Schedule nightly pruned".to_string()), "{v}");
    let gone = api.get("/api/v1/projects/web/secrets/keys").await;
    assert_eq!(gone["error"]["code"], "not_found", "{gone}");
}
