//! The one prune. `apply --prune -l` prunes every kind of the
//! set — Sources, Webhooks, Secrets and Schedules too, not only Runs,
//! Tasks, Hosts and Projects — and never cascades silently: a task whose
//! deletion would take runs the apply does not prune is kept and reported
//! (the rule a Source's sync already followed), as is an object a Source
//! owns. Through the real router on real PostgreSQL.

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use pam_controller::api::AppState;
use pam_controller::clock::SystemClock;
use serde_json::{json, Value};

struct Api {
    state: AppState,
    token: String,
}

impl Api {
    async fn new() -> Api {
        let store = Arc::new(pam_store::postgres::PgStore::new(
            pam_testkit::testdb::fresh_pool().await.unwrap(),
        ));
        let state = AppState::new(store, Arc::new(SystemClock), Default::default());
        let token = common::operator_token(&state).await;
        Api { state, token }
    }

    async fn apply(&self, yaml: &str, prune: Option<&str>) -> Value {
        let mut body = json!({ "files": [{ "name": "set.yaml", "content": yaml }] });
        if let Some(sel) = prune {
            body["prune"] = json!(true);
            body["selector"] = json!(sel);
        }
        let (s, v) = common::request(
            self.state.clone(),
            Some(&self.token),
            "POST",
            "/api/v1/apply",
            Some(body),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v
    }

    async fn names(&self, path: &str) -> Vec<String> {
        let (s, v) =
            common::request(self.state.clone(), Some(&self.token), "GET", path, None).await;
        assert_eq!(s, StatusCode::OK, "{path}: {v}");
        let mut names: Vec<String> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    }
}

/// `(kind, name, action)` of each result, sorted.
fn actions(v: &Value) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] != "unchanged")
        .map(|r| {
            (
                r["kind"].as_str().unwrap().to_string(),
                r["name"].as_str().unwrap().to_string(),
                r["action"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

const PROJECT: &str =
    "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web, labels: {set: a}}\nspec: {}\n";

fn secret(name: &str) -> String {
    format!("---\napiVersion: pam.dev/v1\nkind: Secret\nmetadata: {{name: {name}, project: web, labels: {{set: a}}}}\nspec:\n  stringData: {{signing: s3cret-value}}\n")
}

fn webhook(name: &str, secret: &str) -> String {
    format!("---\napiVersion: pam.dev/v1\nkind: Webhook\nmetadata: {{name: {name}, labels: {{set: a}}}}\nspec:\n  url: https://ci.example.com/hooks/{name}\n  topics: [run.]\n  projects: [web]\n  signingSecretRef: {{project: web, name: {secret}, key: signing}}\n")
}

fn schedule(name: &str) -> String {
    format!("---\napiVersion: pam.dev/v1\nkind: Schedule\nmetadata: {{name: {name}, project: web, labels: {{set: a}}}}\nspec:\n  schedule: \"30 2 * * *\"\n  runTemplate: {{task: build, provider: claude, prompt: hi, cwd: /tmp}}\n")
}

fn source(name: &str) -> String {
    format!("---\napiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: {name}, labels: {{set: a}}}}\nspec:\n  git: {{url: https://git.example.com/{name}.git, ref: main}}\n  interval: 1h\n  projects: [web]\n")
}

const TASK: &str = "---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: build, project: web, labels: {set: a}}\nspec: {title: Build}\n";

#[tokio::test]
async fn apply_prune_removes_every_kind_of_the_set() {
    let api = Api::new().await;
    let full = [
        PROJECT.to_string(),
        TASK.to_string(),
        secret("keep-key"),
        secret("old-key"),
        webhook("keep-hook", "keep-key"),
        webhook("old-hook", "keep-key"),
        schedule("keep-nightly"),
        schedule("old-nightly"),
        source("keep-src"),
        source("old-src"),
    ]
    .concat();
    api.apply(&full, None).await;
    let fewer = [
        PROJECT.to_string(),
        TASK.to_string(),
        secret("keep-key"),
        webhook("keep-hook", "keep-key"),
        schedule("keep-nightly"),
        source("keep-src"),
    ]
    .concat();
    let v = api.apply(&fewer, Some("set=a")).await;
    assert_eq!(
        actions(&v),
        [
            ("Schedule".into(), "old-nightly".into(), "pruned".into()),
            ("Secret".into(), "old-key".into(), "pruned".into()),
            ("Source".into(), "old-src".into(), "pruned".into()),
            ("Webhook".into(), "old-hook".into(), "pruned".into()),
        ],
        "{v}"
    );
    assert_eq!(
        api.names("/api/v1/projects/web/secrets").await,
        ["keep-key"]
    );
    assert_eq!(
        api.names("/api/v1/projects/web/schedules").await,
        ["keep-nightly"]
    );
    assert_eq!(api.names("/api/v1/webhooks").await, ["keep-hook"]);
    assert_eq!(api.names("/api/v1/sources").await, ["keep-src"]);
}

#[tokio::test]
async fn pruning_a_task_never_takes_runs_the_apply_does_not_prune() {
    let api = Api::new().await;
    let run = |name: &str, labels: &str| {
        format!("---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {name}, project: web{labels}}}\nspec: {{task: build, provider: claude, prompt: hi, cwd: /tmp}}\n")
    };
    let other = "---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: lint, project: web, labels: {set: a}}\nspec: {title: Lint}\n";
    api.apply(&[PROJECT, TASK, other].concat(), None).await;
    // An operator's run of `build`, outside the set (no label).
    api.apply(&run("by-hand", ""), None).await;

    // `build` leaves the set: pruning it would delete by-hand (FK
    // cascade), so it is kept and the answer says why.
    let v = api.apply(&[PROJECT, other].concat(), Some("set=a")).await;
    let kept: Vec<&Value> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["action"] == "kept")
        .collect();
    assert_eq!(kept.len(), 1, "{v}");
    assert_eq!(kept[0]["name"], "build");
    let why = kept[0]["message"].as_str().unwrap();
    assert!(why.contains("run by-hand"), "{why}");
    assert!(!v.to_string().contains("\"pruned\""), "{v}");
    assert_eq!(api.names("/api/v1/projects/web/runs").await, ["by-hand"]);
    assert_eq!(
        api.names("/api/v1/projects/web/tasks").await,
        ["build", "lint"]
    );

    // A run inside the set goes with its task when Runs are in play (the
    // input has one): both pruned, the task after its run.
    api.apply(&run("in-set", ", labels: {set: a}"), None).await;
    let stays = "---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: stays, project: web, labels: {set: a}}\nspec: {task: lint, provider: claude, prompt: hi, cwd: /tmp}\n";
    let (s, v) = common::request(
        api.state.clone(),
        Some(&api.token),
        "DELETE",
        "/api/v1/projects/web/runs/by-hand",
        None,
    )
    .await;
    assert!(s.is_success(), "{v}");
    let v = api
        .apply(&[PROJECT, other, stays].concat(), Some("set=a"))
        .await;
    assert_eq!(
        actions(&v),
        [
            ("Run".into(), "in-set".into(), "pruned".into()),
            ("Run".into(), "stays".into(), "created".into()),
            ("Task".into(), "build".into(), "pruned".into()),
        ],
        "{v}"
    );
    assert_eq!(api.names("/api/v1/projects/web/tasks").await, ["lint"]);
}
