//! The OpenAPI document: the committed `schemas/openapi.json`
//! is what the code generates; `GET /api/v1/openapi.json` serves it; it is
//! structurally OpenAPI 3.1; every operation in it is a route of the
//! router, and the router has no route outside the table it is built from.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use pam_controller::api::routes::openapi::REGENERATE_COMMAND;
use pam_controller::api::routes::{openapi_document as document, openapi_text as text};
use pam_controller::api::{router, AppState};
use pam_controller::clock::SystemClock;
use serde_json::Value;
use tower::ServiceExt;

mod common;
#[path = "common/rust_files.rs"]
mod rust_files;
use rust_files::rust_files;

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn state() -> AppState {
    AppState::new(
        Arc::new(pam_store::memory::MemStore::new()),
        Arc::new(SystemClock),
        Default::default(),
    )
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn committed_openapi_is_current() {
    let committed =
        std::fs::read_to_string(root().join("schemas/openapi.json")).unwrap_or_default();
    assert!(
        committed == text(),
        "schemas/openapi.json is stale; regenerate from the workspace root with:\n    {REGENERATE_COMMAND}"
    );
}

/// Every `"$ref"` string in `v`.
fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("$ref", Value::String(r)) => out.push(r),
                    _ => refs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| refs(x, out)),
        _ => {}
    }
}

