//! `pamctl describe`: one object, for people — metadata, spec, status,
//! conditions and its recent events.

use chrono::{DateTime, Utc};
use pam_manifests::Kind;
use serde_json::Value;

use super::age;
use super::table::{cell, Table};

fn labels(v: Option<&Value>) -> String {
    match v.and_then(Value::as_object) {
        Some(m) if !m.is_empty() => m
            .iter()
            .map(|(k, v)| {
                format!(
                    "{k}={}",
                    v.as_str().map_or_else(|| v.to_string(), str::to_string)
                )
            })
            .collect::<Vec<_>>()
            .join(","),
        _ => "<none>".into(),
    }
}

fn indented_yaml(v: &Value) -> String {
    let text = super::to_yaml(v);
    text.lines().map(|l| format!("  {l}\n")).collect()
}

/// Whether an event is about the object with this uid (and, for hosts,
/// this name): any top-level payload value equal to it.
pub fn event_is_about(event: &Value, kind: Kind, uid: &str, name: &str) -> bool {
    let Some(payload) = event.get("payload").and_then(Value::as_object) else {
        return false;
    };
    payload.iter().any(|(k, v)| match v.as_str() {
        Some(s) if !uid.is_empty() && s == uid => true,
        Some(s) => kind == Kind::Host && (k == "host" || k == "host_name") && s == name,
        None => false,
    })
}

/// The event topics' family for a kind (`run.` for runs).
pub fn topic_prefix(kind: Kind) -> &'static str {
    kind.info().topics
}

/// What a describe page shows beside the object.
#[derive(Default)]
pub struct EventsAndActivity<'a> {
    /// The object's recent events, oldest first.
    pub events: &'a [Value],
    /// A run's agent's recent activity items, oldest first.
    pub activity: &'a [Value],
}

