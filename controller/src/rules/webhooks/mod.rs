//! Webhook rules: creating, updating and deleting a Webhook,
//! the fan-out that queues a delivery per (webhook, matching event) in
//! the transaction appending the events ([`enqueue`], called by
//! `Ctx::commit` only), and every change of a delivery
//! ([`deliveries`]: an attempt's outcome with its backoff, redelivery).
//!
//! # Guarantees
//! - A committed event matching a webhook has its delivery row: the rows
//!   are inserted before the commit, in the same transaction, from the
//!   webhooks that transaction reads (no cache, so nothing depends on a
//!   cache being fresh; the read is one small query per journaling
//!   commit).
//! - Creating or changing a Webhook takes the journal's append lock
//!   exclusively ([`EventTx::event_high_water`]; appends hold it shared),
//!   so it comes between the commits that append events: every event of
//!   a transaction that appended after the Webhook committed is matched
//!   against it.
//! - The body queued is fixed when queued: every attempt of a delivery
//!   sends the same bytes under the same delivery id (receivers dedupe
//!   on it); only the signature's timestamp changes.

pub mod deliveries;
pub mod egress;
pub mod keys;

use chrono::{DateTime, Utc};
use pam_manifests::kinds;
use pam_store::prelude::*;
use pam_store::{Delivery, DeliveryStatus, Event, Project, StoreResult, Webhook};
use serde_json::{json, Value};
use std::collections::HashMap;
use uuid::Uuid;

use super::meta::{self, Change, Desired};
use crate::events::filter::Filter;

/// How webhooks deliver (`[webhooks]` in pamd's config).
#[derive(Clone)]
pub struct WebhookSettings {
    /// Where signing secrets come from.
    pub keys: std::sync::Arc<dyn keys::SigningKeys>,
    pub retry: deliveries::RetryPolicy,
    /// One attempt's limit (connect, send, answer).
    pub timeout: std::time::Duration,
    /// Prefixes the object links of delivery bodies (pamd's public URL);
    /// empty: links are paths.
    pub link_base: String,
    /// Which addresses deliveries may connect to.
    pub egress: egress::Egress,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            keys: std::sync::Arc::new(keys::KeyFiles::default()),
            retry: deliveries::RetryPolicy::default(),
            timeout: std::time::Duration::from_secs(10),
            link_base: String::new(),
            egress: egress::Egress::default(),
        }
    }
}

/// A Webhook as declared.
#[derive(Debug, Clone)]
pub struct WebhookDesired {
    pub name: String,
    pub desired: Desired,
}

impl WebhookDesired {
    pub fn of(w: &kinds::Webhook, desired: Desired) -> WebhookDesired {
        WebhookDesired {
            name: w.metadata.name.to_string(),
            desired,
        }
    }
}

/// Creates a Webhook: events committed from now on are delivered to it.
pub async fn create(
    tx: &mut dyn Tx,
    d: WebhookDesired,
    now: DateTime<Utc>,
) -> StoreResult<Webhook> {
    tx.event_high_water().await?;
    let row = Webhook {
        id: Uuid::new_v4(),
        name: d.name,
        meta: meta::new_meta(d.desired, now),
        created_at: now,
        updated_at: now,
    };
    tx.insert(&row).await?;
    Ok(row)
}

/// Updates a Webhook's spec, labels and annotations (guarded by its
/// resourceVersion); the same desired state writes nothing. Deliveries
/// already queued keep their body; new events match the new spec.
pub async fn update(
    tx: &mut dyn Tx,
    mut row: Webhook,
    d: WebhookDesired,
    now: DateTime<Utc>,
) -> StoreResult<(Webhook, Change)> {
    let rv = row.meta.resource_version;
    let change = meta::set_desired(&mut row.meta, d.desired, now);
    if !change.changed() {
        return Ok((row, change));
    }
    tx.event_high_water().await?;
    row.updated_at = now;
    let row = tx.update(&row, rv).await?;
    Ok((row, change))
}

/// Deletes a Webhook and its queued deliveries.
pub async fn delete(tx: &mut dyn Tx, id: Uuid) -> StoreResult<bool> {
    tx.delete::<Webhook>(id).await
}

/// A Webhook's stored spec, typed (None when it does not parse: never
/// matched, never sent).
pub fn spec_of(w: &Webhook) -> Option<kinds::WebhookSpec> {
    serde_json::from_value(w.meta.spec.clone()).ok()
}