/// The structural rules of OpenAPI 3.1 this document must keep (a full
/// validator is not in the dependency tree): version, info, every `$ref`
/// resolves, every operation has a unique operationId, responses with
/// descriptions, its path parameters declared, and known security schemes.
fn problems(doc: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if doc["openapi"] != "3.1.0" {
        out.push(format!("openapi is {}, not 3.1.0", doc["openapi"]));
    }
    for field in ["title", "version"] {
        if !doc["info"][field].is_string() {
            out.push(format!("info.{field} missing"));
        }
    }
    let mut all = Vec::new();
    refs(doc, &mut all);
    for r in all {
        let resolved = r.strip_prefix('#').and_then(|p| doc.pointer(p));
        if resolved.is_none() {
            out.push(format!("$ref {r} does not resolve"));
        }
    }
    let schemes = doc["components"]["securitySchemes"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut ids = HashSet::new();
    let Some(paths) = doc["paths"].as_object() else {
        out.push("no paths".into());
        return out;
    };
    for (path, item) in paths {
        if !path.starts_with('/') {
            out.push(format!("path {path} does not start with /"));
        }
        let templated: BTreeSet<&str> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .collect();
        for method in METHODS {
            let Some(op) = item.get(method) else { continue };
            let at = format!("{method} {path}");
            match op["operationId"].as_str() {
                Some(id) if !id.is_empty() => {
                    if !ids.insert(id.to_string()) {
                        out.push(format!("{at}: operationId {id} is not unique"));
                    }
                }
                _ => out.push(format!("{at}: no operationId")),
            }
            match op["responses"].as_object() {
                Some(rs) if !rs.is_empty() => {
                    for (code, resp) in rs {
                        if resp.get("$ref").is_none() && !resp["description"].is_string() {
                            out.push(format!("{at}: response {code} has no description"));
                        }
                    }
                    for range in ["4XX", "5XX"] {
                        if rs[range]["$ref"] != "#/components/responses/Error" {
                            out.push(format!("{at}: {range} is not the Error response"));
                        }
                    }
                }
                _ => out.push(format!("{at}: no responses")),
            }
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            let declared: BTreeSet<&str> = params
                .iter()
                .filter(|p| p["in"] == "path")
                .filter_map(|p| {
                    if p["required"] != true {
                        out.push(format!("{at}: path parameter {} not required", p["name"]));
                    }
                    p["name"].as_str()
                })
                .collect();
            if declared != templated {
                out.push(format!(
                    "{at}: path parameters {declared:?}, template {templated:?}"
                ));
            }
            for p in &params {
                if !p["name"].is_string() || !p["schema"].is_object() {
                    out.push(format!("{at}: parameter without name or schema: {p}"));
                }
            }
            for req in op["security"].as_array().into_iter().flatten() {
                for scheme in req.as_object().into_iter().flat_map(|o| o.keys()) {
                    if !schemes.contains_key(scheme) {
                        out.push(format!("{at}: unknown security scheme {scheme}"));
                    }
                }
            }
        }
    }
    out
}

#[test]
fn document_is_structurally_openapi_3_1() {
    let doc = document();
    let problems = problems(&doc);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // What a client relies on is described: the token schemes, the one
    // error shape, the event stream's resume header, each route's token.
    let schemes = &doc["components"]["securitySchemes"];
    assert_eq!(schemes["operatorToken"]["scheme"], "bearer");
    assert_eq!(schemes["workerToken"]["scheme"], "bearer");
    let error = &doc["components"]["schemas"]["Error"];
    assert_eq!(error["required"], serde_json::json!(["error"]), "{error}");
    let stream = &doc["paths"]["/api/v1/events/stream"]["get"];
    assert!(stream["responses"]["200"]["content"]["text/event-stream"].is_object());
    assert!(stream["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .any(|p| p["name"] == "Last-Event-ID" && p["in"] == "header"));
    assert_eq!(
        doc["paths"]["/api/v1/workers/claim"]["post"]["security"][0],
        serde_json::json!({ "workerToken": [] })
    );
    let list = &doc["paths"]["/api/v1/projects/{project}/runs"]["get"]["parameters"];
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "labelSelector" && p["in"] == "query"),
        "{list}"
    );
}

/// A full validator where one is installed (`pip install
/// openapi-spec-validator`; not a dependency of the build): it found a
/// `"default": null` on a query parameter typed integer, which the checks
/// above do not look for.
#[test]
fn committed_openapi_passes_openapi_spec_validator_when_installed() {
    let tool = "openapi-spec-validator";
    let file = root().join("schemas/openapi.json");
    let Ok(out) = std::process::Command::new(tool).arg(&file).output() else {
        println!(
            "note: {tool} is not installed: schemas/openapi.json was checked structurally only"
        );
        return;
    };
    assert!(
        out.status.success(),
        "{tool}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_checks_catch_a_broken_document() {
    let mut doc = document();
    doc["paths"]["/api/v1/tokens"]["get"]["operationId"] = "createToken".into();
    doc["paths"]["/healthz"]["get"]["responses"] = serde_json::json!({});
    doc["paths"]["/api/v1/apply"]["post"]["requestBody"]["content"]["application/json"]["schema"] =
        serde_json::json!({ "$ref": "#/components/schemas/Nope" });
    let found = problems(&doc).join("\n");
    for expected in [
        "not unique",
        "get /healthz: no responses",
        "Nope does not resolve",
    ] {
        assert!(found.contains(expected), "{expected}: {found}");
    }
}

async fn call(state: AppState, method: &str, uri: &str) -> (StatusCode, Value) {
    common::request(state, None, method, uri, None).await
}

/// The router's own answer for a (method, path) it has no route for, if
/// this is one: the fallback's 404 or the 405 of a path without that
/// method (mod.rs, `not_found` and `method_not_allowed`).
fn no_route(status: StatusCode, body: &Value) -> bool {
    let msg = common::error_message(body);
    (status == StatusCode::NOT_FOUND && msg.starts_with("no route for"))
        || status == StatusCode::METHOD_NOT_ALLOWED
}

#[tokio::test]
async fn every_operation_of_the_document_is_a_route() {
    let st = state();
    // The detector itself: a made-up path and a method a path lacks.
    let (s, b) = call(st.clone(), "GET", "/api/v1/no-such-route").await;
    assert!(no_route(s, &b), "{s} {b}");
    let (s, b) = call(st.clone(), "PUT", "/api/v1/tokens").await;
    assert!(no_route(s, &b), "{s} {b}");

    let doc = document();
    let mut missing = Vec::new();
    let mut seen = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        // Any value routes; the handlers refuse it after matching.
        let uri: String = path
            .split('/')
            .map(|s| if s.starts_with('{') { "x" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        for method in METHODS.iter().filter(|m| item.get(**m).is_some()) {
            seen += 1;
            let (s, b) = call(st.clone(), &method.to_uppercase(), &uri).await;
            if no_route(s, &b) {
                missing.push(format!("{method} {path}: {s} {b}"));
            }
        }
    }
    assert!(seen > 50, "only {seen} operations");
    assert!(missing.is_empty(), "not routed:\n{}", missing.join("\n"));
}

#[tokio::test]
async fn the_document_is_served_without_a_token() {
    let req = Request::builder()
        .uri("/api/v1/openapi.json")
        .body(Body::empty())
        .unwrap();
    let resp = router(state()).oneshot(req).await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "application/json");
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(std::str::from_utf8(&bytes).unwrap(), text());
}

/// The table is the only way a route is added: `route::router` is the one
/// place that calls axum's `.route(`, so a route added beside the table
/// (and missing from the document) fails here.
#[test]
fn no_route_is_added_outside_the_table() {
    let src = root().join("controller/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let allowed = src.join("api/routes/route.rs");
    let mut found = Vec::new();
    for f in files.iter().filter(|f| **f != allowed) {
        let text = std::fs::read_to_string(f).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for call in [".route(", ".route_service(", ".nest(", ".nest_service("] {
                if code.contains(call) {
                    found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "routes outside the table (add them to api/routes/mod.rs instead):\n{}",
        found.join("\n")
    );
}
