//! The OpenAPI 3.1 document of the whole HTTP API, built from the route
//! table ([`crate::api::routes::table`]) and the request/response types'
//! `schemars` schemas (JSON Schema 2020-12, the dialect OpenAPI 3.1
//! uses). Served at `GET /api/v1/openapi.json` without a token (it is the
//! same for every pamd of a version and says nothing about the instance)
//! and committed as `schemas/openapi.json`; a test fails with
//! [`REGENERATE_COMMAND`] when that file is stale.

use std::collections::BTreeSet;

use schemars::generate::SchemaSettings;
use schemars::SchemaGenerator;
use serde_json::{json, Map, Value};

use crate::api::routes::route::{Access, Reply, Route, SchemaOf};
use crate::api::ErrorBody;

/// The command that rewrites `schemas/openapi.json` from the code.
pub const REGENERATE_COMMAND: &str =
    "cargo run -p pam-controller --bin pam-openapi -- schemas/openapi.json";

/// The document of `routes`, as committed: pretty JSON with a final
/// newline.
pub fn text_of(routes: &[Route]) -> String {
    serde_json::to_string_pretty(&document_of(routes)).expect("the document is JSON") + "\n"
}

/// The document of `routes` (the route table).
pub fn document_of(routes: &[Route]) -> Value {
    let mut settings = SchemaSettings::draft2020_12().for_deserialize();
    settings.definitions_path = "/components/schemas".into();
    settings.meta_schema = None;
    let mut g = settings.into_generator();
    let error = g.subschema_for::<ErrorBody>();
    let mut paths = Map::new();
    let mut tags = Vec::new();
    for r in routes {
        if !tags.contains(&r.tag) {
            tags.push(r.tag);
        }
        let item = paths
            .entry(openapi_path(&r.path))
            .or_insert_with(|| json!({}));
        item[r.method.as_str().to_ascii_lowercase()] = operation(r, &mut g);
    }
    let schemas = g.take_definitions(true);
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "pam",
            "version": env!("CARGO_PKG_VERSION"),
            "summary": "pamd's HTTP API: manifests, runs, workers, events",
            "description": "Generated from pamd's route table (controller/src/api/routes/mod.rs); \
                            do not edit. Every error is the `Error` schema.",
            "license": { "name": "Apache-2.0", "identifier": "Apache-2.0" },
        },
        "jsonSchemaDialect": "https://json-schema.org/draft/2020-12/schema",
        "tags": tags.iter().map(|t| json!({ "name": t })).collect::<Vec<_>>(),
        "paths": paths,
        "components": {
            "schemas": schemas,
            "responses": {
                "Error": {
                    "description": "The one error shape: a stable `code`, a message, \
                                    and for invalid manifests every problem in `errors`. \
                                    A 429 or 503 may carry `Retry-After` (seconds).",
                    "content": { "application/json": { "schema": error } },
                },
            },
            "securitySchemes": {
                "operatorToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An operator token (`pamctl token create NAME`; pamd \
                                    writes the first, admin.token, in its data dir).",
                },
                "workerToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A worker token, bound to one host \
                                    (`pamctl token create --worker HOST`): only the \
                                    /api/v1/workers endpoints, only for that host.",
                },
            },
        },
    })
}

/// axum's `{*rest}` is OpenAPI's `{rest}`.
fn openapi_path(path: &str) -> String {
    path.replace("{*", "{")
}

/// The `{param}` names of a path, in order, and whether each is axum's
/// `{*rest}` (the rest of the path, slashes included).
fn path_params(path: &str) -> Vec<(String, bool)> {
    path.split('/')
        .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
        .map(|s| match s.strip_prefix('*') {
            Some(rest) => (rest.to_string(), true),
            None => (s.to_string(), false),
        })
        .collect()
}

