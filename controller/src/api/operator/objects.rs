//! Store rows → manifest objects as printed: `{apiVersion, kind, metadata,
//! spec, status}`. The spec is rebuilt from the columns (the source of
//! truth), with the last applied spec filling what has no column; the
//! status is what the controller observed.

use std::collections::HashMap;

use pam_manifests::kinds::{self, ApiVersion, Completion, Condition};
use pam_manifests::names::Name;
use pam_manifests::state::WorkItemStatus;
use pam_store::{self as store, Meta, Target};
use serde_json::Value;
use uuid::Uuid;

use crate::api::operator::lookup::TaskDeps;
use crate::clock::ts;
use crate::rules::meta::manifest_labels as to_manifest_labels;
use crate::rules::runs::{activity, env, gate, placement, usage};
use pam_manifests::conditions;

fn name(s: &str) -> Name {
    // Names in the store came through Name::parse (apply) or were made by
    // pam (worker registration validates too); fall back defensively.
    Name::parse(s).unwrap_or_else(|_| Name::parse("invalid-name").expect("valid"))
}

fn conditions(meta: &Meta) -> Vec<Condition> {
    serde_json::from_value(meta.conditions.clone()).unwrap_or_default()
}

fn annotations(meta: &Meta) -> pam_manifests::names::Annotations {
    meta.annotations
        .iter()
        .filter_map(|(k, v)| Some((pam_manifests::LabelKey::parse(k).ok()?, v.clone())))
        .collect()
}

macro_rules! object_meta {
    ($ty:ident, $meta:expr, $name:expr, $uid:expr, $created:expr $(, $project:expr)?) => {
        kinds::$ty {
            name: name($name),
            $(project: name($project),)?
            labels: to_manifest_labels(&$meta.labels),
            annotations: annotations($meta),
            uid: Some($uid),
            generation: Some($meta.generation),
            resource_version: Some($meta.resource_version.to_string()),
            creation_timestamp: Some(ts($created)),
            managed_fields: None,
        }
    };
}

/// The metadata of an object of a project-scoped kind.
fn project_meta(
    meta: &Meta,
    name: &str,
    id: Uuid,
    created: chrono::DateTime<chrono::Utc>,
    project_slug: &str,
) -> kinds::ProjectObjectMeta {
    object_meta!(ProjectObjectMeta, meta, name, id, created, project_slug)
}

/// An object whose stored spec no longer types (it was written through
/// apply, so it should): its name (in `project`) and the spec as stored.
fn as_stored(kind: &str, name: &str, project: Option<&str>, meta: &Meta) -> Value {
    let mut metadata = serde_json::json!({ "name": name });
    if let Some(p) = project {
        metadata["project"] = p.into();
    }
    serde_json::json!({"apiVersion": "pam.dev/v1", "kind": kind, "metadata": metadata, "spec": meta.spec})
}

/// A project as the API shows it; `source`: the Source that owns it
/// ([`crate::api::operator::lookup::project_owners`]).
/// `usage`: its runs' roll-up ([`store::RunTx::usage_by_project`]).
pub fn project(
    p: &store::Project,
    source: Option<String>,
    usage: Option<&store::Usage>,
) -> kinds::Project {
    kinds::Project {
        api_version: ApiVersion::V1,
        kind: kinds::ProjectKind::Project,
        metadata: object_meta!(ObjectMeta, &p.meta, &p.slug, p.id, p.created_at),
        spec: kinds::ProjectSpec {
            display_name: Some(p.name.clone()),
            description: p.description.clone(),
            archived: p.status == pam_manifests::state::ProjectStatus::Archived,
            budget: usage::budget_of(&p.meta),
            repository: spec_field(&p.meta, "repository"),
            permissions: spec_field(&p.meta, "permissions"),
        },
        status: Some(Box::new(kinds::ObservedProject {
            phase: p.status,
            source,
            usage: usage.filter(|u| !u.is_zero()).map(usage_figures),
            observed_generation: Some(p.meta.observed_generation),
            conditions: conditions(&p.meta),
        })),
    }
}

