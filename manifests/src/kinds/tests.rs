use super::*;

#[test]
fn kind_aliases() {
    for (text, kind) in [
        ("project", Kind::Project),
        ("projects", Kind::Project),
        ("proj", Kind::Project),
        ("Project", Kind::Project),
        ("task", Kind::Task),
        ("tasks", Kind::Task),
        ("tk", Kind::Task),
        ("Task", Kind::Task),
        ("run", Kind::Run),
        ("runs", Kind::Run),
        ("rn", Kind::Run),
        ("host", Kind::Host),
        ("hosts", Kind::Host),
        ("ho", Kind::Host),
        ("HOSTS", Kind::Host),
    ] {
        assert_eq!(Kind::parse_alias(text), Some(kind), "{text}");
    }
    assert_eq!(Kind::parse_alias("pod"), None);
    assert_eq!(Kind::parse("task"), None, "kind: is case-sensitive");
}

#[test]
fn output_round_trips_with_status() {
    let run = serde_json::json!({
        "apiVersion": "pam.dev/v1",
        "kind": "Run",
        "metadata": {"name": "r1", "project": "web", "uid": "6f1c2b1e-8d7a-4a57-9a3c-0d1f2e3a4b5c",
                      "generation": 2, "resourceVersion": "7", "creationTimestamp": "2026-01-02T03:04:05Z"},
        "spec": {"task": "build", "provider": "claude", "prompt": "p", "cwd": "/src",
                 "target": {"selector": {"gpu": "true"}},
                 "restartPolicy": {"maxAttempts": 3, "backoffSeconds": 10, "backoffMaxSeconds": 300}},
        "status": {"phase": "failed", "attempt": 2, "host": "mac-1", "sessionName": "pam-6f1c2b1e",
                   "exitCode": 1, "failureReason": "host_lost", "observedGeneration": 2,
                   "conditions": [{"type": "Dispatched", "status": "True"}]}
    });
    let m = Manifest::from_json(run.clone()).unwrap();
    assert_eq!(m.kind(), Kind::Run);
    assert!(m.has_status());
    assert_eq!(serde_json::to_value(&m).unwrap(), run);
    let again: Manifest = serde_json::from_value(run).unwrap();
    assert_eq!(again, m);
}

#[test]
fn defaults_are_applied_and_printed() {
    let t: Task = serde_json::from_value(serde_json::json!({
        "apiVersion": "pam.dev/v1", "kind": "Task",
        "metadata": {"name": "a", "project": "web"},
        "spec": {"title": "A"}
    }))
    .unwrap();
    assert_eq!(t.spec.type_, WorkItemKind::Task);
    assert_eq!(t.spec.status, WorkItemStatus::Todo);
    assert_eq!(
        serde_json::to_value(&t.spec).unwrap(),
        serde_json::json!({"type": "task", "title": "A", "description": "", "status": "todo", "sortOrder": 0})
    );
    assert_eq!(RestartPolicy::default().max_attempts.get(), 1);
}