/// The describe page.
pub fn page(kind: Kind, obj: &Value, related: &EventsAndActivity, now: DateTime<Utc>) -> String {
    let events = related.events;
    let mut out = String::new();
    let mut field = |k: &str, v: String| out.push_str(&format!("{:<18}{v}\n", format!("{k}:")));
    field("Name", cell(obj, "/metadata/name"));
    field("Kind", kind.as_str().to_string());
    if kind.is_project_scoped() {
        field("Project", cell(obj, "/metadata/project"));
    }
    field("Labels", labels(obj.pointer("/metadata/labels")));
    field("Annotations", labels(obj.pointer("/metadata/annotations")));
    field("UID", cell(obj, "/metadata/uid"));
    field("Generation", cell(obj, "/metadata/generation"));
    field("Resource Version", cell(obj, "/metadata/resourceVersion"));
    let created = obj
        .pointer("/metadata/creationTimestamp")
        .and_then(Value::as_str);
    field(
        "Created",
        match created {
            Some(t) => format!("{t} ({} ago)", age::since(Some(t), now)),
            None => "<unknown>".into(),
        },
    );
    // Who set what (metadata.managedFields, oldest
    // first); the last entry is the last applier.
    let managed = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .filter(|m| !m.is_empty());
    if let Some(last) = managed.and_then(|m| m.last()) {
        let at = last.get("time").and_then(Value::as_str);
        field("Last Applied By", cell(last, "/manager"));
        field(
            "Last Applied At",
            format!("{} ({} ago)", cell(last, "/time"), age::since(at, now)),
        );
    }
    if kind == Kind::Task {
        // What it waits for, and what waits for it.
        let names = |p: &str| {
            let v: Vec<&str> = obj
                .pointer(p)
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if v.is_empty() {
                "<none>".to_string()
            } else {
                v.join(", ")
            }
        };
        field("Depends On", names("/spec/dependsOn"));
        field("Waits For", names("/status/blockedBy"));
        field("Waited On By", names("/status/dependents"));
    }
    // What the host can run, as its worker last reported.
    if kind == Kind::Host {
        let (providers, free) = super::table::host_capabilities(obj);
        field("Providers", providers);
        field("Workspace Free", free);
    }
    // What it cost, in one line each.
    if kind == Kind::Run && obj.pointer("/status/usage").is_some() {
        field("Usage", super::usage::line(obj, "/status/usage/total"));
        field(
            "Usage (attempt)",
            super::usage::line(obj, "/status/usage/attempt"),
        );
    } else if matches!(kind, Kind::Task | Kind::Project) && obj.pointer("/status/usage").is_some() {
        field("Usage", super::usage::line(obj, "/status/usage"));
    }
    // What the run's agent may do, and the session a follow-up resumes.
    if kind == Kind::Run {
        if let Some(p) = obj.pointer("/status/permissions") {
            field("Permissions", permissions_line(p));
        }
        if obj.pointer("/status/sessionId").is_some() {
            field("Session", cell(obj, "/status/sessionId"));
        }
    }
    // What the latest attempt's workspace came to
    // (`pamctl result` for the rest, `--patch` for the diff).
    if let Some(r) = obj.pointer("/status/result") {
        let n = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
        let branch = r.get("branch").and_then(Value::as_str).unwrap_or("?");
        field(
            "Result",
            format!(
                "branch {branch}: {} commits, {} files changed, +{} -{} (attempt {})",
                n("commits"),
                n("filesChanged"),
                n("insertions"),
                n("deletions"),
                n("attempt")
            ),
        );
    }
    if let Some(managed) = managed {
        out.push_str("Managed Fields:\n");
        let mut t = Table::new(&["MANAGER", "OPERATION", "TIME", "FIELDS"]);
        for e in managed {
            let fields: Vec<&str> = e
                .get("fields")
                .and_then(Value::as_array)
                .map(|f| f.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            t.row(vec![
                cell(e, "/manager"),
                cell(e, "/operation"),
                cell(e, "/time"),
                fields.join(","),
            ]);
        }
        out.extend(t.render().lines().map(|l| format!("  {l}\n")));
    }
    out.push_str("Spec:\n");
    out.push_str(&indented_yaml(obj.get("spec").unwrap_or(&Value::Null)));
    let mut status = obj
        .get("status")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let conditions = status.remove("conditions");
    // Shown as their own sections.
    status.remove("lastActivity");
    // A Source's owned objects as a tree, not as YAML.
    status.remove("objects");
    status.remove("objectsOmitted");
    out.push_str("Status:\n");
    if status.is_empty() {
        out.push_str("  <none>\n");
    } else {
        out.push_str(&indented_yaml(&Value::Object(status)));
    }
    if let Some(tree) = super::tree::source_objects(obj) {
        out.push_str("Objects:\n");
        out.extend(tree.lines().map(|l| format!("  {l}\n")));
    }
    out.push_str("Conditions:\n");
    match conditions
        .as_ref()
        .and_then(Value::as_array)
        .filter(|c| !c.is_empty())
    {
        None => out.push_str("  <none>\n"),
        Some(conds) => {
            let mut t = Table::new(&["TYPE", "STATUS", "REASON", "MESSAGE", "LAST-TRANSITION"]);
            for c in conds {
                t.row(vec![
                    cell(c, "/type"),
                    cell(c, "/status"),
                    cell(c, "/reason"),
                    cell(c, "/message"),
                    age::since(c.get("lastTransitionTime").and_then(Value::as_str), now),
                ]);
            }
            out.extend(t.render().lines().map(|l| format!("  {l}\n")));
        }
    }
    if kind == Kind::Run {
        out.push_str("Recent Activity:\n");
        out.push_str(&activity_table(related.activity, now));
    }
    out.push_str("Events:\n");
    if events.is_empty() {
        out.push_str("  <none>\n");
    } else {
        // What happened in words, not the payload's JSON.
        let mut t = Table::new(&["SEQ", "AGE", "TYPE", "REASON", "OBJECT", "BY", "MESSAGE"]);
        for e in events {
            let columns = super::events::event_columns(e);
            // The audit trail: the token a request was made with;
            // `-` for what pamd's loops did on their own.
            let by = match e.pointer("/actor/name").and_then(Value::as_str) {
                Some(name) => name.to_string(),
                None => "-".into(),
            };
            t.row(vec![
                cell(e, "/seq"),
                age::since(e.get("createdAt").and_then(Value::as_str), now),
                columns.topic,
                columns.reason,
                columns.object,
                by,
                columns.message,
            ]);
        }
        out.extend(t.render().lines().map(|l| format!("  {l}\n")));
    }
    out
}

/// `edits (from project), allow WebFetch, deny Bash(rm:*)`.
fn permissions_line(p: &Value) -> String {
    let list = |k: &str| {
        p.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .filter(|s| !s.is_empty())
    };
    let mut line = format!("{} (from {})", cell(p, "/mode"), cell(p, "/from"));
    if let Some(a) = list("allowTools") {
        line.push_str(&format!(", allow {a}"));
    }
    if let Some(d) = list("denyTools") {
        line.push_str(&format!(", deny {d}"));
    }
    line
}

/// The agent's recent steps, one line each: when, what kind, what.
fn activity_table(items: &[Value], now: DateTime<Utc>) -> String {
    if items.is_empty() {
        return "  <none>\n".into();
    }
    let mut t = Table::new(&["AGE", "TYPE", "WHAT"]);
    for v in items {
        let Ok(e) = serde_json::from_value::<pam_manifests::protocol::Entry>(v.clone()) else {
            continue;
        };
        t.row(vec![
            age::since(e.at.as_deref(), now),
            e.kind.as_str().replace('_', " "),
            pam_manifests::protocol::one_line(&e.describe(), 120),
        ]);
    }
    t.render().lines().map(|l| format!("  {l}\n")).collect()
}

#[cfg(test)]
mod tests {
    use super::super::samples::*;
    use super::*;
    use serde_json::json;

    #[test]
    fn a_task_page() {
        let task = &tasks()[1];
        let events = vec![
            json!({"seq": 7, "topic": "work_item.created", "createdAt": "2026-03-01T11:55:00Z",
            "reason": "Created", "object": "task/build", "actor": {"name": "ci", "role": "operator"},
            "message": "task build created in project web (todo)",
            "payload": {"work_item_id": "9f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9", "name": "build"}}),
        ];
        insta::with_settings!({filters => vec![
            (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "[UID]"),
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "[TIME]"),
        ]}, {
            insta::assert_snapshot!(page(Kind::Task, task, &EventsAndActivity { events: &events, activity: &[] }, now()), @r#"
            Name:             build
            Kind:             Task
            Project:          web
            Labels:           <none>
            Annotations:      <none>
            UID:              [UID]
            Generation:       3
            Resource Version: 42
            Created:          [TIME] (5m ago)
            Depends On:       <none>
            Waits For:        design, infra
            Waited On By:     <none>
            Spec:
              assignee: ana
              description: ''
              parent: release-1
              sortOrder: 1
              status: todo
              title: Build it
              type: task
            Status:
              blockedBy:
              - design
              - infra
              observedGeneration: 3
              path: release-1/build
              phase: todo
            Conditions:
              TYPE    STATUS   REASON       MESSAGE   LAST-TRANSITION
              Ready   True     Reconciled   <none>    4m
            Events:
              SEQ   AGE   TYPE                REASON    OBJECT       BY   MESSAGE
              7     5m    work_item.created   Created   task/build   ci   task build created in project web (todo)
            "#);
        });
    }

    #[test]
    fn a_run_page_says_its_permissions_session_and_what_its_agent_did() {
        let mut run = runs()[0].clone();
        run["status"]["phase"] = json!("exited");
        run["status"]["permissions"] =
            json!({"mode": "edits", "allowTools": ["WebFetch"], "from": "project"});
        run["status"]["sessionId"] = json!("50938134-7da5");
        run["status"]["lastActivity"] = json!({"kind": "message", "text": "Created hello.txt."});
        let activity = vec![
            json!({"kind": "tool_call", "tool": "Write", "target": "hello.txt", "at": "2026-03-01T11:58:00Z"}),
            json!({"kind": "denied", "tool": "Bash", "target": "rm -rf build", "at": "2026-03-01T11:59:00Z"}),
            json!({"kind": "retry", "text": "retrying the API call, attempt 1 of 10: 529 overloaded", "at": "2026-03-01T11:59:30Z"}),
        ];
        let text = page(
            Kind::Run,
            &run,
            &EventsAndActivity {
                events: &[],
                activity: &activity,
            },
            now(),
        );
        assert!(
            text.contains("Permissions:      edits (from project), allow WebFetch\n"),
            "{text}"
        );
        assert!(text.contains("Session:          50938134-7da5\n"), "{text}");
        assert!(
            !text.contains("lastActivity"),
            "shown as Recent Activity, not as YAML: {text}"
        );
        let recent = text.split("Recent Activity:\n").nth(1).unwrap();
        let lines: Vec<&str> = recent.lines().take(4).map(str::trim_end).collect();
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["AGE", "TYPE", "WHAT"]
        );
        assert!(
            lines[1].contains("tool call") && lines[1].ends_with("tool Write hello.txt"),
            "{lines:?}"
        );
        assert!(lines[2].ends_with("denied Bash rm -rf build"), "{lines:?}");
        assert!(
            lines[3].ends_with("retrying: retrying the API call, attempt 1 of 10: 529 overloaded"),
            "{lines:?}"
        );
        let empty = page(Kind::Run, &runs()[0], &EventsAndActivity::default(), now());
        assert!(empty.contains("Recent Activity:\n  <none>\n"), "{empty}");
    }

    #[test]
    fn events_match_by_uid_or_host_name() {
        let e = json!({"payload": {"run_id": "u-1", "attempt": 2}});
        assert!(event_is_about(&e, Kind::Run, "u-1", "r"));
        assert!(!event_is_about(&e, Kind::Run, "u-2", "r"));
        let h = json!({"payload": {"host": "alpha", "run_id": "u-1"}});
        assert!(event_is_about(&h, Kind::Host, "h-1", "alpha"));
        assert!(!event_is_about(&h, Kind::Run, "u-9", "alpha"));
    }
}
