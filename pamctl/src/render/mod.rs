//! Turning server objects into what pamctl prints: tables, YAML, JSON,
//! names, unified diffs, `describe` pages. Pure functions of their inputs
//! (and of `now` where ages are shown), so they are snapshot-tested.

pub mod age;
pub mod columns;
pub mod describe;
pub mod diff;
pub mod events;
pub mod table;
pub mod tree;
pub mod usage;

use chrono::{DateTime, Utc};
use pam_manifests::Kind;
use serde_json::{Map, Value};

use crate::error::{CliError, Result};

pub use columns::Output;

pub const API_VERSION: &str = "pam.dev/v1";

/// An object as printed: exactly `{apiVersion, kind, metadata, spec,
/// status}`, in that order, whatever else the server sent.
pub fn object(obj: &Value) -> Value {
    let mut m = Map::new();
    for key in ["apiVersion", "kind", "metadata", "spec", "status"] {
        let v = obj.get(key).cloned().unwrap_or_else(|| match key {
            "apiVersion" => Value::String(API_VERSION.into()),
            _ => Value::Object(Map::new()),
        });
        m.insert(key.to_string(), v);
    }
    Value::Object(m)
}

/// A `List` of printed objects.
pub fn list(items: &[Value]) -> Value {
    let mut m = Map::new();
    m.insert("apiVersion".into(), Value::String(API_VERSION.into()));
    m.insert("kind".into(), Value::String("List".into()));
    m.insert(
        "items".into(),
        Value::Array(items.iter().map(object).collect()),
    );
    Value::Object(m)
}

/// `task/build`.
pub fn name(kind: Kind, obj: &Value) -> String {
    format!(
        "{}/{}",
        kind.singular(),
        obj.pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("<none>")
    )
}

/// `task.pam.dev/build`: how apply, delete and friends name what they did.
pub fn qualified(kind: Kind, name: &str) -> String {
    format!("{}.pam.dev/{name}", kind.singular())
}

/// `web/task.pam.dev/build`: [`qualified`] with the project of a project
/// object in front, so every line of apply, diff and delete names it (a
/// batch may span projects); projects, hosts and sources have none.
pub fn qualified_in(project: Option<&str>, kind: Kind, name: &str) -> String {
    match project {
        Some(p) => format!("{p}/{}", qualified(kind, name)),
        None => qualified(kind, name),
    }
}

pub fn to_json(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("a JSON value serializes");
    s.push('\n');
    s
}

pub fn to_yaml(v: &Value) -> String {
    serde_yaml::to_string(v).expect("a JSON value serializes as YAML")
}

/// How `get` lays out tables and lists, beyond `-o`.
#[derive(Debug, Clone, Default)]
pub struct GetOpts {
    /// A PROJECT column (`-A`).
    pub with_project: bool,
    /// `--no-headers`.
    pub no_headers: bool,
    /// `--show-labels`.
    pub show_labels: bool,
    /// `-L key`: one column per label key.
    pub label_columns: Vec<String>,
}

/// Renders `get` output for one kind. `single`: a named object was asked
/// for (JSON, YAML and jsonpath print it bare rather than in a List).
pub fn get(
    kind: Kind,
    items: &[Value],
    output: &Output,
    single: bool,
    opts: &GetOpts,
    now: DateTime<Utc>,
) -> Result<String> {
    get_groups(&[(kind, items.to_vec())], output, single, opts, now)
}