/// Children completion per parent id: (done, total non-cancelled).
pub fn completions(items: &[store::WorkItem]) -> HashMap<Uuid, Completion> {
    let mut m: HashMap<Uuid, Completion> = HashMap::new();
    for w in items {
        let Some(parent) = w.parent_id else { continue };
        let c = m.entry(parent).or_insert(Completion { done: 0, total: 0 });
        if w.status != WorkItemStatus::Cancelled {
            c.total += 1;
        }
        if w.status == WorkItemStatus::Done {
            c.done += 1;
        }
    }
    m
}

pub fn task(
    w: &store::WorkItem,
    project_slug: &str,
    parent_name: Option<&str>,
    completion: Option<Completion>,
    deps: Option<&TaskDeps>,
    usage: Option<&store::Usage>,
) -> kinds::Task {
    // spec.status is the desired status last applied (or set by a verb);
    // status.phase is the stored one (a cascade may have moved it).
    let desired = w
        .meta
        .spec
        .get("status")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(w.status);
    kinds::Task {
        api_version: ApiVersion::V1,
        kind: kinds::TaskKind::Task,
        metadata: project_meta(&w.meta, &w.name, w.id, w.created_at, project_slug),
        spec: kinds::TaskSpec {
            type_: w.kind,
            title: w.title.clone(),
            description: w.description.clone(),
            parent: parent_name.map(name),
            depends_on: w
                .meta
                .spec
                .get("dependsOn")
                .and_then(|d| serde_json::from_value(d.clone()).ok())
                .unwrap_or_default(),
            status: desired,
            assignee: w.assignee.clone(),
            sort_order: w.sort_order,
            workspace: spec_field(&w.meta, "workspace"),
            permissions: spec_field(&w.meta, "permissions"),
        },
        status: Some(Box::new(kinds::ObservedTask {
            phase: w.status,
            path: Some(w.path.clone()),
            completion,
            blocked_by: deps
                .map_or_else(Vec::new, |d| d.blocked_by.iter().map(|n| name(n)).collect()),
            dependents: deps
                .map_or_else(Vec::new, |d| d.dependents.iter().map(|n| name(n)).collect()),
            usage: usage.filter(|u| !u.is_zero()).map(usage_figures),
            observed_generation: Some(w.meta.observed_generation),
            conditions: conditions(&w.meta),
        })),
    }
}

/// A run; `waiting_for`: the tasks its task depends on that are not done
/// (a pending run shows them in its Blocked condition).
/// A pending run's wait derived when read: condition `cond` true (its
/// reason the condition's own name) and Scheduled false for `scheduled`.
fn waiting(
    m: &mut Meta,
    (cond, scheduled): (&str, &str),
    why: &str,
    at: chrono::DateTime<chrono::Utc>,
) {
    crate::rules::meta::set_condition(m, cond, true, cond, why, at);
    placement::derived(m, scheduled, why, at);
}

