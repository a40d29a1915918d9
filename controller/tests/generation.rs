//! "A spec change bumps generation once; observedGeneration and the Applied
//! condition follow" (docs/architecture.md, rules::meta) — driven through
//! every path that changes a spec: apply, run stop, host disable/enable,
//! task transitions (the verbs and the dashboard's board drag use the same
//! endpoint). The whole HTTP router runs on MemStore here.

mod common;

use std::sync::Arc;

use chrono::{TimeZone, Utc};
use common::request;
use pam_controller::api::AppState;
use pam_controller::clock::ManualClock;
use pam_store::memory::MemStore;
use pam_store::TokenKind;
use serde_json::{json, Value};

async fn setup() -> (AppState, String) {
    let clock = Arc::new(ManualClock::new(
        Utc.with_ymd_and_hms(2026, 5, 1, 9, 0, 0).unwrap(),
    ));
    let state = AppState::new(Arc::new(MemStore::new()), clock, Default::default());
    let mut tx = state.ctx.store.begin().await.unwrap();
    let (_, token) = pam_controller::rules::tokens::mint(
        tx.as_mut(),
        TokenKind::Operator,
        "t".into(),
        None,
        state.ctx.now(),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    (state, token)
}

const TREE: &str = "\
apiVersion: pam.dev/v1
kind: Project
metadata: {name: gen}
spec: {displayName: Gen}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: t1, project: gen}
spec: {title: First}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: r1, project: gen}
spec: {task: t1, provider: exec, cwd: /tmp, command: [cat]}
---
apiVersion: pam.dev/v1
kind: Host
metadata: {name: h1}
spec: {platform: linux}
";

async fn apply(st: &AppState, token: &str, yaml: &str) -> Value {
    let (status, body) = common::apply(st, token, "tree.yaml", yaml).await;
    assert!(status.is_success(), "{status} {body}");
    body
}

async fn get(st: &AppState, token: &str, uri: &str) -> Value {
    let (status, body) = request(st.clone(), Some(token), "GET", uri, None).await;
    assert!(status.is_success(), "{uri}: {status} {body}");
    body
}

/// (generation, observedGeneration, the Applied condition's message).
fn generations(obj: &Value) -> (i64, i64, String) {
    let applied = obj["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Applied"))
        .unwrap_or_else(|| panic!("no Applied condition: {obj}"));
    assert_eq!(applied["status"], "True");
    (
        obj["metadata"]["generation"].as_i64().unwrap(),
        obj["status"]["observedGeneration"].as_i64().unwrap(),
        applied["message"].as_str().unwrap().to_string(),
    )
}

fn at(generation: i64) -> (i64, i64, String) {
    (
        generation,
        generation,
        format!("generation {generation} applied"),
    )
}

#[tokio::test]
async fn every_spec_change_bumps_generation_once_and_status_follows() {
    let (st, token) = setup().await;
    let tok = token.as_str();
    apply(&st, tok, TREE).await;
    let task = "/api/v1/projects/gen/tasks/t1";
    let run = "/api/v1/projects/gen/runs/r1";
    let host = "/api/v1/hosts/h1";
    for uri in [task, run, host, "/api/v1/projects/gen"] {
        assert_eq!(generations(&get(&st, tok, uri).await), at(1), "{uri}");
    }

    // apply: the same input changes nothing; a changed spec is one bump.
    apply(&st, tok, TREE).await;
    assert_eq!(generations(&get(&st, tok, task).await), at(1));
    apply(&st, tok, &TREE.replace("title: First", "title: Renamed")).await;
    assert_eq!(generations(&get(&st, tok, task).await), at(2));

    // A task transition (pamctl task start, the board's drag) records the
    // desired status: one bump; the same transition again: none.
    for (to, want) in [("doing", 3), ("doing", 3), ("done", 4)] {
        let (status, body) = request(
            st.clone(),
            Some(tok),
            "POST",
            &format!("{task}/transition"),
            Some(json!({ "to": to })),
        )
        .await;
        assert!(status.is_success(), "{status} {body}");
        let t = get(&st, tok, task).await;
        assert_eq!(generations(&t), at(want), "after → {to}");
        assert_eq!(t["spec"]["status"], to);
        assert_eq!(t["status"]["phase"], to);
    }

    // Stop: one bump; stopping again: none.
    for want in [2, 2] {
        let (status, body) =
            request(st.clone(), Some(tok), "POST", &format!("{run}/stop"), None).await;
        assert!(status.is_success(), "{status} {body}");
        let r = get(&st, tok, run).await;
        assert_eq!(generations(&r), at(want));
        assert_eq!(r["spec"]["stopped"], true);
    }

    // Host disable / enable: one bump each; disabling twice: one.
    for (action, want, phase) in [
        ("disable", 2, "disabled"),
        ("disable", 2, "disabled"),
        ("enable", 3, "registered"),
    ] {
        let (status, body) = request(
            st.clone(),
            Some(tok),
            "POST",
            &format!("{host}/{action}"),
            None,
        )
        .await;
        assert!(status.is_success(), "{status} {body}");
        let h = get(&st, tok, host).await;
        assert_eq!(generations(&h), at(want), "after {action}");
        assert_eq!(h["status"]["phase"], phase);
    }

    // Labels only: written, same generation.
    let host_doc = TREE.split("---\n").last().unwrap();
    apply(
        &st,
        tok,
        &host_doc.replace(
            "metadata: {name: h1}",
            "metadata: {name: h1, labels: {a: b}}",
        ),
    )
    .await;
    let h = get(&st, tok, host).await;
    assert_eq!(h["metadata"]["labels"]["a"], "b");
    assert_eq!(generations(&h), at(3));
}
