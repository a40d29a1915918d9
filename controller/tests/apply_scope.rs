//! Apply reads only what its batch names: the batch's tasks,
//! their parents and stored ancestors, its runs and their tasks. These
//! cases need stored rows the batch does *not* name — an ancestor met on
//! the OQ-6 parent walk, a task in another project the batch names — and
//! check the answers are exactly what reading whole projects gave.
//! Against both stores, through the real router.

mod common;

use std::sync::Arc;

use axum::http::StatusCode;
use pam_controller::api::AppState;
use pam_controller::clock::SystemClock;
use pam_store::Store;
use serde_json::Value;

async fn state(store: Arc<dyn Store>) -> (AppState, String) {
    let state = AppState::new(store, Arc::new(SystemClock), Default::default());
    let token = common::operator_token(&state).await;
    (state, token)
}

async fn apply(s: &(AppState, String), yaml: &str) -> (StatusCode, Value) {
    common::apply(&s.0, &s.1, "b.yaml", yaml).await
}

fn project(name: &str) -> String {
    format!("---\napiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: {name}}}\nspec: {{}}\n")
}

fn task(name: &str, project: &str, parent: Option<&str>) -> String {
    let parent = parent.map_or(String::new(), |p| format!(", parent: {p}"));
    format!("---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {name}, project: {project}}}\nspec: {{title: T{parent}}}\n")
}

fn run(name: &str, project: &str, task: &str) -> String {
    format!("---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {name}, project: {project}}}\nspec: {{task: {task}, provider: claude, prompt: hi, cwd: /tmp}}\n")
}

fn displays(v: &Value) -> Vec<String> {
    v["errors"]
        .as_array()
        .map(|e| {
            e.iter()
                .map(|e| e["display"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

async fn scenarios(store: Arc<dyn Store>) {
    let s = state(store).await;
    // web: a ← b ← c ← d (a chain), plus unrelated tasks; other: far.
    let mut stored = project("web") + &project("other");
    stored += &task("a", "web", None);
    stored += &task("b", "web", Some("a"));
    stored += &task("c", "web", Some("b"));
    stored += &task("d", "web", Some("c"));
    for i in 0..20 {
        stored += &task(&format!("n{i}"), "web", Some("a"));
    }
    stored += &task("far", "other", None);
    let (st, v) = apply(&s, &stored).await;
    assert_eq!(st, StatusCode::OK, "{v}");

    // The walk from b's new parent x (new) goes to d (named), then to c
    // — stored, named by nobody — then to b: a cycle. Both documents that
    // close it are named, each at its own parent field.
    let batch = task("x", "web", Some("d")) + &task("b", "web", Some("x"));
    let (st, v) = apply(&s, &batch).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(
        displays(&v),
        [
            "b.yaml: document 0, line 5, column 26: spec.parent: parent \"d\" makes a cycle x → d → c → b → x, expected a parent that is not \"x\" or one of its descendants",
            "b.yaml: document 1, line 10, column 26: spec.parent: parent \"x\" makes a cycle b → x → d → c → b, expected a parent that is not \"b\" or one of its descendants",
        ],
        "{v}"
    );

    // A parent stored in another project that the batch names too (by a
    // task of its own): the error names that project.
    let batch = task("y", "web", Some("far")) + &task("z", "other", None);
    let (st, v) = apply(&s, &batch).await;
    assert_eq!(st, StatusCode::UNPROCESSABLE_ENTITY, "{v}");
    assert_eq!(
        displays(&v),
        ["b.yaml: document 0, line 5, column 26: spec.parent: task \"far\" is in project \"other\", expected a task in project \"web\""],
        "{v}"
    );

    // A run on a stored task deep in the chain; a new task under a stored
    // one; then the same again: all unchanged.
    let batch = run("r1", "web", "d") + &task("e", "web", Some("d")) + &task("c", "web", Some("b"));
    let (st, v) = apply(&s, &batch).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(
        common::results(&v, "action"),
        ["created", "unchanged", "created"],
        "{v}"
    );
    let (st, v) = apply(&s, &batch).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert!(
        common::results(&v, "action")
            .iter()
            .all(|a| *a == "unchanged"),
        "{v}"
    );

    // A valid reparent across the chain: d moves to the root, then c under d.
    let batch = task("d", "web", None) + &task("c", "web", Some("d"));
    let (st, v) = apply(&s, &batch).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    let (_, c) = common::request(
        s.0.clone(),
        Some(&s.1),
        "GET",
        "/api/v1/projects/web/tasks/c",
        None,
    )
    .await;
    assert_eq!(c["spec"]["parent"], "d", "{c}");
}

#[tokio::test]
async fn apply_reads_what_the_batch_names_memory() {
    scenarios(Arc::new(pam_store::memory::MemStore::new())).await;
}

#[tokio::test]
async fn apply_reads_what_the_batch_names_postgres() {
    let pool = pam_testkit::testdb::fresh_pool().await.unwrap();
    scenarios(Arc::new(pam_store::postgres::PgStore::new(pool))).await;
}