pub fn run(
    r: &store::Run,
    project_slug: &str,
    task_name: &str,
    host_name: Option<&str>,
    waiting_for: &[String],
    project_over_budget: Option<&str>,
    secret_wait: Option<&str>,
) -> kinds::Run {
    let mut meta = if r.status == pam_manifests::state::RunStatus::Pending {
        let mut m = gate::with_blocked_condition(&r.meta, waiting_for, r.pending_since);
        // A wait derived here is also why it is not scheduled
        // (the one condition `get runs` shows as REASON).
        if !waiting_for.is_empty() {
            placement::derived(
                &mut m,
                conditions::SCHEDULED_BLOCKED_BY_DEPENDENCIES,
                &format!("waiting for tasks: {}", waiting_for.join(", ")),
                r.pending_since,
            );
        }
        // A pending run of a project over its budget waits for
        // the budget to be raised; derived when read, like Blocked.
        if let Some(why) = project_over_budget {
            waiting(
                &mut m,
                (
                    usage::BUDGET_EXCEEDED,
                    conditions::SCHEDULED_BUDGET_EXCEEDED,
                ),
                why,
                r.pending_since,
            );
        }
        // Waiting for a Secret or key (a loop pass keeps the
        // wait; the condition is derived from it when read).
        if let Some(why) = secret_wait {
            waiting(
                &mut m,
                (env::SECRET_MISSING, conditions::SCHEDULED_SECRET_MISSING),
                why,
                r.pending_since,
            );
        }
        m
    } else {
        r.meta.clone()
    };
    if let Some(d) = &r.denials {
        activity::with_denied_condition(&mut meta, d);
    }
    let (env, env_from) = env::env_of(&r.meta.spec);
    let spec_command = r
        .meta
        .spec
        .get("command")
        .and_then(|c| serde_json::from_value(c.clone()).ok());
    let provider =
        serde_json::from_value(Value::String(r.provider.clone())).unwrap_or(kinds::Provider::Exec);
    kinds::Run {
        api_version: ApiVersion::V1,
        kind: kinds::RunKind::Run,
        metadata: project_meta(&r.meta, &r.name, r.id, r.created_at, project_slug),
        spec: kinds::RunSpec {
            task: name(task_name),
            provider,
            provider_version: pam_store::dispatch::provider_version(r).map(str::to_string),
            prompt: r.prompt.clone(),
            cwd: r.cwd.clone(),
            workspace: spec_field(&r.meta, "workspace"),
            target: match &r.target {
                Target::Any => None,
                Target::Host(h) => Some(kinds::Target::Host(name(h))),
                Target::Selector(s) => Some(kinds::Target::Selector(to_manifest_labels(s))),
            },
            restart_policy: kinds::RestartPolicy {
                max_attempts: std::num::NonZeroU32::new(r.max_attempts.max(1) as u32)
                    .unwrap_or(std::num::NonZeroU32::MIN),
                backoff_seconds: r.backoff_seconds.max(0) as u32,
                backoff_max_seconds: r.backoff_max_seconds.max(0) as u32,
            },
            dispatch_timeout_seconds: r
                .dispatch_timeout_seconds
                .and_then(|s| std::num::NonZeroU32::new(s.max(0) as u32)),
            stopped: r.stop_requested,
            command: spec_command,
            budget: usage::budget_of(&r.meta),
            env,
            env_from,
            permissions: spec_field(&r.meta, "permissions"),
        },
        status: Some(Box::new(kinds::ObservedRun {
            phase: r.status,
            attempt: r.attempt.max(0) as u32,
            host: host_name.map(str::to_string),
            session_name: Some(r.session_name.clone()),
            exit_code: r.exit_code,
            failure_reason: r.failure_reason,
            message: r.failure_message.clone(),
            started_at: r.started_at.map(ts),
            finished_at: r.finished_at.map(ts),
            pending_since: Some(ts(r.pending_since)),
            usage: (!r.usage.total.is_zero()).then(|| kinds::RunUsageStatus {
                attempt: usage_figures(&r.usage.attempt),
                total: usage_figures(&r.usage.total),
            }),
            permissions: r.permissions.clone(),
            session_id: r.session_id.clone(),
            last_activity: r.last_activity.clone(),
            result: None,
            stopped_by: r
                .stopped_by
                .as_ref()
                .and_then(|a| serde_json::from_value(a.clone()).ok()),
            observed_generation: Some(r.meta.observed_generation),
            conditions: conditions(&meta),
        })),
    }
}

/// A field of the declared spec (a workspace's `repository`, `workspace`):
/// the stored spec is the manifest's, so it reads back as declared.
fn spec_field<T: serde::de::DeserializeOwned>(meta: &Meta, field: &str) -> Option<T> {
    meta.spec
        .get(field)
        .and_then(|v| serde_json::from_value(v.clone()).ok())
}

/// The message of a project's True `BudgetExceeded` condition.
pub fn budget_message(meta: &Meta) -> Option<String> {
    if !store::projects::over_budget(meta) {
        return None;
    }
    conditions(meta)
        .into_iter()
        .find(|c| c.type_ == usage::BUDGET_EXCEEDED)
        .and_then(|c| c.message)
}