/// Renders `get` output for objects of one or more kinds (`get
/// runs,tasks`): a table per kind, separated by a blank line, names
/// printed `kind/name` when there is more than one kind; one List (or the
/// single object) for JSON, YAML and jsonpath; one custom-columns table.
pub fn get_groups(
    groups: &[(Kind, Vec<Value>)],
    output: &Output,
    single: bool,
    opts: &GetOpts,
    now: DateTime<Utc>,
) -> Result<String> {
    let all: Vec<Value> = groups.iter().flat_map(|(_, items)| items.clone()).collect();
    let whole = || -> Result<Value> {
        match (single, all.as_slice()) {
            (true, [one]) => Ok(object(one)),
            (true, _) => Err(CliError::new(
                crate::error::Exit::ServerError,
                "the server sent a list where one object was expected",
            )),
            (false, _) => Ok(list(&all)),
        }
    };
    Ok(match output {
        Output::Table | Output::Wide => {
            let qualify = groups.len() > 1;
            let tables: Vec<String> = groups
                .iter()
                .filter(|(_, items)| !items.is_empty())
                .map(|(kind, items)| {
                    let wide = *output == Output::Wide;
                    let mut t = table::objects(*kind, items, wide, opts.with_project, qualify, now);
                    columns::add_label_columns(
                        &mut t,
                        items,
                        &opts.label_columns,
                        opts.show_labels,
                    );
                    let mut out = t.render_rows(!opts.no_headers);
                    // A get of one Source, wide: its objects' tree under
                    // the row.
                    if wide && *kind == Kind::Source {
                        for tree in items.iter().filter_map(tree::source_objects) {
                            out.push('\n');
                            out.push_str(&tree);
                        }
                    }
                    out
                })
                .collect();
            tables.join("\n")
        }
        Output::CustomColumns(cols) => {
            let mut t = columns::custom_table(cols, &all);
            columns::add_label_columns(&mut t, &all, &opts.label_columns, opts.show_labels);
            t.render_rows(!opts.no_headers)
        }
        Output::Name => groups
            .iter()
            .flat_map(|(kind, items)| items.iter().map(|o| name(*kind, o) + "\n"))
            .collect(),
        Output::Json => to_json(&whole()?),
        Output::Yaml => to_yaml(&whole()?),
        Output::JsonPath(t) => t.render(&whole()?),
    })
}

#[cfg(test)]
pub(crate) mod samples {
    //! Sample objects shaped as the server prints them.
    use serde_json::{json, Value};

    /// A run named `name` whose usage in all is `tokens` input tokens (1
    /// cached) and `cost` dollars.
    pub fn run_with_usage(name: &str, cost: f64, tokens: u64) -> Value {
        json!({"metadata": {"name": name}, "status": {"usage": {
            "attempt": {"inputTokens": 0, "outputTokens": 0, "costUsd": 0.0},
            "total": {"inputTokens": tokens, "cachedInputTokens": 1, "outputTokens": 0, "costUsd": cost}
        }}})
    }

    pub fn now() -> chrono::DateTime<chrono::Utc> {
        chrono::DateTime::parse_from_rfc3339("2026-03-01T12:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc)
    }

    pub fn tasks() -> Vec<Value> {
        vec![
            json!({"apiVersion": "pam.dev/v1", "kind": "Task",
                "metadata": {"name": "release-1", "project": "web", "uid": "0b8a6f5e-1c2d-4e5f-8a9b-0c1d2e3f4a5b",
                    "generation": 1, "resourceVersion": "17", "creationTimestamp": "2026-02-27T09:00:00Z",
                    "labels": {"app": "web"}},
                "spec": {"type": "milestone", "title": "Release 1", "description": "", "status": "doing", "sortOrder": 0},
                "status": {"phase": "doing", "path": "release-1", "completion": {"done": 1, "total": 2}, "observedGeneration": 1}}),
            json!({"apiVersion": "pam.dev/v1", "kind": "Task",
                "metadata": {"name": "build", "project": "web", "uid": "9f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9",
                    "generation": 3, "resourceVersion": "42", "creationTimestamp": "2026-03-01T11:55:00Z"},
                "spec": {"type": "task", "title": "Build it", "description": "", "parent": "release-1",
                    "status": "todo", "assignee": "ana", "sortOrder": 1},
                "status": {"phase": "todo", "path": "release-1/build", "observedGeneration": 3, "blockedBy": ["design", "infra"],
                    "conditions": [{"type": "Ready", "status": "True", "reason": "Reconciled", "lastTransitionTime": "2026-03-01T11:56:00Z"}]},
                "extra": "dropped by -o json"}),
        ]
    }

    pub fn runs() -> Vec<Value> {
        vec![json!({"apiVersion": "pam.dev/v1", "kind": "Run",
            "metadata": {"name": "build-1", "project": "web", "uid": "5e4d3c2b-1a09-4f8e-9d7c-6b5a4f3e2d1c",
                "generation": 1, "resourceVersion": "50", "creationTimestamp": "2026-03-01T09:00:00Z"},
            "spec": {"task": "build", "provider": "claude", "prompt": "make it build", "cwd": "/src/web",
                "target": {"host": "alpha"}, "restartPolicy": {"maxAttempts": 3, "backoffSeconds": 10, "backoffMaxSeconds": 300}},
            "status": {"phase": "failed", "attempt": 2, "host": "alpha", "sessionName": "pam-5e4d3c2b",
                "exitCode": 1, "failureReason": "exit_nonzero",
                "usage": {"attempt": {"inputTokens": 200, "cachedInputTokens": 0, "outputTokens": 34, "costUsd": 0.002},
                    "total": {"inputTokens": 1200, "cachedInputTokens": 100, "outputTokens": 34, "costUsd": 0.0123}}}})]
    }

    pub fn hosts() -> Vec<Value> {
        vec![
            json!({"apiVersion": "pam.dev/v1", "kind": "Host",
                "metadata": {"name": "alpha", "uid": "11111111-2222-4333-8444-555555555555", "creationTimestamp": "2026-01-01T00:00:00Z"},
                "spec": {"platform": "linux", "disabled": false, "capacity": 4},
                "status": {"phase": "online", "instanceSuspect": false, "lastSeenAt": "2026-03-01T11:59:50Z", "runningRuns": 2,
                    "capabilities": {"providers": [{"name": "claude", "version": "2.1.0"}, {"name": "codex"}, {"name": "exec"}],
                        "workspaceFreeBytes": 12884901888u64}}}),
            json!({"apiVersion": "pam.dev/v1", "kind": "Host",
                "metadata": {"name": "beta", "uid": "66666666-7777-4888-9999-aaaaaaaaaaaa", "creationTimestamp": "2026-02-01T00:00:00Z"},
                "spec": {"platform": "darwin", "disabled": true, "capacity": 2},
                "status": {"phase": "registered", "instanceSuspect": true}}),
        ]
    }

    pub fn projects() -> Vec<Value> {
        vec![json!({"apiVersion": "pam.dev/v1", "kind": "Project",
            "metadata": {"name": "web", "uid": "abcdef01-2345-4678-9abc-def012345678", "creationTimestamp": "2025-12-01T00:00:00Z"},
            "spec": {"displayName": "Web", "description": "", "archived": false},
            "status": {"phase": "active"}})]
    }
}

#[cfg(test)]
mod tests {
    use super::samples::*;
    use super::*;

