//! The bad-input suite over the HTTP API: a real pamd on a real
//! PostgreSQL, every case a raw request (method, path, token, content type,
//! body) with the status and error code it must get. For every case: no
//! 500, the body is `{"error": {"code", "message"}}` with a non-empty
//! message (naming the field where the case says which), manifest errors
//! carry file and line, and the answer came in under a second. Around the
//! whole suite: pamd is still alive and nothing was written (the journal's
//! high-water mark and every object count are unchanged).
//!
//! Then the one case that must write: 500 identical orphan reports sent
//! twice journal one `run.orphan_detected` per distinct session.

use std::time::{Duration, Instant};

use pam_tests::worker::create_worker_token;
use pam_tests::{Pamd, PamdOptions};
use reqwest::Method;
use serde_json::{json, Value};

/// No host goes offline while the suite runs (nothing may be written).
const CONFIG: &str = "[hosts]\nheartbeat_seconds = 30\noffline_after_seconds = 3600\n";

const TREE: &str = "apiVersion: pam.dev/v1
kind: Project
metadata: {name: web}
spec: {displayName: Web}
---
apiVersion: pam.dev/v1
kind: Task
metadata: {name: cart, project: web}
spec: {title: Cart}
---
apiVersion: pam.dev/v1
kind: Run
metadata: {name: r1, project: web}
spec: {task: cart, provider: claude, prompt: hi, cwd: /tmp, target: {host: h1}}
";

#[derive(Clone, Copy, Debug)]
enum Tok {
    Admin,
    /// Worker token of host h1 (which runs r1).
    W1,
    /// Worker token of host h2.
    W2,
    None,
    Bad,
    Revoked,
}

struct Tokens {
    admin: String,
    w1: String,
    w2: String,
    revoked: String,
}

impl Tokens {
    fn get(&self, t: Tok) -> Option<String> {
        match t {
            Tok::Admin => Some(self.admin.clone()),
            Tok::W1 => Some(self.w1.clone()),
            Tok::W2 => Some(self.w2.clone()),
            Tok::None => None,
            Tok::Bad => Some("pam_not-a-real-token".into()),
            Tok::Revoked => Some(self.revoked.clone()),
        }
    }
}

#[derive(Debug, Clone)]
struct Case {
    what: String,
    method: Method,
    path: String,
    tok: Tok,
    content_type: Option<&'static str>,
    body: Option<Vec<u8>>,
    status: u16,
    code: &'static str,
    /// Text the message (or, for `invalid`, an entry of `errors`) must
    /// contain: the field or parameter at fault.
    mentions: Option<&'static str>,
    /// A YAML file's problem: `errors[0]` has `file` and `line`.
    positioned: bool,
}

fn case(what: impl Into<String>, method: Method, path: impl Into<String>, tok: Tok) -> Case {
    Case {
        what: what.into(),
        method,
        path: path.into(),
        tok,
        content_type: None,
        body: None,
        status: 400,
        code: "bad_request",
        mentions: None,
        positioned: false,
    }
}

impl Case {
    fn json(mut self, body: Value) -> Case {
        self.content_type = Some("application/json");
        self.body = Some(body.to_string().into_bytes());
        self
    }
    fn raw(mut self, content_type: Option<&'static str>, body: &[u8]) -> Case {
        self.content_type = content_type;
        self.body = Some(body.to_vec());
        self
    }
    fn expect(mut self, status: u16, code: &'static str) -> Case {
        self.status = status;
        self.code = code;
        self
    }
    fn naming(mut self, text: &'static str) -> Case {
        self.mentions = Some(text);
        self
    }
    fn positioned(mut self) -> Case {
        self.positioned = true;
        self
    }
}

/// A JSON body route: its path, the token that may call it, a valid body
/// (so a case changes one thing), whether it refuses unknown fields, and a
/// body with a field of the wrong type.
struct BodyRoute {
    path: &'static str,
    tok: Tok,
    strict: bool,
    mistyped: Value,
    with_nul: Value,
}

fn body_routes() -> Vec<BodyRoute> {
    let lease = "00000000-0000-0000-0000-000000000001";
    let r = |p: &'static str, tok, strict, mistyped, with_nul| BodyRoute {
        path: p,
        tok,
        strict,
        mistyped,
        with_nul,
    };
    vec![
        r(
            "/api/v1/apply",
            Tok::Admin,
            true,
            json!({"files": "x"}),
            json!({"files": [{"name": "a\u{0}.yaml", "content": ""}]}),
        ),
        r(
            "/api/v1/diff",
            Tok::Admin,
            true,
            json!({"objects": 5}),
            json!({"objects": [{"kind": "Task\u{0}"}]}),
        ),
        r(
            "/api/v1/projects/web/tasks/cart/transition",
            Tok::Admin,
            true,
            json!({"to": 5}),
            json!({"to": "done\u{0}"}),
        ),
        r(
            "/api/v1/projects/web/runs/r1/signal",
            Tok::Admin,
            true,
            json!({"signal": ["INT"]}),
            json!({"signal": "INT\u{0}"}),
        ),
        r(
            "/api/v1/projects/web/runs/r1/attach",
            Tok::Admin,
            true,
            json!({"ttlSeconds": "long"}),
            json!({"holder": "me\u{0}"}),
        ),
        r(
            "/api/v1/projects/web/runs/r1/attach/renew",
            Tok::Admin,
            true,
            json!({"leaseId": 7}),
            json!({"leaseId": lease, "x": "\u{0}"}),
        ),
        r(
            "/api/v1/projects/web/runs/r1/attach/release",
            Tok::Admin,
            true,
            json!({"leaseId": "not-a-uuid"}),
            json!({"leaseId": "\u{0}"}),
        ),
        r(
            "/api/v1/projects/web/runs/r1/attach/input",
            Tok::Admin,
            true,
            json!({"leaseId": lease, "text": 1}),
            json!({"leaseId": lease, "text": "ls\u{0}"}),
        ),
        r(
            "/api/v1/tokens",
            Tok::Admin,
            true,
            json!({"name": 42}),
            json!({"name": "ci\u{0}"}),
        ),
        r(
            "/api/v1/workers/register",
            Tok::W1,
            false,
            json!({"name": "h1", "platform": "linux", "instance_id": "x", "capacity": 1, "version": "t"}),
            json!({"name": "h1", "platform": "linux", "instance_id": uuid(), "capacity": 1, "version": "t\u{0}"}),
        ),
        r(
            "/api/v1/workers/heartbeat",
            Tok::W1,
            false,
            json!({"instance_id": uuid(), "running": {}}),
            json!({"instance_id": uuid(), "running": [{"session_name": "pam-\u{0}"}]}),
        ),
        r(
            "/api/v1/workers/signals",
            Tok::W1,
            false,
            json!({"signals": [{"run_id": uuid(), "attempt": "one", "kind": "started", "at": "now"}]}),
            json!({"signals": [{"run_id": uuid(), "attempt": 1, "kind": "orphan", "at": "now", "session_name": "pam-\u{0}"}]}),
        ),
        r(
            "/api/v1/workers/snapshots",
            Tok::W1,
            false,
            json!({"run_id": uuid(), "attempt": 1, "text": 5, "lines": 1, "bytes": 1}),
            json!({"run_id": uuid(), "attempt": 1, "text": "a\u{0}", "lines": 1, "bytes": 1}),
        ),
    ]
}

fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The framework's own rejections, for every route with a JSON body.
fn extractor_cases() -> Vec<Case> {
    let mut out = Vec::new();
    for r in body_routes() {
        let p = r.path;
        out.push(
            case(format!("{p}: malformed JSON"), Method::POST, p, r.tok)
                .raw(Some("application/json"), b"{,}"),
        );
        out.push(
            case(format!("{p}: not JSON at all"), Method::POST, p, r.tok)
                .raw(Some("application/json"), b"<xml/>"),
        );
        out.push(
            case(format!("{p}: text/plain"), Method::POST, p, r.tok)
                .raw(Some("text/plain"), b"{}")
                .expect(415, "unsupported_media_type"),
        );
        out.push(
            case(format!("{p}: no content type"), Method::POST, p, r.tok)
                .raw(None, b"{}")
                .expect(415, "unsupported_media_type"),
        );
        out.push(
            case(format!("{p}: empty body"), Method::POST, p, r.tok)
                .raw(Some("application/json"), b""),
        );
        out.push(
            case(format!("{p}: wrong types"), Method::POST, p, r.tok)
                .json(r.mistyped.clone())
                .expect(422, "unprocessable"),
        );
        out.push(
            case(format!("{p}: a JSON array"), Method::POST, p, r.tok)
                .json(json!([1, 2]))
                .expect(422, "unprocessable"),
        );
        out.push(
            case(format!("{p}: NUL in a string"), Method::POST, p, r.tok)
                .json(r.with_nul.clone())
                .naming("NUL"),
        );
        if r.strict {
            out.push(
                case(format!("{p}: unknown field"), Method::POST, p, r.tok)
                    .json(json!({"colour": "red"}))
                    .expect(422, "unprocessable")
                    .naming("colour"),
            );
        }
        // A worker route with an operator token and the other way round.
        let other = if matches!(r.tok, Tok::Admin) {
            Tok::W1
        } else {
            Tok::Admin
        };
        out.push(
            case(
                format!("{p}: the other kind of token"),
                Method::POST,
                p,
                other,
            )
            .json(json!({}))
            .expect(403, "forbidden"),
        );
        out.push(
            case(format!("{p}: no token"), Method::POST, p, Tok::None)
                .json(json!({}))
                .expect(401, "unauthorized"),
        );
    }
    // 413: a body over the 2 MiB default limit, and over apply's.
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(3 << 20));
    out.push(
        case(
            "tokens: 3 MiB body",
            Method::POST,
            "/api/v1/tokens",
            Tok::Admin,
        )
        .raw(Some("application/json"), big.as_bytes())
        .expect(413, "payload_too_large"),
    );
    // Signals take bodies up to apply's limit (16 MiB by default: a
    // `finished` may carry its workspace's patch).
    let huge = format!("{{\"signals\": \"{}\"}}", "x".repeat(17 << 20));
    out.push(
        case(
            "signals: 17 MiB body",
            Method::POST,
            "/api/v1/workers/signals",
            Tok::W1,
        )
        .raw(Some("application/json"), huge.as_bytes())
        .expect(413, "payload_too_large"),
    );
    out.push(
        case(
            "transition: 3 MiB body",
            Method::POST,
            "/api/v1/projects/web/tasks/cart/transition",
            Tok::Admin,
        )
        .raw(Some("application/json"), big.as_bytes())
        .expect(413, "payload_too_large"),
    );
    out
}

fn auth_cases() -> Vec<Case> {
    let mut out = Vec::new();
    for p in [
        "/api/v1/projects",
        "/api/v1/hosts",
        "/api/v1/tokens",
        "/api/v1/events",
        "/api/v1/runs",
    ] {
        out.push(
            case(format!("{p}: no token"), Method::GET, p, Tok::None).expect(401, "unauthorized"),
        );
        out.push(
            case(format!("{p}: unknown token"), Method::GET, p, Tok::Bad)
                .expect(401, "unauthorized"),
        );
        out.push(
            case(format!("{p}: revoked token"), Method::GET, p, Tok::Revoked)
                .expect(401, "unauthorized")
                .naming("revoked"),
        );
        out.push(
            case(format!("{p}: worker token"), Method::GET, p, Tok::W1).expect(403, "forbidden"),
        );
    }
    for p in ["/api/v1/workers/desired", "/api/v1/workers/claim"] {
        let m = if p.ends_with("claim") {
            Method::POST
        } else {
            Method::GET
        };
        out.push(
            case(format!("{p}: revoked token"), m.clone(), p, Tok::Revoked)
                .expect(401, "unauthorized"),
        );
        out.push(case(format!("{p}: operator token"), m, p, Tok::Admin).expect(403, "forbidden"));
    }
    out
}