/// Stored usage as status figures.
pub fn usage_figures(u: &store::Usage) -> kinds::UsageFigures {
    let n = |v: i64| v.max(0) as u64;
    kinds::UsageFigures {
        input_tokens: n(u.input_tokens),
        cached_input_tokens: n(u.cached_input_tokens),
        output_tokens: n(u.output_tokens),
        cost_usd: u.cost_usd(),
    }
}

pub fn host(h: &store::Host, running: u32) -> kinds::Host {
    kinds::Host {
        api_version: ApiVersion::V1,
        kind: kinds::HostKind::Host,
        metadata: object_meta!(ObjectMeta, &h.meta, &h.name, h.id, h.created_at),
        spec: kinds::HostSpec {
            platform: h.platform,
            disabled: h.disabled,
            labels: to_manifest_labels(&h.dispatch_labels),
            capacity: h.capacity.max(0) as u32,
        },
        status: Some(Box::new(kinds::ObservedHost {
            phase: h.status,
            instance_suspect: h.instance_suspect,
            instance_flagged_at: h.instance_flagged_at.map(ts),
            last_seen_at: h.last_seen_at.map(ts),
            running_runs: running,
            labels: h.labels().into_iter().collect(),
            capabilities: h.capabilities.clone(),
            observed_generation: Some(h.meta.observed_generation),
            conditions: conditions(&h.meta),
        })),
    }
}

/// A Source as printed: its spec as applied, and the sync loop's status
/// (`inventory`: how many objects it owns).
/// `objects`: each owned object's state and how many were left out
/// (a get of one Source).
pub fn source(
    s: &store::Source,
    inventory: usize,
    objects: Option<(Vec<kinds::OwnedState>, usize)>,
) -> Value {
    let spec: kinds::SourceSpec = match serde_json::from_value(s.meta.spec.clone()) {
        Ok(spec) => spec,
        // Written through apply, so it types; print what is stored if not.
        Err(_) => return as_stored("Source", &s.name, None, &s.meta),
    };
    let st = &s.status;
    let obj = kinds::Source {
        api_version: ApiVersion::V1,
        kind: kinds::SourceKind::Source,
        metadata: object_meta!(ObjectMeta, &s.meta, &s.name, s.id, s.created_at),
        spec,
        status: Some(Box::new(kinds::ObservedSource {
            revision: st.revision.clone(),
            attempted_revision: st.attempted_revision.clone(),
            last_synced_at: st.last_synced_at.map(ts),
            last_attempt_at: st.last_attempt_at.map(ts),
            sync_requested_at: st.sync_requested_at.map(ts),
            sync: st.sync,
            sync_message: st.sync_message.clone(),
            health: st.health,
            health_message: st.health_message.clone(),
            errors: serde_json::from_value(st.errors.clone()).unwrap_or_default(),
            drift: serde_json::from_value(st.drift.clone()).unwrap_or_default(),
            inventory: inventory as u32,
            objects_omitted: objects
                .as_ref()
                .and_then(|(_, n)| (*n > 0).then(|| u32::try_from(*n).unwrap_or(u32::MAX))),
            objects: objects.map(|(o, _)| o).unwrap_or_default(),
            observed_generation: Some(s.meta.observed_generation),
            conditions: conditions(&s.meta),
        })),
    };
    serde_json::to_value(obj).expect("a Source is JSON")
}

/// A Webhook as printed: its spec as applied, and how its
/// deliveries stand (`counts`: pending and failed).
pub fn webhook(w: &store::Webhook, counts: (u64, u64)) -> Value {
    let Some(spec) = crate::rules::webhooks::spec_of(w) else {
        return as_stored("Webhook", &w.name, None, &w.meta);
    };
    let obj = kinds::Webhook {
        api_version: ApiVersion::V1,
        kind: kinds::WebhookKind::Webhook,
        metadata: object_meta!(ObjectMeta, &w.meta, &w.name, w.id, w.created_at),
        spec,
        status: Some(Box::new(kinds::ObservedWebhook {
            pending: counts.0,
            failed: counts.1,
            observed_generation: Some(w.meta.observed_generation),
            conditions: conditions(&w.meta),
        })),
    };
    serde_json::to_value(obj).expect("a Webhook is JSON")
}

