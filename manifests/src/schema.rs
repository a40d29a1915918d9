//! JSON Schemas for the manifest kinds, generated with schemars and
//! committed under `schemas/` (never hand-edited; a test fails with the
//! regenerate command when they are stale).
//!
//! The schemas describe a manifest **as written for `pamctl apply`** — what
//! an editor should accept: no `status` block and no server-set metadata
//! (`uid`, `generation`, `creationTimestamp`), all refused on input (see
//! [`crate::kinds`]). They are draft 2020-12.

use schemars::generate::SchemaSettings;
use schemars::JsonSchema;
use serde_json::Value;

use crate::kinds::{Kind, SERVER_SET_METADATA};

/// The command that rewrites `schemas/` from the types.
pub const REGENERATE_COMMAND: &str = "cargo run -p pam-manifests --bin pam-schemas -- schemas/";

/// The file name of a kind's schema (`task.schema.json`).
pub fn file_name(kind: Kind) -> String {
    format!("{}.schema.json", kind.singular())
}

/// The input schema of one kind.
pub fn schema_for(kind: Kind) -> Value {
    crate::kinds::for_manifest!(kind, T => generate::<T>(kind))
}

/// The schema of a kind's object as the API prints it (with `status` and
/// the server-set metadata), added to `generator`'s definitions: the
/// OpenAPI document's responses (pam-controller's `api::openapi`).
pub fn object_schema(kind: Kind, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
    crate::kinds::for_manifest!(kind, T => generator.subschema_for::<T>())
}

/// Every kind's schema file: `(file name, pretty JSON with a final newline)`.
pub fn all_schema_files() -> Vec<(String, String)> {
    Kind::ALL
        .into_iter()
        .map(|kind| {
            let text = serde_json::to_string_pretty(&schema_for(kind)).expect("schema is JSON");
            (file_name(kind), text + "\n")
        })
        .collect()
}

fn generate<T: JsonSchema>(kind: Kind) -> Value {
    let generator = SchemaSettings::draft2020_12()
        .for_deserialize()
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    let root = schema.as_object_mut().expect("root schema is an object");
    root.insert(
        "title".into(),
        Value::String(format!("pam.dev/v1 {}", kind.as_str())),
    );
    if let Some(props) = root.get_mut("properties").and_then(Value::as_object_mut) {
        props.remove("status");
    }
    if let Some(defs) = root.get_mut("$defs").and_then(Value::as_object_mut) {
        // Status types are output-only: drop them with the property.
        defs.retain(|name, _| {
            !name.starts_with("Observed")
                && name != "Condition"
                && name != "ConditionStatus"
                && name != "Completion"
                // Server-set metadata's type (`managedFields`), refused on input.
                && name != "ManagedFieldsEntry"
                && !STATUS_ENUMS.contains(&name.as_str())
        });
        for meta in ["ObjectMeta", "ProjectObjectMeta"] {
            if let Some(props) = defs
                .get_mut(meta)
                .and_then(|m| m.get_mut("properties"))
                .and_then(Value::as_object_mut)
            {
                for field in SERVER_SET_METADATA {
                    props.remove(field);
                }
            }
        }
    }
    schema
}

/// Enums used only by status blocks.
const STATUS_ENUMS: &[&str] = &["RunStatus", "HostStatus", "ProjectStatus", "FailureReason"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_refuse_status_and_server_set_metadata() {
        for kind in Kind::ALL {
            let s = schema_for(kind);
            assert_eq!(s["additionalProperties"], Value::Bool(false), "{kind}");
            assert!(s["properties"].get("status").is_none(), "{kind}");
            let text = s.to_string();
            assert!(!text.contains("creationTimestamp"), "{kind}");
            assert!(text.contains("resourceVersion"), "{kind}");
            // Every $ref resolves.
            for (i, _) in text.match_indices("\"$ref\":\"#/$defs/") {
                let rest = &text[i + 16..];
                let name = &rest[..rest.find('"').unwrap()];
                assert!(
                    s["$defs"].get(name).is_some(),
                    "{kind}: dangling $ref {name}"
                );
            }
        }
    }
}
