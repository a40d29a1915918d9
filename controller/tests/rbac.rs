//! Roles and project-scoped tokens, enforced at the one point
//! the route table declares (`Access::Op`), on real PostgreSQL through
//! the real router. The walk over the table covers every route, so a new
//! route is checked without a line here.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use pam_controller::api::routes::route::{Access, Route};
use pam_controller::api::routes::{table, DEFAULT_MAX_BODY_BYTES};
use pam_controller::api::{router, AppState};
use pam_controller::rules::access;
use serde_json::{json, Value};
use tower::ServiceExt;

/// What every object of project `api` is named after: no answer to a
/// token of `web` may contain it.
const API_MARK: &str = "zzapi";

fn objects(project: &str, prefix: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Project\nmetadata: {{name: {project}}}\nspec: {{displayName: {prefix} project}}\n\
---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: {prefix}-task, project: {project}}}\nspec: {{title: {prefix} work}}\n\
---\napiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: {prefix}-run, project: {project}}}\nspec: {{task: {prefix}-task, provider: claude, prompt: hi, cwd: /tmp}}\n\
---\napiVersion: pam.dev/v1\nkind: Schedule\nmetadata: {{name: {prefix}-sched, project: {project}}}\nspec:\n  schedule: \"30 2 * * *\"\n  runTemplate: {{task: {prefix}-task, provider: claude, prompt: hi, cwd: /tmp}}\n"
    )
}

async fn state() -> AppState {
    common::pg_state().await.0
}

