//! What every list endpoint shares: the query (`labelSelector`, `phase`,
//! `host`), selection, and the `{apiVersion, kind: List, items}` shape.

use crate::api::extract::Json;
use pam_manifests::names::LabelSelector;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::api::ApiError;
use crate::rules::meta::manifest_labels;

#[derive(Deserialize, Default, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ListQuery {
    /// A label selector in kubectl's `-l` syntax (`k=v,k2!=v2,k3 in (a,b),!k4`).
    pub label_selector: Option<String>,
    /// Runs only: this phase.
    pub phase: Option<String>,
    /// Runs only: placed on this host.
    pub host: Option<String>,
}

impl ListQuery {
    pub fn selector(&self) -> Result<Option<LabelSelector>, ApiError> {
        match self.label_selector.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(s) => LabelSelector::parse(s)
                .map(Some)
                .map_err(|e| ApiError::bad_request(format!("labelSelector {s:?}: {e}"))),
        }
    }
}

/// Whether an object with these (stored) labels is selected.
pub fn selected(sel: &Option<LabelSelector>, labels: &pam_store::Labels) -> bool {
    sel.as_ref()
        .is_none_or(|s| s.matches(&manifest_labels(labels)))
}

pub fn list(items: Vec<Value>) -> Json<Value> {
    Json(json!({ "apiVersion": "pam.dev/v1", "kind": "List", "items": items }))
}

pub fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("objects serialize")
}