    fn show(
        kind: Kind,
        items: &[Value],
        output: Output,
        single: bool,
        with_project: bool,
    ) -> String {
        let opts = GetOpts {
            with_project,
            ..GetOpts::default()
        };
        get(kind, items, &output, single, &opts, now()).unwrap()
    }

    #[test]
    fn task_tables() {
        insta::assert_snapshot!(show(Kind::Task, &tasks(), Output::Table, false, false), @r"
        NAME        TYPE        STATUS   PARENT      AGE
        release-1   milestone   doing    <none>      2d3h
        build       task        todo     release-1   5m
        ");
        insta::assert_snapshot!(show(Kind::Task, &tasks(), Output::Wide, false, true), @r"
        PROJECT   NAME        TYPE        STATUS   PARENT      AGE    PATH              COMPLETION   ASSIGNEE   TOKENS   COST     BLOCKED-BY
        web       release-1   milestone   doing    <none>      2d3h   release-1         1/2          <none>     <none>   <none>   <none>
        web       build       task        todo     release-1   5m     release-1/build   <none>       ana        <none>   <none>   design,infra
        ");
    }

    #[test]
    fn run_tables() {
        insta::assert_snapshot!(show(Kind::Run, &runs(), Output::Table, false, false), @r"
        NAME      PHASE    ATTEMPT   HOST    PROVIDER   REASON         AGE
        build-1   failed   2         alpha   claude     exit_nonzero   3h
        ");
        insta::assert_snapshot!(show(Kind::Run, &runs(), Output::Wide, false, false), @r"
        NAME      PHASE    ATTEMPT   HOST    PROVIDER   REASON         AGE   SESSION        EXIT   MESSAGE   LAST ACTIVITY   TASK    TOKENS   COST
        build-1   failed   2         alpha   claude     exit_nonzero   3h    pam-5e4d3c2b   1      <none>    <none>          build   1234     $0.0123
        ");
    }

    /// What the agent did last, in `-o wide`; an agent refused tool calls
    /// is the REASON of a run that exited 0, a failure without one of the
    /// seed's reasons is an Error with the provider's words.
    #[test]
    fn a_runs_last_activity_and_refusals_show() {
        let mut run = runs().remove(0);
        run["status"] = serde_json::json!({"phase": "exited", "attempt": 1, "exitCode": 0,
            "lastActivity": {"kind": "tool_call", "tool": "Write", "target": "hello.txt"},
            "conditions": [{"type": "PermissionDenied", "status": "True", "reason": "PermissionDenied",
                "message": "the agent was refused 1 tool call by the run's permissions: Write hello.txt"}]});
        let table = show(
            Kind::Run,
            std::slice::from_ref(&run),
            Output::Wide,
            false,
            false,
        );
        assert!(table.contains("PermissionDenied"), "{table}");
        assert!(table.contains("tool Write hello.txt"), "{table}");
        assert!(
            table.contains("the agent was refused 1 tool call"),
            "{table}"
        );
        run["status"] = serde_json::json!({"phase": "failed", "attempt": 1, "exitCode": 1,
            "message": "API Error: 500 Internal Server Error"});
        let table = show(
            Kind::Run,
            std::slice::from_ref(&run),
            Output::Wide,
            false,
            false,
        );
        let row = table.lines().nth(1).unwrap();
        assert!(
            row.contains(" Error ") && row.contains("API Error: 500"),
            "{table}"
        );
    }

    /// A pending run's REASON is its Scheduled condition's, the
    /// message in `-o wide`.
    #[test]
    fn a_pending_runs_reason_is_why_it_waits() {
        let mut run = runs().remove(0);
        run["status"] = serde_json::json!({"phase": "pending", "attempt": 1, "conditions": [
            {"type": "Applied", "status": "True", "reason": "Applied"},
            {"type": "Scheduled", "status": "False", "reason": "Unschedulable",
             "message": "0/2 hosts can run it: 1 lacks provider claude, 1 cordoned"}]});
        let table = show(
            Kind::Run,
            std::slice::from_ref(&run),
            Output::Wide,
            false,
            false,
        );
        let row = table.lines().nth(1).unwrap();
        assert!(row.contains(" Unschedulable "), "{table}");
        assert!(
            row.contains("0/2 hosts can run it: 1 lacks provider claude, 1 cordoned"),
            "{table}"
        );
    }

    #[test]
    fn host_and_project_tables() {
        insta::assert_snapshot!(show(Kind::Host, &hosts(), Output::Wide, false, false), @r"
        NAME    PHASE        RUNNING   CAPACITY   LAST-SEEN   SUSPECT   PLATFORM   PROVIDERS                 FREE
        alpha   online       2         4          10s         false     linux      claude@2.1.0,codex,exec   12.0Gi
        beta    registered   0         2          <never>     true      darwin     <unreported>              <none>
        ");
        insta::assert_snapshot!(show(Kind::Project, &projects(), Output::Table, false, false), @r"
        NAME   STATUS   AGE
        web    active   90d
        ");
    }

    #[test]
    fn name_output() {
        assert_eq!(
            show(Kind::Task, &tasks(), Output::Name, false, false),
            "task/release-1\ntask/build\n"
        );
        assert_eq!(qualified(Kind::Run, "build-1"), "run.pam.dev/build-1");
    }

    #[test]
    fn json_of_one_object_is_exactly_the_five_keys() {
        let one = &tasks()[1..];
        let text = show(Kind::Task, one, Output::Json, true, false);
        let v: Value = serde_json::from_str(&text).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["apiVersion", "kind", "metadata", "spec", "status"]);
        assert!(!text.contains("dropped by -o json"));
        assert_eq!(v["status"]["phase"], "todo");
    }

    #[test]
    fn json_of_a_list_is_a_list() {
        let text = show(Kind::Run, &runs(), Output::Json, false, false);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["apiVersion"], "pam.dev/v1");
        assert_eq!(v["kind"], "List");
        assert_eq!(v["items"][0]["status"]["sessionName"], "pam-5e4d3c2b");
        assert_eq!(v.as_object().unwrap().len(), 3);
    }

    #[test]
    fn yaml_of_one_object() {
        let text = show(Kind::Project, &projects(), Output::Yaml, true, false);
        insta::with_settings!({filters => vec![
            (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[UID]"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[TIME]"),
        ]}, {
            insta::assert_snapshot!(text, @r"
            apiVersion: pam.dev/v1
            kind: Project
            metadata:
              creationTimestamp: [TIME]
              name: web
              uid: [UID]
            spec:
              archived: false
              description: ''
              displayName: Web
            status:
              phase: active
            ");
        });
    }
}