/// One call: status and body text. An event stream answers its status
/// only (its body never ends).
async fn call(
    st: &AppState,
    token: &str,
    method: &Method,
    uri: &str,
    body: Option<Value>,
) -> (StatusCode, String) {
    let req = Request::builder().method(method.clone()).uri(uri);
    // `session:COOKIE:CSRF`: a dashboard session ([`with_sessions`]).
    let req = match token
        .strip_prefix("session:")
        .and_then(|s| s.split_once(':'))
    {
        Some((cookie, csrf)) => req
            .header("cookie", format!("pam_session={cookie}"))
            .header("x-pam-csrf", csrf),
        None => req.header("authorization", format!("Bearer {token}")),
    };
    let req = common::json_request(req, body);
    let resp = router(st.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let sse = resp
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
    if sse {
        return (status, String::new());
    }
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// Sets up projects web and api (a task, a run, a schedule each) and
/// three tokens made through the API: admin (pamd's kind), a viewer of
/// web and an operator of web.
struct World {
    st: AppState,
    admin: String,
    viewer: String,
    operator: String,
}

impl World {
    async fn get(&self, token: &str, uri: &str) -> (StatusCode, String) {
        call(&self.st, token, &Method::GET, uri, None).await
    }

    async fn post(&self, token: &str, uri: &str, body: Value) -> (StatusCode, String) {
        call(&self.st, token, &Method::POST, uri, Some(body)).await
    }

    /// GETs each uri as `token`, asserting its status.
    async fn assert_gets(&self, token: &str, cases: &[(&str, StatusCode)]) {
        for (uri, want) in cases {
            let (s, b) = self.get(token, uri).await;
            assert_eq!(s, *want, "{uri}: {b}");
        }
    }

    /// `POST /api/v1/tokens` as the admin.
    async fn create_token(&self, body: Value) -> (StatusCode, String) {
        self.post(&self.admin, "/api/v1/tokens", body).await
    }
}

async fn world() -> World {
    let st = state().await;
    let admin = common::operator_token(&st).await;
    let yaml = format!("{}---\n{}", objects("web", "w"), objects("api", API_MARK));
    let (s, v) = common::apply(&st, &admin, "all.yaml", &yaml).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let mut tokens = Vec::new();
    for (name, role) in [("web-viewer", "viewer"), ("web-operator", "operator")] {
        let (s, v) = common::request(
            st.clone(),
            Some(&admin),
            "POST",
            "/api/v1/tokens",
            Some(json!({"name": name, "role": role, "projects": ["web"]})),
        )
        .await;
        assert_eq!(s, StatusCode::CREATED, "{v}");
        assert_eq!(v["role"], role);
        assert_eq!(v["projects"], json!(["web"]));
        tokens.push(v["token"].as_str().unwrap().to_string());
    }
    let operator = tokens.pop().unwrap();
    let viewer = tokens.pop().unwrap();
    World {
        st,
        admin,
        viewer,
        operator,
    }
}

/// The concrete URI of a route's path: `{project}` given, an object name
/// of that project where the path names one (so a read can succeed), a
/// dummy for the rest.
fn uri(path: &str, project: &str) -> String {
    named(path, project, true)
}

/// [`uri`] with dummy names only (`real: false`): what a write by a
/// token that may write is sent, so the walk deletes nothing the next
/// routes read.
fn named(path: &str, project: &str, real: bool) -> String {
    let prefix = if project == "api" { API_MARK } else { "w" };
    let kind_name = |seg: &str| match seg {
        _ if !real => "nothing".to_string(),
        "runs" => format!("{prefix}-run"),
        "tasks" => format!("{prefix}-task"),
        "schedules" => format!("{prefix}-sched"),
        _ => "nothing".to_string(),
    };
    let segs: Vec<&str> = path.split('/').collect();
    let mut out = Vec::new();
    for (i, seg) in segs.iter().enumerate() {
        let v = match *seg {
            "{project}" => project.to_string(),
            "{name}" => kind_name(segs[i - 1]),
            s if s.starts_with('{') => "nothing".to_string(),
            s => s.to_string(),
        };
        out.push(v);
    }
    out.join("/")
}

fn body_of(method: &Method) -> Option<Value> {
    (method == Method::POST).then(|| json!({}))
}

#[test]
fn every_route_declares_its_permission() {
    // Routes without a token: an explicit list, so a new route cannot
    // become public by leaving its permission out.
    let public = [
        "/healthz",
        "/readyz",
        "/metrics",
        "/api/v1/version",
        "/api/v1/openapi.json",
        "/",
        "/ui/{*path}",
        // A git host's push, proved by its own signature
        // against the Source's receiver secret (api::source_hooks).
        "/api/v1/sources/{source}/hooks/{provider}",
        // OIDC sign-in makes the session (api::oidc); logout
        // checks the session's CSRF value itself.
        "/auth/info",
        "/auth/login",
        "/auth/callback",
        "/auth/logout",
    ];
    for r in table(DEFAULT_MAX_BODY_BYTES) {
        match r.access {
            Access::Public => assert!(
                public.contains(&r.path.as_str()),
                "{} {} is public without being on the list of public routes",
                r.method,
                r.path
            ),
            Access::Worker => assert!(r.path.starts_with("/api/v1/workers/"), "{}", r.path),
            Access::Op(verb, resource) => {
                assert!(
                    access::known(resource),
                    "{} {}: unknown resource {resource:?}",
                    r.method,
                    r.path
                );
                // A GET changes nothing: its verb is a read.
                assert!(
                    r.method != Method::GET || verb.reads(),
                    "{} {} declares {verb:?}",
                    r.method,
                    r.path
                );
            }
        }
    }
}

#[tokio::test]
async fn a_web_token_reaches_only_web_for_every_route() {
    walk(world().await).await;
}

/// The world's viewer and operator replaced by dashboard sessions (OIDC) of the
/// same roles in web, with their CSRF values.
fn with_sessions(mut w: World) -> World {
    use pam_controller::api::access::oidc::{session::Session, Oidc, Settings};
    use pam_controller::rules::access::{Grant, Role};
    let oidc = Oidc::new(Settings {
        issuer: "https://id.example".into(),
        client_id: "pam".into(),
        client_secret: None,
        groups_claim: "groups".into(),
        redirect_url: "https://pam.example/auth/callback".into(),
        session_ttl: chrono::Duration::hours(8),
        groups: Default::default(),
        secure_cookies: false,
    })
    .unwrap();
    let now = w.st.ctx.now();
    let session = |role: Role| {
        let csrf = format!("csrf-{}", role.as_str());
        let cookie = oidc.sessions.insert(
            Session {
                id: uuid::Uuid::new_v4(),
                subject: format!("sub-{}", role.as_str()),
                name: format!("{}@example.com", role.as_str()),
                grant: Grant {
                    role,
                    projects: vec!["web".into()],
                    read_only: Vec::new(),
                },
                csrf: csrf.clone(),
                created_at: now,
                expires_at: now + chrono::Duration::hours(1),
            },
            now,
        );
        format!("session:{cookie}:{csrf}")
    };
    w.viewer = session(Role::Viewer);
    w.operator = session(Role::Operator);
    w.st.oidc = Some(Arc::new(oidc));
    w
}

/// The same walk with sessions in place of the tokens: a session is
/// authorized by the very decision a token is.
#[tokio::test]
async fn a_web_session_reaches_only_web_for_every_route() {
    walk(with_sessions(world().await)).await;
}

/// Route `r` called at `uri` with the dummy body of its method.
async fn call_route(st: &AppState, token: &str, r: &Route, uri: &str) -> (StatusCode, String) {
    call(st, token, &r.method, uri, body_of(&r.method)).await
}

/// `s` passed the authorization check (the handler may still refuse).
fn passes_check(s: StatusCode, b: &str, what: &str) {
    assert!(
        s != StatusCode::FORBIDDEN && s != StatusCode::UNAUTHORIZED,
        "{what}: {s} {b}"
    );
}

fn no_leak(b: &str, what: &str) {
    assert!(!b.contains(API_MARK), "{what}: leaks api: {b}");
}

/// Every route, called by the viewer and the operator of web against web
/// and api.
async fn walk(w: World) {
    let mut routes = table(DEFAULT_MAX_BODY_BYTES);
    // Deleting project web itself last: every other route needs it.
    routes.sort_by_key(|r| r.method == Method::DELETE && r.path == "/api/v1/projects/{project}");
    let mut checked = 0;
    for r in &routes {
        let (verb, resource) = match r.access {
            Access::Op(v, res) => (v, res),
            Access::Worker => {
                for t in [&w.viewer, &w.operator] {
                    let (s, b) = call_route(&w.st, t, r, &r.path).await;
                    assert_eq!(s, StatusCode::FORBIDDEN, "{} {}: {b}", r.method, r.path);
                }
                continue;
            }
            Access::Public => continue,
        };
        let scoped = r.path.contains("{project}");
        let admin_only = access::admin_only(resource) && !(resource == "hosts" && verb.reads());
        let what = |who: &str, p: &str| format!("{who} {} {} in {p}", r.method, r.path);
        // The viewer and the operator of web, against api: as if api did
        // not exist (404), or refused outright for what only an admin may
        // do; never a name of api's objects.
        for (who, t) in [("viewer", &w.viewer), ("operator", &w.operator)] {
            let (s, b) = call_route(&w.st, t, r, &uri(&r.path, "api")).await;
            no_leak(&b, &what(who, "api"));
            if admin_only {
                assert_eq!(s, StatusCode::FORBIDDEN, "{}: {b}", what(who, "api"));
            } else if scoped {
                assert_eq!(s, StatusCode::NOT_FOUND, "{}: {b}", what(who, "api"));
                // The same body a project that does not exist gets (where
                // the admin's call gets as far as looking it up).
                let (s2, b2) = call_route(&w.st, &w.admin, r, &uri(&r.path, "nope")).await;
                if s2 == StatusCode::NOT_FOUND {
                    assert_eq!(
                        b.replace(r#"\"api\""#, r#"\"nope\""#),
                        b2,
                        "{}",
                        what(who, "api")
                    );
                }
            } else if verb.reads() || who == "operator" {
                // A list or stream of every project: filtered, not refused.
                passes_check(s, &b, &what(who, "*"));
            } else {
                assert_eq!(s, StatusCode::FORBIDDEN, "{}: {b}", what(who, "*"));
            }
        }
        // The viewer in web: reads pass the check, writes are 403.
        let (s, b) = call_route(&w.st, &w.viewer, r, &uri(&r.path, "web")).await;
        no_leak(&b, &what("viewer", "web"));
        if verb.reads() && !admin_only {
            passes_check(s, &b, &what("viewer", "web"));
            // An object the world made: found.
            if scoped && r.path.ends_with("{name}") && !uri(&r.path, "web").ends_with("nothing") {
                assert_eq!(s, StatusCode::OK, "{}: {b}", what("viewer", "web"));
            }
        } else {
            assert_eq!(s, StatusCode::FORBIDDEN, "{}: {b}", what("viewer", "web"));
        }
        // The operator in web: every verb passes the check (the handler
        // may still refuse the dummy body); what only an admin may do is
        // 403.
        let write = named(&r.path, "web", r.method != Method::DELETE);
        let (s, b) = call_route(&w.st, &w.operator, r, &write).await;
        no_leak(&b, &what("operator", "web"));
        if admin_only {
            assert_eq!(s, StatusCode::FORBIDDEN, "{}: {b}", what("operator", "web"));
        } else {
            passes_check(s, &b, &what("operator", "web"));
        }
        checked += 1;
    }
    assert!(checked > 40, "only {checked} routes checked");
    // Nothing of api was touched: its run, task and schedule are there.
    for kind in ["runs", "tasks", "schedules"] {
        let one = &kind[..kind.len() - 1];
        let name = if kind == "schedules" {
            format!("{API_MARK}-sched")
        } else {
            format!("{API_MARK}-{one}")
        };
        let (s, b) = w
            .get(&w.admin, &format!("/api/v1/projects/api/{kind}/{name}"))
            .await;
        assert_eq!(s, StatusCode::OK, "{kind}: {b}");
    }
}

#[tokio::test]
async fn lists_are_filtered_and_batches_refused_whole() {
    let w = world().await;
    // Every project's runs: only web's for the viewer, both for the admin.
    let (s, b) = w.get(&w.viewer, "/api/v1/runs").await;
    assert_eq!(s, StatusCode::OK);
    assert!(b.contains("w-run") && !b.contains(API_MARK), "{b}");
    let (_, b) = w.get(&w.admin, "/api/v1/runs").await;
    assert!(b.contains("w-run") && b.contains(API_MARK), "{b}");
    let (_, b) = w.get(&w.viewer, "/api/v1/projects").await;
    assert!(b.contains("\"web\"") && !b.contains("\"api\""), "{b}");
    // Events: none of api's.
    let (s, b) = w.get(&w.viewer, "/api/v1/events?limit=1000").await;
    assert_eq!(s, StatusCode::OK);
    assert!(b.contains("w-run") && !b.contains(API_MARK), "{b}");
    let (s, _) = w.get(&w.viewer, "/api/v1/events?project=api").await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // A batch touching api, by the operator of web: refused whole,
    // naming nothing; web's part is not written either.
    let yaml = "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: new-web, project: web}\nspec: {title: x}\n---\napiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: new-api, project: api}\nspec: {title: x}\n";
    let apply = json!({"files": [{"name": "b.yaml", "content": yaml}]});
    for path in ["/api/v1/apply", "/api/v1/diff"] {
        let (s, b) = w.post(&w.operator, path, apply.clone()).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{path}: {b}");
        assert!(!b.contains("api") || b.contains("/api/"), "{path}: {b}");
        assert!(
            !b.contains("new-api") && !b.contains("\"api\""),
            "{path}: {b}"
        );
    }
    let (s, _) = w.get(&w.admin, "/api/v1/projects/web/tasks/new-web").await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "nothing of the refused batch written"
    );
    // Its own project's batch goes through; the viewer's is refused.
    let yaml = "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: new-web, project: web}\nspec: {title: x}\n";
    let apply = json!({"files": [{"name": "b.yaml", "content": yaml}]});
    let (s, b) = w.post(&w.viewer, "/api/v1/apply", apply.clone()).await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{b}");
    let (s, b) = w.post(&w.operator, "/api/v1/apply", apply).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // Prune by a selector that matches api's objects too: only the
    // batch's projects are pruned, nothing of api is named or touched.
    let (s, b) = w.post(&w.operator, "/api/v1/apply", json!({"files": [{"name": "b.yaml", "content": yaml}], "prune": true, "selector": "!nothing"}))
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert!(!b.contains(API_MARK), "{b}");
    let (s, _) = w
        .get(
            &w.admin,
            &format!("/api/v1/projects/api/runs/{API_MARK}-run"),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "prune refused: api's run is there");
    // Refusals are counted per token name.
    let (_, m) = w.get(&w.admin, "/metrics").await;
    assert!(
        m.contains("pam_api_refused_total{token=\"web-viewer\",status=\"403\"}"),
        "{m}"
    );
    // A role without projects, or an admin with some: bad requests.
    for body in [
        json!({"name": "x", "role": "viewer"}),
        json!({"name": "x", "role": "admin", "projects": ["web"]}),
        json!({"name": "x", "role": "worker", "projects": ["web"]}),
        json!({"name": "x", "role": "root", "projects": ["web"]}),
        json!({"worker": "h1", "role": "viewer"}),
    ] {
        let (s, b) = w.create_token(body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body}: {b}");
    }
}

#[tokio::test]
async fn a_viewers_stream_carries_only_its_projects_events() {
    let w = world().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = router(w.st.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let journal = |from: usize| {
        let ctx = w.st.ctx.clone();
        async move {
            let mut tx = ctx.store.begin().await.unwrap();
            for i in from..from + 500 {
                // Mixed: web and api, by name and by uid-less payloads.
                let project = if i % 3 == 0 { "web" } else { "api" };
                let payload = json!({"project": project, "name": format!("{project}-{i}")});
                tx.append_event("run.created", payload, ctx.now())
                    .await
                    .unwrap();
            }
            ctx.commit(tx).await.unwrap();
        }
    };
    // Half journaled before the stream (replayed from 0), half while it
    // is open (live): both paths filter.
    journal(0).await;
    let mut resp = reqwest::Client::new()
        .get(format!(
            "{base}/api/v1/events/stream?topic=run.created&after=0"
        ))
        .bearer_auth(&w.viewer)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    journal(500).await;
    // Until web's last event (i = 999).
    let mut names: Vec<String> = Vec::new();
    let mut buf = String::new();
    while !names.iter().any(|n| n.contains("\"web-999\"")) {
        buf.push_str(&common::next_chunk(&mut resp).await);
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            if let Some(data) = frame.lines().find_map(|l| l.strip_prefix("data: ")) {
                let v: Value = serde_json::from_str(data).unwrap();
                names.push(v.to_string());
            }
        }
    }
    let web = names.iter().filter(|n| n.contains("\"web-")).count();
    assert_eq!(
        web,
        (0..1000).filter(|i| i % 3 == 0).count(),
        "every web event"
    );
    assert!(
        names
            .iter()
            .all(|n| !n.contains("api-") && !n.contains(API_MARK)),
        "{:?}",
        names
            .iter()
            .find(|n| n.contains("api-") || n.contains(API_MARK))
    );
    // Nothing more arrives (api's last events were not merely late).
    let more = tokio::time::timeout(Duration::from_millis(300), resp.chunk()).await;
    if let Ok(Ok(Some(chunk))) = more {
        let text = String::from_utf8_lossy(&chunk);
        assert!(!text.contains("\"api-"), "{text}");
    }
}

/// The audit trail: what a request journals names its token (name and
/// role) in `actor`, on the journal's page as in the payload kept; the
/// loops' own events name none.
#[tokio::test]
async fn every_event_of_a_request_names_its_token() {
    let w = world().await;
    let yaml = "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: audited, project: web}\nspec: {title: x}\n";
    let (s, b) = w
        .post(
            &w.operator,
            "/api/v1/apply",
            json!({"files": [{"name": "a.yaml", "content": yaml}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, b) = call(
        &w.st,
        &w.operator,
        &Method::POST,
        "/api/v1/projects/web/runs/w-run/stop",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    // A loop's change, journaled outside any request.
    let ctx = w.st.ctx.clone();
    let mut tx = ctx.store.begin().await.unwrap();
    tx.append_event("worker.offline", json!({"host": "loop-made"}), ctx.now())
        .await
        .unwrap();
    ctx.commit(tx).await.unwrap();

    let (_, b) = w.get(&w.admin, "/api/v1/events?limit=1000").await;
    let v: Value = serde_json::from_str(&b).unwrap();
    let items = v["items"].as_array().unwrap();
    let by = json!({"name": "web-operator", "role": "operator"});
    let created = items
        .iter()
        .find(|e| e["topic"] == "work_item.created" && e["payload"]["name"] == "audited")
        .expect("the apply's event");
    assert_eq!(created["actor"], by, "{created}");
    assert_eq!(created["payload"]["actor"], by, "journaled with the event");
    let after_apply: Vec<&Value> = items
        .iter()
        .filter(|e| e["seq"].as_i64() >= created["seq"].as_i64() && e["topic"] != "worker.offline")
        .collect();
    for e in after_apply {
        assert_eq!(e["actor"], by, "{e}");
    }
    // The world's apply was the admin's ("ops"); the loop's has none.
    let first = &items[0];
    assert_eq!(
        first["actor"],
        json!({"name": "ops", "role": "admin"}),
        "{first}"
    );
    let offline = items
        .iter()
        .find(|e| e["topic"] == "worker.offline")
        .unwrap();
    assert!(offline.get("actor").is_none(), "{offline}");
    assert!(offline["payload"].get("actor").is_none(), "{offline}");
}

/// Who stopped a run is named by `run.stopped` even when the run's
/// manifest is applied again before the stop takes effect: it was an
/// annotation, which such an apply replaced (annotations no field manager
/// owns follow the manifest), so the event had no actor.
#[tokio::test]
async fn a_stops_actor_survives_a_reapply_before_the_stop_takes_effect() {
    let w = world().await;
    let stop = "/api/v1/projects/web/runs/w-run/stop";
    let (s, b) = call(&w.st, &w.operator, &Method::POST, stop, None).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, v) = common::apply(&w.st, &w.admin, "web.yaml", &objects("web", "w")).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    // The loops stop the pending run, outside any request.
    pam_controller::reconcile::pass(&w.st.ctx).await.unwrap();

    let by = json!({"name": "web-operator", "role": "operator"});
    let (_, b) = w.get(&w.admin, "/api/v1/events?limit=1000").await;
    let v: Value = serde_json::from_str(&b).unwrap();
    let stopped = v["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["topic"] == "run.stopped" && e["payload"]["name"] == "w-run")
        .expect("run.stopped");
    assert_eq!(stopped["actor"], by, "{stopped}");
    let (s, b) = w.get(&w.viewer, "/api/v1/projects/web/runs/w-run").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let run: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(run["status"]["phase"], "stopped", "{run}");
    assert_eq!(run["status"]["stoppedBy"], by, "{run}");
    assert!(
        run["metadata"]["annotations"]
            .get("pam.dev/stopped-by")
            .is_none(),
        "{run}"
    );
}

/// Bad input on the auth surfaces: malformed token requests,
/// can-i questions and Authorization headers are each a 4xx in the one
/// JSON error shape — never a 500, never written (the token list is the
/// same after), never echoing a token.
#[tokio::test]
async fn bad_auth_input_is_a_json_4xx_and_writes_nothing() {
    let w = world().await;
    let (_, before) = w.get(&w.admin, "/api/v1/tokens").await;
    let long = "p".repeat(300);
    let bodies = [
        json!({"name": "x", "role": ""}),
        json!({"name": "x", "role": 3, "projects": ["web"]}),
        json!({"name": "x", "role": "Viewer", "projects": ["web"]}),
        json!({"name": "x", "role": "viewer", "projects": "web"}),
        json!({"name": "x", "role": "viewer", "projects": []}),
        json!({"name": "x", "role": "viewer", "projects": ["Web!"]}),
        json!({"name": "x", "role": "viewer", "projects": [""]}),
        json!({"name": "x", "role": "viewer", "projects": [long]}),
        json!({"name": "x", "role": "viewer", "projects": [7]}),
        json!({"name": "x", "role": "viewer", "projects": null, "extra": 1}),
        json!({"role": "viewer", "projects": ["web"]}),
        json!({"name": "", "role": "viewer", "projects": ["web"]}),
        json!({"name": "x", "role": "operator"}),
        json!({"name": "x", "role": "metrics-only", "projects": ["web"]}),
        json!({"name": "x", "worker": "h1", "role": "worker"}),
        json!([]),
        json!("viewer"),
    ];
    for body in &bodies {
        let (s, b) = w.create_token(body.clone()).await;
        assert!(s.is_client_error(), "{body}: {s} {b}");
        let v: Value = serde_json::from_str(&b).unwrap_or(Value::Null);
        assert!(v["error"]["code"].is_string(), "{body}: {b}");
    }
    let questions = [
        "/api/v1/auth/can-i",
        "/api/v1/auth/can-i?verb=fly&resource=runs",
        "/api/v1/auth/can-i?verb=get&resource=spaceships",
        "/api/v1/auth/can-i?verb=get",
        "/api/v1/auth/can-i?resource=runs",
        "/api/v1/auth/can-i?verb=get&resource=runs&colour=red",
    ];
    for q in questions {
        let (s, b) = w.get(&w.viewer, q).await;
        assert!(s.is_client_error(), "{q}: {s} {b}");
        let v: Value = serde_json::from_str(&b).unwrap_or(Value::Null);
        assert!(v["error"]["code"].is_string(), "{q}: {b}");
    }
    // Authorization headers that are not a valid bearer token.
    let headers = [
        format!("Basic {}", w.viewer),
        "Bearer".to_string(),
        "Bearer ".to_string(),
        format!("Bearer {} extra", w.viewer),
        format!("bearer{}", w.viewer),
        "Bearer pam_op_notarealtoken".to_string(),
        format!("Bearer {}x", w.viewer),
        "Bearer \u{7f}".to_string(),
    ];
    for h in &headers {
        let req = Request::builder()
            .method(Method::GET)
            .uri("/api/v1/projects/web/runs")
            .header("authorization", h.as_bytes());
        let Ok(req) = req.body(Body::empty()) else {
            continue;
        };
        let resp = router(w.st.clone()).oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{h:?}: {text}");
        assert!(!text.contains(&w.viewer), "a token echoed: {text}");
        let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        assert!(v["error"]["code"].is_string(), "{h:?}: {text}");
    }
    let (_, after) = w.get(&w.admin, "/api/v1/tokens").await;
    let ids = |text: &str| -> Vec<Value> {
        let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        let items = v["items"].as_array().cloned().unwrap_or_default();
        items.iter().map(|t| t["id"].clone()).collect()
    };
    assert_eq!(ids(&before), ids(&after), "a refused request wrote a token");
}

/// Custom roles on the router: a token bound to a `Role` reads
/// the events of the projects whose rules give `list`/`watch` on events
/// only — not those of a project whose runs it may read —, gets 403 for
/// a kind no rule gives in a project it sees and 404 elsewhere; a change
/// of the Role holds at the next request; once the Role is deleted the
/// token may do nothing but ask who it is.
#[tokio::test]
async fn a_custom_roles_events_and_objects_follow_its_rules() {
    let w = world().await;
    let role = |rules: &str| {
        format!("apiVersion: pam.dev/v1\nkind: Role\nmetadata: {{name: auditor}}\nspec:\n  rules:\n{rules}")
    };
    let web_events = "  - {verbs: [list, watch], kinds: [events], projects: [web]}\n";
    let api_runs = "  - {verbs: [get, list], kinds: [runs], projects: [api]}\n";
    let (s, v) = common::apply(
        &w.st,
        &w.admin,
        "role.yaml",
        &role(&format!("{web_events}{api_runs}")),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, b) = w
        .create_token(json!({"name": "aud", "role": "auditor"}))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
    let token = serde_json::from_str::<Value>(&b).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    // A custom role takes no projects of its own; an unknown one is a 400.
    let (s, _) = w
        .create_token(json!({"name": "x", "role": "auditor", "projects": ["web"]}))
        .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    let (s, b) = w.create_token(json!({"name": "y", "role": "nope"})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    assert!(b.contains("nope"), "{b}");

    // Events: web's (its rule), none of api's although it reads api's runs.
    let (s, b) = w.get(&token, "/api/v1/events?limit=1000").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert!(b.contains("w-run") && !b.contains(API_MARK), "{b}");
    let (s, b) = w.get(&token, "/api/v1/projects/api/runs").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert!(b.contains(API_MARK), "{b}");
    w.assert_gets(
        &token,
        &[
            ("/api/v1/projects/api/tasks", StatusCode::FORBIDDEN),
            ("/api/v1/projects/web/runs", StatusCode::FORBIDDEN),
            ("/api/v1/projects/nowhere/runs", StatusCode::NOT_FOUND),
            ("/api/v1/roles", StatusCode::FORBIDDEN),
        ],
    )
    .await;
    let (_, b) = w.get(&token, "/api/v1/whoami").await;
    let me: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(me["role"], "auditor");
    assert_eq!(me["projects"], json!(["api", "web"]));

    // The Role loses its rule on api: the next request is refused.
    let (s, v) = common::apply(&w.st, &w.admin, "role.yaml", &role(web_events)).await;
    assert_eq!(s, StatusCode::OK, "{v}");
    let (s, b) = w.get(&token, "/api/v1/projects/api/runs").await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{b}");
    assert!(!b.contains(API_MARK), "{b}");

    // Deleted: nothing but whoami.
    let (s, _) = call(
        &w.st,
        &w.admin,
        &Method::DELETE,
        "/api/v1/roles/auditor",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    w.assert_gets(
        &token,
        &[
            ("/api/v1/events", StatusCode::FORBIDDEN),
            ("/api/v1/projects/web/runs", StatusCode::NOT_FOUND),
        ],
    )
    .await;
    let (s, b) = w.get(&token, "/api/v1/whoami").await;
    assert_eq!(s, StatusCode::OK);
    let me: Value = serde_json::from_str(&b).unwrap();
    assert_eq!(
        (me["role"].as_str(), &me["rules"]),
        (Some("auditor"), &json!([]))
    );
}