fn path_and_query_cases() -> Vec<Case> {
    let long = "a".repeat(10 << 10);
    vec![
        case(
            "token id not a uuid",
            Method::DELETE,
            "/api/v1/tokens/not-a-uuid",
            Tok::Admin,
        ),
        case(
            "token id %00",
            Method::DELETE,
            "/api/v1/tokens/%00",
            Tok::Admin,
        )
        .naming("NUL"),
        case(
            "token id 10 KB",
            Method::DELETE,
            format!("/api/v1/tokens/{long}"),
            Tok::Admin,
        )
        .expect(414, "uri_too_long"),
        case(
            "project %00",
            Method::GET,
            "/api/v1/projects/web%00",
            Tok::Admin,
        )
        .naming("NUL"),
        case(
            "project 10 KB",
            Method::GET,
            format!("/api/v1/projects/{long}"),
            Tok::Admin,
        )
        .expect(414, "uri_too_long"),
        case(
            "delete project %00",
            Method::DELETE,
            "/api/v1/projects/%00",
            Tok::Admin,
        ),
        case(
            "task %00",
            Method::GET,
            "/api/v1/projects/web/tasks/ca%00rt",
            Tok::Admin,
        ),
        case(
            "delete task %00",
            Method::DELETE,
            "/api/v1/projects/web/tasks/%00",
            Tok::Admin,
        ),
        case(
            "run %00",
            Method::GET,
            "/api/v1/projects/web/runs/%00",
            Tok::Admin,
        ),
        case(
            "stop run %00",
            Method::POST,
            "/api/v1/projects/web/runs/r%001/stop",
            Tok::Admin,
        ),
        case(
            "run output %00",
            Method::GET,
            "/api/v1/projects/web/runs/%00/output",
            Tok::Admin,
        ),
        case("host %00", Method::GET, "/api/v1/hosts/%00", Tok::Admin),
        case(
            "host action %00",
            Method::POST,
            "/api/v1/hosts/h1/dis%00able",
            Tok::Admin,
        ),
        case(
            "host 10 KB",
            Method::DELETE,
            format!("/api/v1/hosts/{long}"),
            Tok::Admin,
        )
        .expect(414, "uri_too_long"),
        case(
            "unknown host action",
            Method::POST,
            "/api/v1/hosts/h1/explode",
            Tok::Admin,
        )
        .expect(404, "not_found")
        .naming("explode"),
        case(
            "no such project",
            Method::GET,
            "/api/v1/projects/nope",
            Tok::Admin,
        )
        .expect(404, "not_found"),
        case(
            "no such run",
            Method::POST,
            "/api/v1/projects/web/runs/nope/stop",
            Tok::Admin,
        )
        .expect(404, "not_found"),
        case("no such route", Method::GET, "/api/v1/nothing", Tok::Admin).expect(404, "not_found"),
        case("wrong method", Method::PUT, "/api/v1/projects", Tok::Admin)
            .expect(405, "method_not_allowed"),
        case(
            "events limit=-1",
            Method::GET,
            "/api/v1/events?limit=-1",
            Tok::Admin,
        )
        .naming("limit"),
        case(
            "events limit=0",
            Method::GET,
            "/api/v1/events?limit=0",
            Tok::Admin,
        )
        .naming("limit"),
        case(
            "events limit=abc",
            Method::GET,
            "/api/v1/events?limit=abc",
            Tok::Admin,
        )
        .naming("limit"),
        case(
            "events after=abc",
            Method::GET,
            "/api/v1/events?after=abc",
            Tok::Admin,
        )
        .naming("after"),
        case(
            "events after=-5",
            Method::GET,
            "/api/v1/events?after=-5",
            Tok::Admin,
        )
        .naming("after"),
        case(
            "events after=1e99",
            Method::GET,
            "/api/v1/events?after=1e99",
            Tok::Admin,
        )
        .naming("after"),
        case(
            "events since=garbage",
            Method::GET,
            "/api/v1/events?since=garbage",
            Tok::Admin,
        )
        .naming("since"),
        case(
            "events topic %00",
            Method::GET,
            "/api/v1/events?topic=run.%00",
            Tok::Admin,
        )
        .naming("NUL"),
        case(
            "events project %00",
            Method::GET,
            "/api/v1/events?project=w%00eb",
            Tok::Admin,
        )
        .naming("NUL"),
        case(
            "events limit twice",
            Method::GET,
            "/api/v1/events?limit=1&limit=2",
            Tok::Admin,
        ),
        case(
            "stream after=garbage",
            Method::GET,
            "/api/v1/events/stream?after=garbage",
            Tok::Admin,
        )
        .naming("after"),
        case(
            "stream since=x",
            Method::GET,
            "/api/v1/events/stream?since=x",
            Tok::Admin,
        )
        .naming("since"),
        case(
            "run events limit=-1",
            Method::GET,
            "/api/v1/projects/web/runs/r1/events?limit=-1",
            Tok::Admin,
        )
        .naming("limit"),
        case(
            "run events limit=abc",
            Method::GET,
            "/api/v1/projects/web/runs/r1/events?limit=abc",
            Tok::Admin,
        )
        .naming("limit"),
        case(
            "run events after=-1",
            Method::GET,
            "/api/v1/projects/web/runs/r1/events?after=-1",
            Tok::Admin,
        )
        .naming("after"),
        // A run's workspace result.
        case(
            "run result attempt=0",
            Method::GET,
            "/api/v1/projects/web/runs/r1/result?attempt=0",
            Tok::Admin,
        )
        .naming("attempt"),
        case(
            "run result attempt=abc",
            Method::GET,
            "/api/v1/projects/web/runs/r1/result?attempt=abc",
            Tok::Admin,
        )
        .naming("attempt"),
        case(
            "run result unknown parameter",
            Method::GET,
            "/api/v1/projects/web/runs/r1/result?patch=yes",
            Tok::Admin,
        )
        .naming("patch"),
        case(
            "run result without one",
            Method::GET,
            "/api/v1/projects/web/runs/r1/result",
            Tok::Admin,
        )
        .expect(404, "not_found")
        .naming("no workspace result"),
        case(
            "run result with a worker token",
            Method::GET,
            "/api/v1/projects/web/runs/r1/result",
            Tok::W1,
        )
        .expect(403, "forbidden"),
        case(
            "projects bad selector",
            Method::GET,
            "/api/v1/projects?labelSelector=%3Dx",
            Tok::Admin,
        )
        .naming("labelSelector"),
        case(
            "projects unknown param",
            Method::GET,
            "/api/v1/projects?colour=red",
            Tok::Admin,
        )
        .naming("colour"),
        case(
            "tasks bad selector",
            Method::GET,
            "/api/v1/projects/web/tasks?labelSelector=a%3D%3D%3Db",
            Tok::Admin,
        )
        .naming("labelSelector"),
        case(
            "all tasks selector %00",
            Method::GET,
            "/api/v1/tasks?labelSelector=a%00",
            Tok::Admin,
        )
        .naming("NUL"),
        case(
            "runs unknown param",
            Method::GET,
            "/api/v1/runs?since=yesterday",
            Tok::Admin,
        )
        .naming("since"),
        case(
            "hosts bad selector",
            Method::GET,
            "/api/v1/hosts?labelSelector=Bad%20Key%21%3Dx",
            Tok::Admin,
        )
        .naming("labelSelector"),
        case(
            "claim wait=abc",
            Method::POST,
            "/api/v1/workers/claim?wait=abc",
            Tok::W1,
        )
        .naming("wait"),
        case(
            "claim wait=-1",
            Method::POST,
            "/api/v1/workers/claim?wait=-1",
            Tok::W1,
        )
        .naming("wait"),
        case(
            "claim max=0",
            Method::POST,
            "/api/v1/workers/claim?max=0",
            Tok::W1,
        )
        .naming("max"),
        case(
            "claim max=abc",
            Method::POST,
            "/api/v1/workers/claim?max=abc",
            Tok::W1,
        )
        .naming("max"),
    ]
}