fn operation(r: &Route, g: &mut SchemaGenerator) -> Value {
    let mut params: Vec<Value> = path_params(&r.path)
        .into_iter()
        .map(|(name, rest)| {
            // Token and delivery ids are UUIDs; everything else a name.
            let schema = if name == "id" {
                json!({ "type": "string", "format": "uuid" })
            } else {
                json!({ "type": "string" })
            };
            let mut p = json!({ "name": name, "in": "path", "required": true, "schema": schema });
            if rest {
                p["description"] = "The rest of the path; its `/` are sent as is.".into();
            }
            p
        })
        .collect();
    if let Some(q) = r.query {
        params.extend(query_params(q));
    }
    if matches!(r.reply, Reply::EventStream) {
        params.push(json!({
            "name": "Last-Event-ID",
            "in": "header",
            "required": false,
            "description": "A reconnect resumes after this event id (seq); it wins over `after`.",
            "schema": { "type": "string" },
        }));
    }
    let mut op = json!({
        "tags": [r.tag],
        "operationId": r.operation_id,
        "summary": r.summary,
        "security": match r.access {
            Access::Public => json!([]),
            Access::Op(..) => json!([{ "operatorToken": [] }]),
            Access::Worker => json!([{ "workerToken": [] }]),
        },
    });
    // The permission the route table declares: the verb a
    // token's role needs on the resource.
    if let Access::Op(verb, resource) = r.access {
        op["x-pam-permission"] = json!({ "verb": verb.as_str(), "resource": resource });
    }
    let error = json!({ "$ref": "#/components/responses/Error" });
    let mut responses = Map::new();
    responses.insert(r.status.to_string(), success(r, g));
    responses.insert("4XX".into(), error.clone());
    responses.insert("5XX".into(), error);
    op["responses"] = Value::Object(responses);
    if !params.is_empty() {
        op["parameters"] = Value::Array(params);
    }
    if let Some((schema, required)) = r.body {
        op["requestBody"] = json!({
            "required": required,
            "content": { "application/json": { "schema": schema(g) } },
        });
    }
    op
}

fn success(r: &Route, g: &mut SchemaGenerator) -> Value {
    let content = match r.reply {
        Reply::Json(schema) => json!({ "application/json": { "schema": schema(g) } }),
        Reply::Empty => return json!({ "description": r.answers }),
        Reply::EventStream => json!({
            "text/event-stream": {
                "schema": {
                    "type": "string",
                    "description": "Server-Sent Events: `id` (the seq, sent back as \
                                    Last-Event-ID on reconnect), `event` (the topic) and \
                                    `data` (the event as JSON); comments keep it alive.",
                },
            },
        }),
        Reply::Content(media) => {
            let mut m = Map::new();
            m.insert(media.into(), json!({ "schema": { "type": "string" } }));
            Value::Object(m)
        }
    };
    json!({ "description": r.answers, "content": content })
}

/// One `in: query` parameter per property of the `Query<…>` type (its
/// schema inlined, so the type itself is not a component).
fn query_params(q: SchemaOf) -> Vec<Value> {
    let mut settings = SchemaSettings::draft2020_12().for_deserialize();
    settings.inline_subschemas = true;
    settings.meta_schema = None;
    let schema = q(&mut settings.into_generator()).to_value();
    let required: BTreeSet<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(props) = schema["properties"].as_object() else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, s)| {
            let mut s = s.clone();
            let description = s.as_object_mut().and_then(|o| o.remove("description"));
            // An absent parameter is an `Option`'s None; there is no null
            // in a query string.
            if let Some(o) = s
                .as_object_mut()
                .filter(|o| o.get("default") == Some(&Value::Null))
            {
                o.remove("default");
            }
            if let Some(types) = s["type"].as_array() {
                let types: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                s["type"] = match types.as_slice() {
                    [one] => one.clone(),
                    _ => Value::Array(types),
                };
            }
            let mut p = json!({
                "name": name,
                "in": "query",
                "required": required.contains(name.as_str()),
                "schema": s,
            });
            if let Some(d) = description {
                p["description"] = d;
            }
            p
        })
        .collect()
}
