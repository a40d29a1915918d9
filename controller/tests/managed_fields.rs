//! Apply that merges (managed fields, server-side-apply semantics) and
//! the last applier, through the real router on
//! real PostgreSQL, with a directory Source synced in process: a label an
//! operator set survives another applier's manifest (and a Source's)
//! without labels; an applier's own dropped field goes; another value for
//! a field another manager owns is a 409 naming the way out;
//! `forceConflicts` takes it; the same value is shared.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use chrono::{TimeZone, Utc};
use pam_controller::api::AppState;
use pam_controller::clock::ManualClock;
use pam_controller::sync::cache::SourceCache;
use pam_controller::sync::fetch::{GitAuth, Repos};
use pam_controller::sync::roots::DirPolicy;
use pam_controller::sync::runner::{sync_source, Trigger};
use pam_manifests::kinds::SourceSpec;
use pam_store::{Source, TokenKind};
use serde_json::{json, Value};

struct World {
    state: AppState,
    clock: Arc<ManualClock>,
    ops: String,
    ci: String,
    dir: tempfile::TempDir,
    cache: SourceCache,
}

const PROJECT: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {}\n";

fn task(title: &str, labels: &str) -> String {
    format!("---\napiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: build\n  project: web\n{labels}spec:\n  title: {title}\n")
}