/// A YAML file through apply (and diff).
fn yaml(route: &'static str, what: &str, content: String, mentions: &'static str) -> Case {
    let mut c = case(format!("{route}: {what}"), Method::POST, route, Tok::Admin)
        .json(json!({"files": [{"name": format!("{what}.yaml"), "content": content}]}))
        .expect(422, "invalid")
        .positioned();
    // Every YAML error names its file.
    c.mentions = Some(if mentions.is_empty() {
        "yaml"
    } else {
        mentions
    });
    c
}

fn task_yaml(spec: &str) -> String {
    format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: t9, project: web}}\nspec:\n{spec}"
    )
}

fn manifest_cases() -> Vec<Case> {
    let deep = format!(
        "apiVersion: pam.dev/v1\nkind: Task\nmetadata: {{name: a, project: web}}\nspec: {{title: A}}\nx:\n{}a\n",
        "- ".repeat(5_000)
    );
    let mut bomb = String::from("apiVersion: pam.dev/v1\nkind: Task\nmetadata: {name: a, project: web}\nspec: {title: A}\nx:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    let names = ["a", "b", "c", "d", "e", "f", "g", "h", "i"];
    for w in names.windows(2) {
        let items = vec![format!("*{}", w[0]); 10].join(",");
        bomb.push_str(&format!("  {}: &{} [{items}]\n", w[1], w[1]));
    }
    let labels: String = (0..10_000).map(|i| format!("    k{i}: v\n")).collect();
    let mut out = Vec::new();
    for route in ["/api/v1/apply", "/api/v1/diff"] {
        out.push(yaml(route, "deep", deep.clone(), "nesting deeper"));
        out.push(yaml(route, "alias-bomb", bomb.clone(), "alias"));
        // A ref git would read as an option.
        let ws = "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r9, project: web}\nspec:\n  task: cart\n  provider: exec\n  command: [\"true\"]\n  workspace: {ref: \"--orphan\"}\n";
        out.push(yaml(
            route,
            "workspace-ref",
            ws.to_string(),
            "spec.workspace.ref",
        ));
        out.push(yaml(
            route,
            "nul-title",
            task_yaml("  title: \"a\\0b\"\n"),
            "spec.title",
        ));
        out.push(yaml(
            route,
            "1mb-title",
            task_yaml(&format!("  title: {}\n", "x".repeat(1 << 20))),
            "",
        ));
        out.push(yaml(
            route,
            "big-description",
            task_yaml(&format!(
                "  title: A\n  description: {}\n",
                "d".repeat(100_000)
            )),
            "spec.description",
        ));
        out.push(yaml(route, "10000-labels", format!("apiVersion: pam.dev/v1\nkind: Task\nmetadata:\n  name: t9\n  project: web\n  labels:\n{labels}spec: {{title: A}}\n"), "metadata.labels"));
        out.push(yaml(
            route,
            "bad-label-key",
            task_yaml("  title: A\n")
                .replace("project: web}", "project: web, labels: {\"Bad Key!\": x}}"),
            "Bad Key!",
        ));
        out.push(yaml(
            route,
            "long-name",
            task_yaml("  title: A\n").replace("name: t9", &format!("name: {}", "n".repeat(64))),
            "metadata.name",
        ));
        out.push(yaml(
            route,
            "unknown-field",
            task_yaml("  title: A\n  colour: red\n"),
            "colour",
        ));
        out.push(yaml(
            route,
            "wrong-type",
            task_yaml("  title: A\n  sortOrder: many\n"),
            "sortOrder",
        ));
        out.push(yaml(
            route,
            "not-yaml",
            "{{{{ : : :".into(),
            "not-yaml.yaml",
        ));
        out.push(yaml(route, "huge-prompt", format!("apiVersion: pam.dev/v1\nkind: Run\nmetadata: {{name: r9, project: web}}\nspec: {{task: cart, provider: claude, cwd: /tmp, prompt: {}}}\n", "p".repeat(300 << 10)), "spec.prompt"));
        out.push(yaml(route, "timeout-past-i32", "apiVersion: pam.dev/v1\nkind: Run\nmetadata: {name: r9, project: web}\nspec: {task: cart, provider: claude, cwd: /tmp, dispatchTimeoutSeconds: 4294967295}\n".into(), "spec.dispatchTimeoutSeconds"));
        // The same limits on JSON objects (the objects path).
        let obj = |spec: Value| json!({"objects": [{"apiVersion": "pam.dev/v1", "kind": "Task", "metadata": {"name": "t9", "project": "web"}, "spec": spec}]});
        out.push(
            case(
                format!("{route}: object NUL title"),
                Method::POST,
                route,
                Tok::Admin,
            )
            .json(obj(json!({"title": "a\u{0}b"})))
            .naming("NUL"),
        );
        out.push(
            case(
                format!("{route}: object 1 MB title"),
                Method::POST,
                route,
                Tok::Admin,
            )
            .json(obj(json!({"title": "x".repeat(1 << 20)})))
            .expect(422, "invalid")
            .naming("spec.title"),
        );
        out.push(
            case(
                format!("{route}: object 5 MB description"),
                Method::POST,
                route,
                Tok::Admin,
            )
            .json(obj(
                json!({"title": "A", "description": "d".repeat(5 << 20)}),
            ))
            .expect(422, "invalid")
            .naming("spec.description"),
        );
        let many: serde_json::Map<String, Value> =
            (0..10_000).map(|i| (format!("k{i}"), json!("v"))).collect();
        out.push(case(format!("{route}: object 10,000 labels"), Method::POST, route, Tok::Admin).json(json!({"objects": [{"apiVersion": "pam.dev/v1", "kind": "Task", "metadata": {"name": "t9", "project": "web", "labels": many}, "spec": {"title": "A"}}]})).expect(422, "invalid").naming("metadata.labels"));
        out.push(
            case(
                format!("{route}: object not a manifest"),
                Method::POST,
                route,
                Tok::Admin,
            )
            .json(json!({"objects": [42]}))
            .expect(422, "invalid"),
        );
        // An object's error names its field, as a file's does,
        // and integers past PostgreSQL's integer are refused with the range.
        let run = |policy: Value| json!({"objects": [{"apiVersion": "pam.dev/v1", "kind": "Run", "metadata": {"name": "r9", "project": "web"}, "spec": {"task": "cart", "provider": "claude", "cwd": "/tmp", "restartPolicy": policy}}]});
        out.push(
            case(
                format!("{route}: object maxAttempts -1"),
                Method::POST,
                route,
                Tok::Admin,
            )
            .json(run(json!({"maxAttempts": -1})))
            .expect(422, "invalid")
            .naming("spec.restartPolicy.maxAttempts"),
        );
        for field in ["maxAttempts", "backoffSeconds", "backoffMaxSeconds"] {
            out.push(
                case(
                    format!("{route}: object {field} 4294967295"),
                    Method::POST,
                    route,
                    Tok::Admin,
                )
                .json(run(json!({ field: 4294967295u64 })))
                .expect(422, "invalid")
                .naming("to 2147483647"),
            );
        }
        out.push(
            case(
                format!("{route}: object title a number"),
                Method::POST,
                route,
                Tok::Admin,
            )
            .json(obj(json!({"title": 7})))
            .expect(422, "invalid")
            .naming("spec.title"),
        );
    }
    out
}

fn worker_cases(r1: &str) -> Vec<Case> {
    let reg = |labels: Value, version: Value| json!({"name": "h1", "platform": "linux", "instance_id": uuid(), "capacity": 1, "labels": labels, "version": version});
    let many: serde_json::Map<String, Value> =
        (0..10_000).map(|i| (format!("k{i}"), json!("v"))).collect();
    let sig = |run: &str, kind: &str, session: Option<&str>| {
        let mut s =
            json!({"run_id": run, "attempt": 1, "kind": kind, "at": "2026-03-01T12:00:00Z"});
        if let Some(n) = session {
            s["session_name"] = json!(n);
        }
        json!({"signals": [s]})
    };
    let snap =
        |run: &str| json!({"run_id": run, "attempt": 1, "text": "hello", "lines": 1, "bytes": 5});
    let w = |what: &str, path: &'static str, tok: Tok, body: Value| {
        case(what, Method::POST, path, tok).json(body)
    };
    let (reg_p, sig_p, snap_p, hb_p) = (
        "/api/v1/workers/register",
        "/api/v1/workers/signals",
        "/api/v1/workers/snapshots",
        "/api/v1/workers/heartbeat",
    );
    let hb = |name: &str| json!({"instance_id": uuid(), "running": [{"session_name": name}]});
    vec![
        w("register: 1 MB version", reg_p, Tok::W1, reg(json!({}), json!("v".repeat(1 << 20)))).expect(422, "unprocessable").naming("version"),
        w("register: 200-byte version", reg_p, Tok::W1, reg(json!({}), json!("v".repeat(200)))).expect(422, "unprocessable").naming("version"),
        w("register: version with a newline", reg_p, Tok::W1, reg(json!({}), json!("1.0\n2.0"))).expect(422, "unprocessable").naming("version"),
        w("register: 10,000 labels", reg_p, Tok::W1, reg(Value::Object(many), json!("t"))).expect(422, "unprocessable").naming("labels"),
        w("register: label key Bad Key!", reg_p, Tok::W1, reg(json!({"Bad Key!": "x"}), json!("t"))).expect(422, "unprocessable").naming("Bad Key!"),
        w("register: label value with spaces", reg_p, Tok::W1, reg(json!({"gpu": "a b"}), json!("t"))).expect(422, "unprocessable").naming("labels.gpu"),
        w("register: label key with a prefix of its own", reg_p, Tok::W1, reg(json!({"pam.dev/secure": "true"}), json!("t"))).expect(422, "unprocessable").naming("pam.dev/secure"),
        w("register: 1 KB label key", reg_p, Tok::W1, reg(json!({"k".repeat(1024): "x"}), json!("t"))).expect(422, "unprocessable").naming("labels"),
        w("register: another host's name", reg_p, Tok::W1, json!({"name": "h2", "platform": "linux", "instance_id": uuid(), "capacity": 1, "version": "t"})).expect(403, "forbidden"),
        w("register: unknown platform", reg_p, Tok::W1, json!({"name": "h1", "platform": "beos", "instance_id": uuid(), "capacity": 1, "version": "t"})).expect(422, "unprocessable"),
        w("register: negative capacity", reg_p, Tok::W1, json!({"name": "h1", "platform": "linux", "instance_id": uuid(), "capacity": -1, "version": "t"})).expect(422, "unprocessable"),
        w("heartbeat: bad session name", hb_p, Tok::W1, hb("evil name 2 ; <script>")).expect(422, "unprocessable").naming("running[0].session_name"),
        w("heartbeat: pam- and 9 hex", hb_p, Tok::W1, hb("pam-123456789")).expect(422, "unprocessable").naming("session_name"),
        w("heartbeat: upper-case hex", hb_p, Tok::W1, hb("pam-ABCDEF12")).expect(422, "unprocessable").naming("session_name"),
        w("signals: orphan with a bad session name", sig_p, Tok::W1, sig(&uuid(), "orphan", Some("evil name 2 ; <script>"))).expect(422, "signal_rejected").naming("session_name"),
        w("signals: started with a bad session name", sig_p, Tok::W1, sig(r1, "started", Some("pam-"))).expect(422, "signal_rejected").naming("session_name"),
        w("signals: 1 MB session name", sig_p, Tok::W1, sig(&uuid(), "orphan", Some(&"p".repeat(1 << 20)))).expect(422, "signal_rejected").naming("session_name"),
        w("signals: orphan without a session", sig_p, Tok::W1, sig(&uuid(), "orphan", None)).expect(422, "signal_rejected").naming("session_name"),
        w("signals: another host's run", sig_p, Tok::W2, sig(r1, "started", None)).expect(403, "forbidden").naming("not assigned"),
        w("signals: another host's run, finished", sig_p, Tok::W2, json!({"signals": [{"run_id": r1, "attempt": 1, "kind": "finished", "exit_code": 0, "at": "now"}]})).expect(403, "forbidden"),
        w("signals: attempt from the future", sig_p, Tok::W1, json!({"signals": [{"run_id": r1, "attempt": 9, "kind": "started", "at": "now"}]})).expect(422, "signal_rejected").naming("attempt"),
        w("signals: attempt 0", sig_p, Tok::W1, json!({"signals": [{"run_id": r1, "attempt": 0, "kind": "started", "at": "now"}]})).expect(422, "signal_rejected").naming("attempt"),
        w("signals: progress without seq", sig_p, Tok::W1, sig(r1, "progress", None)).expect(422, "signal_rejected").naming("seq"),
        w("signals: 2 KB reason", sig_p, Tok::W1, json!({"signals": [{"run_id": r1, "attempt": 1, "kind": "failed", "reason": "r".repeat(2048), "at": "now"}]})).expect(422, "signal_rejected").naming("reason"),
        w("signals: unknown kind", sig_p, Tok::W1, sig(r1, "exploded", None)).expect(422, "unprocessable").naming("kind"),
        w("signals: started with a result", sig_p, Tok::W1, json!({"signals": [{"run_id": r1, "attempt": 1, "kind": "started", "at": "now", "result": json!({"branch": "b", "base_commit": "a", "head_commit": "c", "commits": 1, "files_changed": 1, "insertions": 1, "deletions": 0, "patch": ""})}]})).expect(422, "signal_rejected").naming("result"),
        w("signals: finished with an empty branch", sig_p, Tok::W1, json!({"signals": [{"run_id": r1, "attempt": 1, "kind": "finished", "exit_code": 0, "at": "now", "result": {"branch": "", "base_commit": "a", "head_commit": "c", "commits": 1, "files_changed": 1, "insertions": 1, "deletions": 0, "patch": ""}}]})).expect(422, "signal_rejected").naming("result.branch"),
        w("signals: finished with a 9 MB patch", sig_p, Tok::W1, json!({"signals": [{"run_id": r1, "attempt": 1, "kind": "finished", "exit_code": 0, "at": "now", "result": {"branch": "b", "base_commit": "a", "head_commit": "c", "commits": 1, "files_changed": 1, "insertions": 1, "deletions": 0, "patch": "p".repeat(9 << 20)}}]})).expect(422, "signal_rejected").naming("result.patch"),
        w("signals: 2,000 signals", sig_p, Tok::W1, json!({"signals": vec![sig(r1, "progress", None)["signals"][0].clone(); 2000]})).expect(422, "unprocessable").naming("signals"),
        w("snapshots: another host's run", snap_p, Tok::W2, snap(r1)).expect(403, "forbidden").naming("not assigned"),
        w("snapshots: unknown run", snap_p, Tok::W1, snap(&uuid())).expect(404, "not_found"),
        w("snapshots: 2 MB text", snap_p, Tok::W1, json!({"run_id": r1, "attempt": 1, "text": "t".repeat(1_900_000), "lines": 1, "bytes": 1})).expect(422, "unprocessable").naming("text"),
        w("snapshots: negative lines", snap_p, Tok::W1, json!({"run_id": r1, "attempt": 1, "text": "", "lines": -1, "bytes": 1})).expect(422, "unprocessable").naming("lines"),
    ]
}