/// An object of a generically stored kind as printed: its
/// metadata, the spec as applied and the status observed (its
/// `observedGeneration` and conditions with what the row's status holds);
/// `project` is the one a project-scoped kind's object lives in. The
/// caller reads it back through the kind's type.
pub fn generic(o: &store::Object, project: Option<&store::Project>) -> Value {
    let metadata = match project {
        Some(p) => serde_json::to_value(object_meta!(
            ProjectObjectMeta,
            &o.meta,
            &o.name,
            o.id,
            o.created_at,
            &p.slug
        )),
        None => serde_json::to_value(object_meta!(
            ObjectMeta,
            &o.meta,
            &o.name,
            o.id,
            o.created_at
        )),
    }
    .expect("metadata is JSON");
    let mut status = o.status.as_object().cloned().unwrap_or_default();
    status.insert(
        "observedGeneration".into(),
        o.meta.observed_generation.into(),
    );
    let conditions = conditions(&o.meta);
    if !conditions.is_empty() {
        let conditions = serde_json::to_value(conditions).expect("conditions are JSON");
        status.insert("conditions".into(), conditions);
    }
    serde_json::json!({
        "apiVersion": pam_manifests::kinds::API_VERSION,
        "kind": o.kind,
        "metadata": metadata,
        "spec": o.meta.spec,
        "status": status,
    })
}

/// A delivery as the API shows it (`pamctl get webhookdeliveries`).
pub fn delivery(d: &store::Delivery, webhook: &str) -> Value {
    serde_json::json!({
        "id": d.id,
        "webhook": webhook,
        "seq": d.event_seq,
        "topic": d.topic,
        "status": d.status.as_str(),
        "attempts": d.attempts,
        "nextAttemptAt": d.next_attempt_at.map(ts),
        "lastAttemptAt": d.last_attempt_at.map(ts),
        "lastCode": d.last_code,
        "lastError": d.last_error,
        "createdAt": ts(d.created_at),
        "payload": d.payload,
    })
}

/// A Secret as printed: its keys with sizes and digests in
/// `status.keys`, never a value (`spec` prints empty).
pub fn secret(s: &store::Secret, project_slug: &str) -> Value {
    let keys = s
        .meta
        .spec
        .get("keys")
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .map(|(k, v)| kinds::SecretKeyStatus {
                    name: k.clone(),
                    size: v.get("size").and_then(Value::as_u64).unwrap_or(0),
                    digest: v
                        .get("digest")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let obj = kinds::Secret {
        api_version: ApiVersion::V1,
        kind: kinds::SecretKind::Secret,
        metadata: project_meta(&s.meta, &s.name, s.id, s.created_at, project_slug),
        spec: kinds::SecretSpec::default(),
        status: Some(Box::new(kinds::ObservedSecret {
            keys,
            key_id: Some(s.key_id.clone()),
            observed_generation: Some(s.meta.observed_generation),
            conditions: conditions(&s.meta),
        })),
    };
    serde_json::to_value(obj).expect("a Secret is JSON")
}

/// A Schedule as printed: its spec as applied and its status
/// (`runs`: its runs with their ticks, oldest first).
pub fn schedule(
    s: &store::Schedule,
    project_slug: &str,
    runs: &[(chrono::DateTime<chrono::Utc>, store::Run)],
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    let Some(spec) = crate::rules::schedules::spec_of(s) else {
        return as_stored("Schedule", &s.name, Some(project_slug), &s.meta);
    };
    let obj = kinds::Schedule {
        api_version: ApiVersion::V1,
        kind: kinds::ScheduleKind::Schedule,
        metadata: project_meta(&s.meta, &s.name, s.id, s.created_at, project_slug),
        spec,
        status: Some(Box::new(crate::rules::schedules::status(s, runs, now))),
    };
    serde_json::to_value(obj).expect("a Schedule is JSON")
}
