//! Desired state and its bookkeeping, for every kind: the generation rule
//! and conditions.
//!
//! A stored object keeps the desired state an operator last declared
//! ([`Desired`]: spec, labels, annotations) in its [`Meta`], next to
//! `generation` (bumps on a spec change only), `observedGeneration` (the
//! generation the controller has acted on) and `conditions`. The rule
//! "a spec change bumps generation once and observedGeneration and the
//! Applied condition follow" lives here and only here
//! ([`set_desired`]); apply, the verbs (stop, host disable/enable, task
//! transitions) and the dashboard reach it through the aggregate rules.

use chrono::{DateTime, Utc};
use pam_manifests::kinds::Manifest;
use pam_store::{Labels, Meta, NamedKind, NamedTx, StoreResult, Tx};
use serde_json::{json, Value};

use crate::clock::ts;

/// The condition that says the current generation's spec was accepted.
pub use pam_manifests::conditions::APPLIED;

/// What an operator declares about an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub spec: Value,
    pub labels: Labels,
    pub annotations: Labels,
}

impl Desired {
    /// The desired state a manifest declares.
    pub fn of(m: &Manifest) -> Desired {
        Desired {
            spec: m.spec_json(),
            labels: store_labels(m.labels()),
            annotations: m
                .annotations()
                .iter()
                .map(|(k, v)| (k.as_str().to_string(), v.clone()))
                .collect(),
        }
    }

    /// What `meta` holds now.
    pub fn stored(meta: &Meta) -> Desired {
        Desired {
            spec: meta.spec.clone(),
            labels: meta.labels.clone(),
            annotations: meta.annotations.clone(),
        }
    }

    /// This desired state with one top-level spec field set (a verb's
    /// patch, as `kubectl scale` writes the spec).
    pub fn with_spec_field(mut self, field: &str, value: Value) -> Desired {
        match self.spec.as_object_mut() {
            Some(o) => {
                o.insert(field.to_string(), value);
            }
            None => self.spec = json!({ field: value }),
        }
        self
    }
}

/// What a new desired state changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Nothing: no write, no new generation, no event.
    Unchanged,
    /// Labels or annotations only: written, same generation.
    Metadata,
    /// The spec: a new generation.
    Spec,
}

impl Change {
    pub fn changed(self) -> bool {
        self != Change::Unchanged
    }
}

/// The meta of a new object: generation 1, observed and applied.
pub fn new_meta(d: Desired, now: DateTime<Utc>) -> Meta {
    new_meta_with(d, created_conditions(now))
}

/// The conditions of an object created at `now` (generation 1 applied),
/// for [`new_meta_with`]: a batch of creations builds them once.
pub fn created_conditions(now: DateTime<Utc>) -> Value {
    let mut meta = Meta {
        generation: 1,
        ..Meta::default()
    };
    applied(&mut meta, now);
    meta.conditions
}

/// [`new_meta`] with conditions built by [`created_conditions`].
pub fn new_meta_with(d: Desired, conditions: Value) -> Meta {
    Meta {
        spec: d.spec,
        labels: d.labels,
        annotations: d.annotations,
        generation: 1,
        observed_generation: 1,
        conditions,
        ..Meta::default()
    }
}

/// Sets the desired state of a stored object. A spec change bumps
/// `generation` once and `observedGeneration` follows with the `Applied`
/// condition (the controller acts on a spec in the write that accepts it);
/// a labels/annotations change keeps the generation; the same desired
/// state changes nothing. The caller writes `meta` with the row.
pub fn set_desired(meta: &mut Meta, d: Desired, now: DateTime<Utc>) -> Change {
    let spec_changed = meta.spec != d.spec;
    let meta_changed = meta.labels != d.labels || meta.annotations != d.annotations;
    if !spec_changed && !meta_changed {
        return Change::Unchanged;
    }
    meta.spec = d.spec;
    meta.labels = d.labels;
    meta.annotations = d.annotations;
    if !spec_changed {
        return Change::Metadata;
    }
    meta.generation += 1;
    meta.observed_generation = meta.generation;
    applied(meta, now);
    Change::Spec
}

fn applied(meta: &mut Meta, now: DateTime<Utc>) {
    let message = format!("generation {} applied", meta.generation);
    set_condition(meta, APPLIED, true, "Reconciled", &message, now);
}