impl World {
    async fn new() -> World {
        let store = Arc::new(pam_store::postgres::PgStore::new(
            pam_testkit::testdb::fresh_pool().await.unwrap(),
        ));
        let clock = Arc::new(ManualClock::new(
            Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap(),
        ));
        let state = AppState::new(store, clock.clone(), Default::default());
        let ops = common::operator_token(&state).await;
        let ci = common::token(&state, TokenKind::Operator, "ci", None).await;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("tree")).unwrap();
        World {
            state,
            clock,
            ops,
            ci,
            dir,
            cache: SourceCache::default(),
        }
    }

    async fn call(
        &self,
        token: &str,
        method: &str,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        common::request(self.state.clone(), Some(token), method, uri, body).await
    }

    /// `pamctl apply -f` of `yaml` as `token`; `query`: `?forceConflicts=true`.
    async fn apply(&self, token: &str, yaml: &str, query: &str) -> (StatusCode, Value) {
        self.clock.advance(chrono::Duration::seconds(1));
        let body = json!({ "files": [{ "name": "m.yaml", "content": yaml }] });
        self.call(token, "POST", &format!("/api/v1/apply{query}"), Some(body))
            .await
    }

    async fn task(&self) -> Value {
        let (s, v) = self
            .call(&self.ops, "GET", "/api/v1/projects/web/tasks/build", None)
            .await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v
    }

    fn labels(v: &Value) -> Value {
        v["metadata"]["labels"].clone()
    }

    /// What `pamctl label task build KEY=VALUE|KEY- --overwrite` sends:
    /// the object as read, server-set fields dropped, one label changed.
    async fn label(&self, key: &str, value: Option<&str>, force: bool) -> (StatusCode, Value) {
        self.clock.advance(chrono::Duration::seconds(1));
        let mut obj = self.task().await;
        obj.as_object_mut().unwrap().remove("status");
        let meta = obj["metadata"].as_object_mut().unwrap();
        for f in pam_manifests::kinds::SERVER_SET_METADATA {
            meta.remove(f);
        }
        let labels = meta.entry("labels").or_insert(json!({}));
        match value {
            Some(v) => labels[key] = json!(v),
            None => {
                labels.as_object_mut().unwrap().remove(key);
            }
        }
        let force = if force { "&forceConflicts=true" } else { "" };
        let body = json!({ "objects": [obj] });
        self.call(
            &self.ops,
            "POST",
            &format!("/api/v1/apply?fieldManager=label{force}"),
            Some(body),
        )
        .await
    }

    /// The managers of the task and their fields, by manager.
    async fn managers(&self) -> Vec<(String, Vec<String>)> {
        let v = self.task().await;
        let mut out: Vec<(String, Vec<String>)> = v["metadata"]["managedFields"]
            .as_array()
            .unwrap_or_else(|| panic!("no managedFields in {v}"))
            .iter()
            .map(|e| {
                let fields = e["fields"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|f| f.as_str().unwrap().to_string())
                    .collect();
                (e["manager"].as_str().unwrap().to_string(), fields)
            })
            .collect();
        out.sort();
        out
    }

    fn write(&self, name: &str, text: &str) {
        std::fs::write(self.dir.path().join("tree").join(name), text).unwrap();
    }

    async fn sync(&mut self) {
        let mut tx = self.state.ctx.store.begin().await.unwrap();
        let s = tx.by_name::<Source>((), "gops").await.unwrap().unwrap();
        drop(tx);
        let spec: SourceSpec = serde_json::from_value(s.meta.spec.clone()).unwrap();
        let data = self.dir.path().join("data");
        let dirs = DirPolicy::new(&data, &[self.dir.path().to_path_buf()], Duration::ZERO);
        let repos = Repos::new(&data, GitAuth::default()).with_dirs(dirs);
        self.clock.advance(chrono::Duration::seconds(1));
        let s = sync_source(
            &self.state.ctx,
            &repos,
            s,
            &spec,
            &mut self.cache,
            Trigger::Due,
        )
        .await
        .unwrap()
        .expect("synced");
        assert!(
            s.status.errors.as_array().is_none_or(|e| e.is_empty()),
            "{:?}",
            s.status
        );
    }
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn another_appliers_manifest_without_labels_keeps_the_operators_label() {
    let w = World::new().await;
    let (s, v) = w
        .apply(
            &w.ci,
            &(PROJECT.to_string() + &task("A", "  labels: {team: web}\n")),
            "",
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = w.label("tier", Some("frontend"), false).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // ci's manifest names neither label now: its own goes, the
    // operator's stays.
    let (s, v) = w.apply(&w.ci, &task("B", ""), "").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let t = w.task().await;
    assert_eq!(World::labels(&t), json!({"tier": "frontend"}));
    assert_eq!(t["spec"]["title"], "B");
    assert_eq!(
        w.managers().await,
        [
            ("apply:ci".to_string(), strs(&["spec.title"])),
            ("label:ops".to_string(), strs(&["metadata.labels.tier"])),
        ]
    );
    // Each entry says how and when, oldest first: the last
    // applier is ci.
    let entries = t["metadata"]["managedFields"].as_array().unwrap();
    assert_eq!(entries[0]["manager"], "label:ops");
    assert_eq!(entries[0]["operation"], "Update");
    assert_eq!(entries[1]["manager"], "apply:ci");
    assert_eq!(entries[1]["operation"], "Apply");
    assert!(entries[1]["time"].as_str().unwrap() > entries[0]["time"].as_str().unwrap());
    // The same manifest again changes nothing, record included.
    let (_, v) = w.apply(&w.ci, &task("B", ""), "").await;
    assert_eq!(v["results"][0]["action"], "unchanged");
    assert_eq!(
        w.task().await["metadata"]["managedFields"],
        t["metadata"]["managedFields"]
    );
    // What a diff of ci's manifest shows is the merge: the label stays.
    let body = json!({ "files": [{ "name": "m.yaml", "content": task("C", "") }] });
    let (s, v) = w.call(&w.ci, "POST", "/api/v1/diff", Some(body)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        v["items"][0]["desired"]["labels"],
        json!({"tier": "frontend"})
    );
    assert_eq!(v["items"][0]["desired"]["spec"]["title"], "C");
}

#[tokio::test]
async fn another_value_is_a_conflict_the_same_is_shared_and_force_takes_it() {
    let w = World::new().await;
    let (s, _) = w
        .apply(&w.ci, &(PROJECT.to_string() + &task("A", "")), "")
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = w.label("tier", Some("frontend"), false).await;
    assert_eq!(s, StatusCode::OK);
    let backend = task("A", "  labels: {tier: backend}\n");
    let (s, v) = w.apply(&w.ci, &backend, "").await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert_eq!(v["error"]["code"], "field_conflict", "{v}");
    // A diff says the same, and with forceConflicts what the forced
    // apply would write.
    let body = json!({ "files": [{ "name": "m.yaml", "content": backend.clone() }] });
    let (s, dv) = w
        .call(&w.ci, "POST", "/api/v1/diff", Some(body.clone()))
        .await;
    assert_eq!(s, StatusCode::CONFLICT, "{dv}");
    let (s, dv) = w
        .call(
            &w.ci,
            "POST",
            "/api/v1/diff?forceConflicts=true",
            Some(body),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{dv}");
    assert_eq!(
        dv["items"][0]["desired"]["labels"],
        json!({"tier": "backend"}),
        "{dv}"
    );
    let m = common::error_message(&v);
    assert!(
        m.contains("Task web/build: metadata.labels.tier (owned by label:ops)"),
        "{m}"
    );
    assert!(m.contains("--force-conflicts"), "{m}");
    assert_eq!(World::labels(&w.task().await), json!({"tier": "frontend"}));
    // The same value: no conflict, both own it.
    let (s, v) = w
        .apply(&w.ci, &task("A", "  labels: {tier: frontend}\n"), "")
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(
        w.managers().await,
        [
            (
                "apply:ci".to_string(),
                strs(&["spec.title", "metadata.labels.tier"])
            ),
            ("label:ops".to_string(), strs(&["metadata.labels.tier"])),
        ]
    );
    // The operator changing a field ci applied is a conflict too…
    let (s, v) = w.label("tier", Some("edge"), false).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    assert!(
        common::error_message(&v).contains("owned by apply:ci"),
        "{v}"
    );
    // …and ci forcing its value takes the label from the operator.
    let (s, v) = w.apply(&w.ci, &backend, "?forceConflicts=true").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    assert_eq!(World::labels(&w.task().await), json!({"tier": "backend"}));
    assert_eq!(
        w.managers().await,
        [(
            "apply:ci".to_string(),
            strs(&["spec.title", "metadata.labels.tier"])
        )]
    );
    // An unknown field manager is a 400, nothing written.
    let (s, v) = w
        .call(
            &w.ops,
            "POST",
            "/api/v1/apply?fieldManager=source",
            Some(json!({"objects": []})),
        )
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{v}");
}

#[tokio::test]
async fn a_sources_sync_keeps_an_operators_label_and_drops_its_own() {
    let mut w = World::new().await;
    let tree = w.dir.path().join("tree");
    let source = format!(
        "apiVersion: pam.dev/v1\nkind: Source\nmetadata: {{name: gops}}\nspec:\n  path: {}\n  interval: 1h\n  projects: [web]\n",
        tree.display()
    );
    let (s, v) = w.apply(&w.ops, &source, "").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    w.write("p.yaml", PROJECT);
    w.write("t.yaml", &task("A", "  labels: {team: web}\n"));
    w.sync().await;
    assert_eq!(
        w.managers().await,
        [(
            "source:gops".to_string(),
            strs(&["spec.title", "metadata.labels.team"])
        )]
    );
    // The Source's label: a 409 naming the Source and the way out.
    let (s, v) = w.label("team", Some("api"), false).await;
    assert_eq!(s, StatusCode::CONFLICT, "{v}");
    let m = common::error_message(&v);
    assert!(
        m.contains("owned by source:gops") && m.contains("Source gops's manifests"),
        "{m}"
    );
    // A label of the operator's own.
    let (s, v) = w.label("tier", Some("frontend"), false).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // The Source's manifest drops its label: it goes; the operator's stays.
    w.write("t.yaml", &task("A", ""));
    w.sync().await;
    assert_eq!(World::labels(&w.task().await), json!({"tier": "frontend"}));
    assert_eq!(
        w.managers().await,
        [
            ("label:ops".to_string(), strs(&["metadata.labels.tier"])),
            ("source:gops".to_string(), strs(&["spec.title"])),
        ]
    );
}