fn operator_body_cases() -> Vec<Case> {
    let t = "/api/v1/tokens";
    vec![
        case("token: 1 MB name", Method::POST, t, Tok::Admin)
            .json(json!({"name": "n".repeat(1 << 20)}))
            .expect(422, "unprocessable")
            .naming("name"),
        case("token: 64-byte name", Method::POST, t, Tok::Admin)
            .json(json!({"name": "n".repeat(64)}))
            .expect(422, "unprocessable")
            .naming("name"),
        case("token: name with a newline", Method::POST, t, Tok::Admin)
            .json(json!({"name": "a\nb"}))
            .expect(422, "unprocessable")
            .naming("name"),
        case("token: empty name", Method::POST, t, Tok::Admin)
            .json(json!({"name": "  "}))
            .naming("name"),
        case("token: both name and worker", Method::POST, t, Tok::Admin)
            .json(json!({"name": "a", "worker": "h1"})),
        case("token: neither", Method::POST, t, Tok::Admin).json(json!({})),
        case("token: bad worker host", Method::POST, t, Tok::Admin)
            .json(json!({"worker": "Bad Host!"}))
            .naming("worker"),
        case("token: 1 MB worker host", Method::POST, t, Tok::Admin)
            .json(json!({"worker": "h".repeat(1 << 20)}))
            .naming("worker"),
        case(
            "transition: unknown status",
            Method::POST,
            "/api/v1/projects/web/tasks/cart/transition",
            Tok::Admin,
        )
        .json(json!({"to": "exploded"}))
        .expect(422, "unprocessable")
        .naming("to"),
        case(
            "signal: unknown signal",
            Method::POST,
            "/api/v1/projects/web/runs/r1/signal",
            Tok::Admin,
        )
        .json(json!({"signal": "NOPE"})),
        case(
            "signal: 1 MB signal",
            Method::POST,
            "/api/v1/projects/web/runs/r1/signal",
            Tok::Admin,
        )
        .json(json!({"signal": "S".repeat(1 << 20)})),
        case(
            "attach: ttl 0",
            Method::POST,
            "/api/v1/projects/web/runs/r1/attach",
            Tok::Admin,
        )
        .json(json!({"ttlSeconds": 0}))
        .naming("ttlSeconds"),
        case(
            "attach: 1 KB holder",
            Method::POST,
            "/api/v1/projects/web/runs/r1/attach",
            Tok::Admin,
        )
        .json(json!({"holder": "h".repeat(1024)}))
        .naming("holder"),
        case(
            "attach input: two lines",
            Method::POST,
            "/api/v1/projects/web/runs/r1/attach/input",
            Tok::Admin,
        )
        .json(json!({"leaseId": uuid(), "text": "a\nb"}))
        .naming("text"),
        case(
            "attach renew: no such lease",
            Method::POST,
            "/api/v1/projects/web/runs/r1/attach/renew",
            Tok::Admin,
        )
        .json(json!({"leaseId": uuid()}))
        .expect(404, "lease_not_held"),
        case(
            "apply: prune without applyset",
            Method::POST,
            "/api/v1/apply",
            Tok::Admin,
        )
        .json(json!({"files": [], "prune": true})),
    ]
}