/// Sets a condition (`[{type, status, reason, message,
/// lastTransitionTime}]`, Kubernetes-style): replaces the one of that type
/// or adds it; `lastTransitionTime` moves only when the status flips.
pub fn set_condition(
    meta: &mut Meta,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) {
    let status_text = if status { "True" } else { "False" };
    let conditions = match meta.conditions.as_array_mut() {
        Some(c) => c,
        None => {
            meta.conditions = json!([]);
            meta.conditions.as_array_mut().expect("an array")
        }
    };
    let since = conditions
        .iter()
        .find(|c| c["type"] == type_ && c["status"] == status_text)
        .and_then(|c| c["lastTransitionTime"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| ts(now));
    let cond = json!({
        "type": type_, "status": status_text, "reason": reason,
        "message": message, "lastTransitionTime": since,
    });
    match conditions.iter_mut().find(|c| c["type"] == type_) {
        Some(c) => *c = cond,
        None => conditions.push(cond),
    }
}

/// Whether the object carries a condition of this type (any status).
pub fn has_condition(meta: &Meta, type_: &str) -> bool {
    meta.conditions
        .as_array()
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == type_))
}

/// Manifest labels as the store keeps them.
pub fn store_labels(l: &pam_manifests::Labels) -> Labels {
    l.iter()
        .map(|(k, v)| (k.as_str().to_string(), v.as_str().to_string()))
        .collect()
}

/// Stored labels as manifest labels (what selectors match); a stored pair
/// that is not a valid label (written before validation existed) is left
/// out.
pub fn manifest_labels(l: &Labels) -> pam_manifests::Labels {
    l.iter()
        .filter_map(|(k, v)| {
            Some((
                pam_manifests::LabelKey::parse(k).ok()?,
                pam_manifests::LabelValue::parse(v).ok()?,
            ))
        })
        .collect()
}

/// The spec write the rules of the kinds with a table of their own share:
/// `d` set on the stored `row`'s metadata ([`set_desired`]); when that
/// changed anything, `also` (the kind's own columns and conditions) and
/// `updated_at = now`, and the row written at the version it was read at
/// (a `Conflict` when another write came between). The same desired state
/// writes nothing.
pub async fn write_desired<K: NamedKind>(
    tx: &mut dyn Tx,
    mut row: K,
    d: Desired,
    now: DateTime<Utc>,
    also: impl FnOnce(&mut K) + Send,
) -> StoreResult<(K, Change)>
where
    for<'t> dyn Tx + 't: NamedTx<K>,
{
    let rv = row.meta().resource_version;
    let change = set_desired(row.meta_mut(), d, now);
    if !change.changed() {
        return Ok((row, change));
    }
    also(&mut row);
    *row.updated_at_mut() = now;
    Ok((tx.update(&row, rv).await?, change))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    fn desired(spec: Value, label: &str) -> Desired {
        let mut labels = Labels::new();
        labels.insert("team".into(), label.into());
        Desired {
            spec,
            labels,
            annotations: Labels::new(),
        }
    }

    #[test]
    fn a_spec_change_bumps_generation_once_and_observed_and_applied_follow() {
        let mut m = new_meta(desired(json!({"a": 1}), "x"), t(0));
        assert_eq!((m.generation, m.observed_generation), (1, 1));
        assert_eq!(
            set_desired(&mut m, desired(json!({"a": 1}), "x"), t(1)),
            Change::Unchanged
        );
        assert_eq!(
            set_desired(&mut m, desired(json!({"a": 1}), "y"), t(2)),
            Change::Metadata
        );
        assert_eq!(m.generation, 1);
        assert_eq!(
            set_desired(&mut m, desired(json!({"a": 2}), "y"), t(3)),
            Change::Spec
        );
        assert_eq!((m.generation, m.observed_generation), (2, 2));
        let c = &m.conditions[0];
        assert_eq!(c["type"], APPLIED);
        assert_eq!(c["message"], "generation 2 applied");
        // Applied stayed True: the transition time is the first one.
        assert_eq!(c["lastTransitionTime"], ts(t(0)));
        assert_eq!(m.conditions.as_array().unwrap().len(), 1);
    }

    #[test]
    fn conditions_are_upserted_and_keep_others() {
        let mut m = new_meta(desired(json!({}), "x"), t(0));
        set_condition(&mut m, "Blocked", true, "Waiting", "on a", t(5));
        set_condition(&mut m, "Blocked", false, "Ready", "", t(6));
        let cs = m.conditions.as_array().unwrap();
        assert_eq!(cs.len(), 2);
        assert_eq!(cs[1]["status"], "False");
        assert_eq!(cs[1]["lastTransitionTime"], ts(t(6)));
        assert!(has_condition(&m, "Blocked"));
        let patched = Desired::stored(&m).with_spec_field("stopped", json!(true));
        assert_eq!(set_desired(&mut m, patched, t(7)), Change::Spec);
        assert_eq!(m.spec, json!({"stopped": true}));
        assert_eq!(m.conditions.as_array().unwrap().len(), 2);
    }
}