/// Queues a delivery for every (webhook, event) of this transaction's
/// events that match — the topics through the one event filter
/// ([`Filter`], as the SSE stream's `?topic=`), the projects by uid.
/// Called by `Ctx::commit` before committing, so the rows commit with
/// their events. Returns how many were queued. `link_base` prefixes the
/// object links (`[webhooks] public_url`; empty: a path).
pub async fn enqueue(tx: &mut dyn Tx, now: DateTime<Utc>, link_base: &str) -> StoreResult<usize> {
    if tx.pending_events().is_empty() {
        return Ok(0);
    }
    let targets = tx.webhook_targets().await?;
    if targets.is_empty() {
        return Ok(0);
    }
    let filters: Vec<(Webhook, Filter)> = targets
        .into_iter()
        .filter_map(|(w, project_ids)| {
            let spec = spec_of(&w)?;
            let projects = (!spec.projects.is_empty()).then(|| {
                // By uid: every project-scoped payload carries
                // `project_id`; a named project that does not exist
                // matches nothing.
                project_ids
                    .iter()
                    .map(|id| (String::new(), id.to_string()))
                    .collect()
            });
            Some((w, Filter::of(&spec.topics, projects)))
        })
        .collect();
    let mut matched: Vec<(usize, Event)> = Vec::new();
    for e in tx.pending_events().iter() {
        for (i, (_, f)) in filters.iter().enumerate() {
            if f.keeps(&e) {
                matched.push((i, e.clone()));
            }
        }
    }
    if matched.is_empty() {
        return Ok(0);
    }
    let names = project_names(tx, matched.iter().map(|(_, e)| e)).await?;
    let rows: Vec<Delivery> = matched
        .into_iter()
        .map(|(i, e)| {
            let w = &filters[i].0;
            let id = Uuid::new_v4();
            Delivery {
                id,
                webhook_id: w.id,
                event_seq: e.seq,
                topic: e.topic.clone(),
                payload: body(id, &w.name, &e, &names, link_base),
                status: DeliveryStatus::Pending,
                attempts: 0,
                next_attempt_at: Some(now),
                last_attempt_at: None,
                last_code: None,
                last_error: String::new(),
                created_at: now,
            }
        })
        .collect();
    tx.insert_deliveries(&rows).await?;
    Ok(rows.len())
}

/// The project names of events that carry only a project uid (run
/// events), for their links: one read per distinct project.
async fn project_names<'e>(
    tx: &mut dyn Tx,
    events: impl Iterator<Item = &'e Event>,
) -> StoreResult<HashMap<String, String>> {
    let mut out = HashMap::new();
    for e in events {
        let has_name = e.payload.get("project").is_some();
        let Some(id) = e.payload.get("project_id").and_then(Value::as_str) else {
            continue;
        };
        if has_name || out.contains_key(id) {
            continue;
        }
        let name = match id.parse::<Uuid>() {
            Ok(uid) => tx.get::<Project>(uid).await?.map(|p| p.slug),
            Err(_) => None,
        };
        out.insert(id.to_string(), name.unwrap_or_default());
    }
    Ok(out)
}

/// The thin body of one delivery: which delivery, which event, which
/// object, and where to read it — never the object itself.
fn body(
    id: Uuid,
    webhook: &str,
    e: &Event,
    names: &HashMap<String, String>,
    link_base: &str,
) -> Value {
    let p = &e.payload;
    let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
    let project = s("project").or_else(|| {
        s("project_id")
            .and_then(|id| names.get(&id).cloned())
            .filter(|n| !n.is_empty())
    });
    // A project-scoped object's path: `plural` named `name` in `project`.
    let in_project = |plural: &str, name: &Option<String>| {
        project
            .as_ref()
            .zip(name.as_ref())
            .map(|(p, n)| format!("/api/v1/projects/{p}/{plural}/{n}"))
    };
    let family = e.topic.split('.').next().unwrap_or("");
    let (kind, name, uid, path) = match family {
        "run" => {
            let name = s("name");
            let path = in_project("runs", &name);
            ("Run", name, s("run_id"), path)
        }
        "work_item" => {
            let name = s("name");
            let path = in_project("tasks", &name);
            ("Task", name, s("work_item_id"), path)
        }
        "project" => {
            let path = s("project").map(|p| format!("/api/v1/projects/{p}"));
            ("Project", s("project"), s("project_id"), path)
        }
        "worker" => {
            let path = s("host").map(|h| format!("/api/v1/hosts/{h}"));
            ("Host", s("host"), s("host_id"), path)
        }
        "source" => {
            let path = s("source").map(|n| format!("/api/v1/sources/{n}"));
            ("Source", s("source"), s("source_id"), path)
        }
        _ => ("", None, None, None),
    };
    let mut object = json!({ "kind": kind, "name": name, "uid": uid });
    // A project-scoped object names its project.
    if pam_manifests::Kind::parse(kind).is_some_and(|k| k.is_project_scoped()) {
        object["project"] = json!(project);
    }
    if let Some(a) = p.get("attempt") {
        object["attempt"] = a.clone();
    }
    json!({
        "id": id,
        "webhook": webhook,
        "seq": e.seq,
        "topic": e.topic,
        "createdAt": crate::clock::ts(e.created_at),
        "object": object,
        "link": path.map(|p| format!("{}{p}", link_base.trim_end_matches('/'))),
    })
}