async fn send(
    http: &reqwest::Client,
    url: &str,
    tokens: &Tokens,
    c: &Case,
) -> (u16, Value, Duration) {
    let start = Instant::now();
    let (status, text) = if c.status == 413 {
        tokio::time::timeout(Duration::from_secs(5), raw_send(url, tokens, c))
            .await
            .unwrap_or((0, "no answer within 5 s".into()))
    } else {
        let mut req = http.request(c.method.clone(), format!("{url}{}", c.path));
        if let Some(t) = tokens.get(c.tok) {
            req = req.bearer_auth(t);
        }
        if let Some(ct) = c.content_type {
            req = req.header("content-type", ct);
        }
        if let Some(b) = &c.body {
            req = req.body(b.clone());
        }
        match req.send().await {
            Ok(res) => {
                let status = res.status().as_u16();
                (status, res.text().await.unwrap_or_default())
            }
            Err(e) => (0, format!("no answer: {e}")),
        }
    };
    let took = start.elapsed();
    let body = serde_json::from_str(&text)
        .unwrap_or_else(|_| json!({ "not_json": text.chars().take(300).collect::<String>() }));
    (status, body, took)
}

/// A request whose body pamd refuses before reading it all (413): written
/// by one task while another reads the answer, so the answer is read even
/// though pamd closes the connection on the rest of the body (reqwest
/// reports that as a send error).
async fn raw_send(url: &str, tokens: &Tokens, c: &Case) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://").to_string();
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut rd, mut wr) = stream.into_split();
    let body = c.body.clone().unwrap_or_default();
    let mut head = format!(
        "{} {} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n",
        c.method,
        c.path,
        body.len()
    );
    if let Some(t) = tokens.get(c.tok) {
        head.push_str(&format!("Authorization: Bearer {t}\r\n"));
    }
    if let Some(ct) = c.content_type {
        head.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    head.push_str("\r\n");
    let writer = tokio::spawn(async move {
        // pamd stops reading past its limit: a write error here is expected.
        let _ = wr.write_all(head.as_bytes()).await;
        let _ = wr.write_all(&body).await;
    });
    let mut got = Vec::new();
    let mut buf = [0u8; 8192];
    let answer = loop {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => break String::from_utf8_lossy(&got).into_owned(),
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, rest)) = text.split_once("\r\n\r\n") {
            let len = head.lines().find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
            });
            if len.is_some_and(|n| rest.len() >= n) {
                break text;
            }
        }
    };
    writer.abort();
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// Every problem with one answer (empty when it is what the case expects).
fn problems(c: &Case, status: u16, body: &Value, took: Duration) -> Vec<String> {
    let mut p = Vec::new();
    if status == 500 {
        p.push("a 500".into());
    }
    if status != c.status {
        p.push(format!("status {status}, expected {}", c.status));
    }
    let code = body["error"]["code"].as_str().unwrap_or("");
    let message = body["error"]["message"].as_str().unwrap_or("");
    if code != c.code {
        p.push(format!("code {code:?}, expected {:?}", c.code));
    }
    if message.trim().is_empty() {
        p.push("no message".into());
    }
    if let Some(m) = c.mentions {
        let errors = body["errors"].to_string();
        if !message.contains(m) && !errors.contains(m) {
            p.push(format!("the message does not name {m:?}"));
        }
    }
    if c.positioned {
        let e = &body["errors"][0];
        if e["file"].as_str().is_none() || e["line"].as_u64().is_none() {
            p.push(format!("a manifest error without file and line: {e}"));
        }
    }
    if c.code == "invalid" && body["errors"].as_array().is_none_or(Vec::is_empty) {
        p.push("invalid without errors".into());
    }
    if took >= Duration::from_secs(1) {
        p.push(format!("took {took:?}"));
    }
    if !p.is_empty() {
        p.push(format!(
            "body: {}",
            body.to_string().chars().take(400).collect::<String>()
        ));
    }
    p
}

