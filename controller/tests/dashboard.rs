//! The dashboard's serving (embedded assets, CSP, ETag/304, JSON 404) and
//! its run-timeline endpoint, through the real router on real PostgreSQL.

mod common;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use http_body_util::BodyExt;
use pam_controller::api::{router, AppState};
use serde_json::Value;
use tower::ServiceExt;

async fn state() -> AppState {
    common::pg_state().await.0
}

struct Resp {
    status: StatusCode,
    headers: axum::http::HeaderMap,
    body: Vec<u8>,
}

async fn send(state: &AppState, req: Request<Body>) -> Resp {
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let body = resp
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
        .to_vec();
    Resp {
        status,
        headers,
        body,
    }
}

async fn get(state: &AppState, uri: &str) -> Resp {
    send(state, Request::get(uri).body(Body::empty()).unwrap()).await
}

#[tokio::test]
async fn index_is_served_with_csp_etag_and_revalidates_to_304() {
    let st = state().await;
    let r = get(&st, "/").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers[header::CONTENT_TYPE], "text/html; charset=utf-8");
    let csp = r.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    assert!(csp.contains("default-src 'none'"), "{csp}");
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(r.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    let html = String::from_utf8(r.body).unwrap();
    assert!(html.contains(r#"<script type="module" src="/ui/app.js">"#));
    // No inline script or style (the CSP would block them anyway).
    assert!(!html.contains("<script>") && !html.contains("style="));
    let etag = r.headers[header::ETAG].to_str().unwrap().to_string();
    assert!(etag.starts_with('"') && etag.len() > 10, "{etag}");

    let again = send(
        &st,
        Request::get("/")
            .header(header::IF_NONE_MATCH, &etag)
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    assert!(again.body.is_empty());
    assert_eq!(again.headers[header::ETAG], etag.as_str());

    let stale = send(
        &st,
        Request::get("/")
            .header(header::IF_NONE_MATCH, "\"something-else\"")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(stale.status, StatusCode::OK);
    assert!(!stale.body.is_empty());
}

#[tokio::test]
async fn every_module_import_resolves_to_an_embedded_asset() {
    let st = state().await;
    let mut todo = vec!["app.js".to_string()];
    let mut seen = std::collections::BTreeSet::new();
    while let Some(path) = todo.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let r = get(&st, &format!("/ui/{path}")).await;
        assert_eq!(r.status, StatusCode::OK, "/ui/{path}");
        assert_eq!(
            r.headers[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        let text = String::from_utf8(r.body).unwrap();
        // `from './x.js'` / `from '../x.js'`, relative to this module.
        let dir = path.rsplit_once('/').map(|(d, _)| d).unwrap_or("");
        for spec in text.split("from '").skip(1) {
            let spec = spec.split('\'').next().unwrap();
            let resolved = if let Some(rest) = spec.strip_prefix("./") {
                if dir.is_empty() {
                    rest.to_string()
                } else {
                    format!("{dir}/{rest}")
                }
            } else if let Some(rest) = spec.strip_prefix("../") {
                rest.to_string()
            } else {
                panic!("{path} imports {spec}: only relative imports of embedded modules");
            };
            todo.push(resolved);
        }
    }
    assert!(seen.len() >= 10, "{seen:?}");
    for css in ["/ui/style.css", "/ui/favicon.svg"] {
        assert_eq!(get(&st, css).await.status, StatusCode::OK, "{css}");
    }
}

#[tokio::test]
async fn an_unknown_asset_is_a_json_404() {
    let st = state().await;
    let r = get(&st, "/ui/nope.js").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let v: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(v["error"]["code"], "not_found");
    let r = get(&st, "/ui/../Cargo.toml").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

async fn operator(state: &AppState) -> String {
    common::operator_token(state).await
}

async fn call(
    st: &AppState,
    token: Option<&str>,
    method: &str,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    common::request(st.clone(), token, method, uri, body).await
}

/// A GET through [`call`].
async fn get_json(st: &AppState, token: Option<&str>, uri: &str) -> (StatusCode, Value) {
    call(st, token, "GET", uri, None).await
}

const SEED: &str = "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {name: web}\nspec: {displayName: Web}\n---\n\
apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: cart, project: web}\nspec: {title: Cart}\n---\n\
apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r1, project: web}\nspec: {task: cart, provider: claude, prompt: hi, cwd: /tmp}\n---\n\
apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r2, project: web}\nspec: {task: cart, provider: claude, prompt: other, cwd: /tmp}\n";

#[tokio::test]
async fn run_events_lists_only_that_runs_events_in_order() {
    let st = state().await;
    let op = operator(&st).await;
    let (s, v) = common::apply(&st, &op, "seed.yaml", SEED).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, v) = call(
        &st,
        Some(&op),
        "POST",
        "/api/v1/projects/web/runs/r1/stop",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (_, run) = get_json(&st, Some(&op), "/api/v1/projects/web/runs/r1").await;
    let uid = run["metadata"]["uid"].as_str().unwrap().to_string();

    let (s, v) = get_json(&st, Some(&op), "/api/v1/projects/web/runs/r1/events").await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let items = v["items"].as_array().unwrap();
    assert!(!items.is_empty(), "{v}");
    assert!(
        items.iter().all(|e| e["payload"]["run_id"] == uid.as_str()),
        "{v}"
    );
    assert_eq!(items[0]["topic"], "run.created");
    let seqs: Vec<i64> = items.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    // `after` resumes past a seq.
    let (_, later) = get_json(
        &st,
        Some(&op),
        &format!("/api/v1/projects/web/runs/r1/events?after={}", seqs[0]),
    )
    .await;
    assert_eq!(later["items"].as_array().unwrap().len(), items.len() - 1);
    // The other run's events are its own.
    let (_, other) = get_json(&st, Some(&op), "/api/v1/projects/web/runs/r2/events").await;
    assert!(other["items"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["payload"]["run_id"] != uid.as_str()));

    let (s, v) = get_json(&st, Some(&op), "/api/v1/projects/web/runs/nope/events").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{v}");
    assert_eq!(v["error"]["code"], "not_found");
    let (s, _) = get_json(&st, None, "/api/v1/projects/web/runs/r1/events").await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
}
