//! The payloads of journaled events, one builder per object kind, so every
//! event about an object names it the same way. Payloads are small
//! structured metadata; output text never enters the journal
//! (pam-data-model.txt, "Data Retention").

use pam_manifests::state::RunStatus;
use pam_store::{Host, Project, Run, Source, WorkItem};
use serde_json::{json, Value};

/// Merges `extra`'s keys into `p` (an object).
fn merged(mut p: Value, extra: Value) -> Value {
    if let (Value::Object(p), Value::Object(extra)) = (&mut p, extra) {
        p.extend(extra);
    }
    p
}

/// The payload of a `run.*` event. Every one carries `run_id` and
/// `attempt` (pam-data-model.txt, "Run topic rules"), so a consumer can tell
/// which incarnation of a restarted run it describes, and `max_attempts`,
/// so its message can say "attempt 2 of 3". `extra`'s keys are
/// merged in.
pub fn run(run: &Run, extra: Value) -> Value {
    let mut p = json!({
        "run_id": run.id,
        "attempt": run.attempt,
        "max_attempts": run.max_attempts,
        "name": run.name,
        "project_id": run.project_id,
        "task_id": run.task_id,
        "status": run.status.as_str(),
    });
    if let Some(h) = run.host_id {
        p["host_id"] = json!(h);
    }
    // The event that ends an attempt keeps what that attempt
    // used (the run's status keeps only the current attempt and the
    // total), so the journal holds every attempt's usage.
    let u = run.usage.attempt;
    let ended = matches!(
        run.status,
        RunStatus::Exited | RunStatus::Failed | RunStatus::Stopped
    );
    if ended && u != pam_store::Usage::default() {
        p["usage"] = json!({
            "input_tokens": u.input_tokens,
            "cached_input_tokens": u.cached_input_tokens,
            "output_tokens": u.output_tokens,
            "cost_usd": u.cost_usd(),
        });
    }
    merged(p, extra)
}

/// The payload of a `work_item.*` event.
pub fn work_item(w: &WorkItem, project_slug: &str) -> Value {
    json!({
        "work_item_id": w.id, "project_id": w.project_id, "project": project_slug,
        "name": w.name, "kind": w.kind.as_str(), "status": w.status.as_str(),
        "parent_id": w.parent_id, "path": w.path,
    })
}

/// The payload of a `project.*` event.
pub fn project(p: &Project) -> Value {
    json!({ "project_id": p.id, "project": p.slug, "name": p.name })
}

/// The payload of a `worker.*` event about a host; `extra`'s keys are
/// merged in.
pub fn host(h: &Host, extra: Value) -> Value {
    merged(json!({ "host_id": h.id, "host": h.name }), extra)
}

/// The payload of a `schedule.*` event; `extra`'s keys are merged in.
pub fn schedule(s: &pam_store::Schedule, project_slug: &str, extra: Value) -> Value {
    merged(
        json!({ "schedule_id": s.id, "schedule": s.name, "project": project_slug }),
        extra,
    )
}

/// The payload of a `source.*` event; `extra`'s keys are merged in.
pub fn source(s: &Source, extra: Value) -> Value {
    merged(json!({ "source_id": s.id, "source": s.name }), extra)
}