/// What a rejected request must not change: the journal's high-water mark
/// and every object count.
async fn written(pamd: &Pamd) -> Value {
    let count = |v: &Value| v["items"].as_array().map_or(0, Vec::len);
    let events = pamd
        .get("/api/v1/events?after=0&limit=10000")
        .await
        .unwrap();
    json!({
        "events": count(&events),
        "next": events["next"],
        "projects": count(&pamd.get("/api/v1/projects").await.unwrap()),
        "tasks": count(&pamd.get("/api/v1/tasks").await.unwrap()),
        "runs": count(&pamd.get("/api/v1/runs").await.unwrap()),
        "hosts": count(&pamd.get("/api/v1/hosts").await.unwrap()),
        "tokens": count(&pamd.get("/api/v1/tokens").await.unwrap()),
    })
}

async fn post(
    http: &reqwest::Client,
    pamd: &Pamd,
    token: &str,
    path: &str,
    body: Value,
) -> (u16, Value) {
    let r = http
        .post(format!("{}{path}", pamd.url))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_is_a_json_4xx_and_writes_nothing() {
    let pamd = Pamd::start(PamdOptions {
        config_toml: CONFIG.into(),
        ..Default::default()
    })
    .await
    .unwrap();
    // A case that hangs (an event stream opened where a refusal was due)
    // fails, not the suite.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    // Two registered hosts, r1 claimed by h1, a revoked operator token.
    let (w1, w2) = (
        create_worker_token(&pamd, "h1").await.unwrap(),
        create_worker_token(&pamd, "h2").await.unwrap(),
    );
    for (tok, name) in [(&w1, "h1"), (&w2, "h2")] {
        let (s, b) = post(&http, &pamd, tok, "/api/v1/workers/register", json!({"name": name, "platform": "linux", "instance_id": uuid(), "capacity": 2, "labels": {}, "version": "t"})).await;
        assert_eq!(s, 200, "{b}");
    }
    let (s, b) = post(
        &http,
        &pamd,
        &pamd.token,
        "/api/v1/apply",
        json!({"files": [{"name": "tree.yaml", "content": TREE}]}),
    )
    .await;
    assert_eq!(s, 200, "{b}");
    let (s, claim) = post(&http, &pamd, &w1, "/api/v1/workers/claim?wait=5", json!({})).await;
    assert_eq!(s, 200, "{claim}");
    let r1 = claim["runs"][0]["run_id"]
        .as_str()
        .expect("h1 claimed r1")
        .to_string();
    let (s, t) = post(
        &http,
        &pamd,
        &pamd.token,
        "/api/v1/tokens",
        json!({"name": "gone"}),
    )
    .await;
    assert_eq!(s, 201, "{t}");
    let revoked = t["token"].as_str().unwrap().to_string();
    let r = http
        .delete(format!(
            "{}/api/v1/tokens/{}",
            pamd.url,
            t["id"].as_str().unwrap()
        ))
        .bearer_auth(&pamd.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 204);
    let tokens = Tokens {
        admin: pamd.token.clone(),
        w1: w1.clone(),
        w2,
        revoked,
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = written(&pamd).await;

    let mut cases = extractor_cases();
    cases.extend(auth_cases());
    cases.extend(path_and_query_cases());
    cases.extend(manifest_cases());
    cases.extend(worker_cases(&r1));
    cases.extend(operator_body_cases());
    assert!(cases.len() >= 150, "only {} cases", cases.len());

    let mut failed = Vec::new();
    for c in &cases {
        let (status, body, took) = send(&http, &pamd.url, &tokens, c).await;
        let p = problems(c, status, &body, took);
        if !p.is_empty() {
            failed.push(format!(
                "{} {} [{}]: {}",
                c.method,
                c.path.chars().take(80).collect::<String>(),
                c.what,
                p.join("; ")
            ));
        }
    }
    let after = written(&pamd).await;
    let health = http
        .get(format!("{}/healthz", pamd.url))
        .send()
        .await
        .unwrap();
    assert!(
        health.status().is_success(),
        "pamd died; log:\n{}",
        pamd.log()
    );
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n{}",
        failed.len(),
        cases.len(),
        failed.join("\n")
    );
    assert_eq!(before, after, "a rejected request wrote something");
    eprintln!("{} bad-input cases passed", cases.len());

    // 500 identical orphan reports, sent twice: one event per session.
    let sessions = ["pam-0000000a", "pam-0000000b"];
    let signals: Vec<Value> = (0..500)
        .map(|i| json!({"run_id": uuid::Uuid::nil(), "attempt": 1, "kind": "orphan", "at": "now", "reason": "test", "session_name": sessions[i % 2]}))
        .collect();
    for _ in 0..2 {
        let (s, b) = post(
            &http,
            &pamd,
            &w1,
            "/api/v1/workers/signals",
            json!({"signals": signals}),
        )
        .await;
        assert_eq!(s, 200, "{b}");
    }
    let events = pamd
        .get("/api/v1/events?after=0&limit=10000&topic=run.orphan_detected")
        .await
        .unwrap();
    let mut named: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["payload"]["session_name"].as_str().unwrap())
        .collect();
    named.sort_unstable();
    assert_eq!(
        named, sessions,
        "one run.orphan_detected per distinct session"
    );
}
