//! The `Secret` kind: named values of a project — provider API
//! keys, repository credentials — that runs take into their environment
//! (`spec.env[].valueFrom.secretKeyRef`, `spec.envFrom[].secretRef`).
//!
//! Values are write-only: a manifest carries them (`data`, base64, or
//! `stringData`, plain text; a key in both takes `stringData`'s), the
//! server keeps them encrypted and prints only each key's name, size and
//! digest (`status.keys`). Nothing here prints a value: [`SecretSpec`]'s
//! `Debug` shows key names only, and every error names the key, never
//! its value.

use std::collections::BTreeMap;

use super::*;

/// Bytes of one Secret's values, all keys together, decoded (1 MiB).
pub const SECRET_MAX_BYTES: usize = 1 << 20;

/// Bytes of a Secret key's name.
pub const SECRET_KEY_MAX_BYTES: usize = 253;

/// Desired state of a Secret: its values. Output never carries them (the
/// maps print empty; `status.keys` says what is stored).
#[derive(Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretSpec {
    /// Values as base64 (standard alphabet, padded), by key. Keys: letters,
    /// digits, `-`, `_`, `.`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub data: BTreeMap<String, String>,
    /// Values as plain text, by key; over `data` for a key in both.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub string_data: BTreeMap<String, String>,
}

/// Key names only: a value must never reach a log line through `{:?}`.
impl fmt::Debug for SecretSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretSpec")
            .field("data", &self.data.keys().collect::<Vec<_>>())
            .field("string_data", &self.string_data.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Whether `key` is a valid Secret key: 1..=253 bytes of ASCII letters,
/// digits, `-`, `_` and `.` (Kubernetes' Secret keys).
pub fn valid_secret_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= SECRET_KEY_MAX_BYTES
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// A Secret's decoded values, by key.
pub type SecretValues = BTreeMap<String, Vec<u8>>;

/// Problems as (field path, message).
pub type FieldProblems = Vec<(String, String)>;

impl SecretSpec {
    /// The decoded values by key, or every problem as (field path,
    /// message). Messages never quote a value.
    pub fn values(&self) -> Result<SecretValues, FieldProblems> {
        use base64::Engine as _;
        let mut problems = Vec::new();
        let mut out = BTreeMap::new();
        for (key, text) in &self.data {
            let path = format!("spec.data.{key}");
            match base64::engine::general_purpose::STANDARD.decode(text.trim()) {
                Ok(bytes) => {
                    out.insert(key.clone(), bytes);
                }
                Err(_) => problems.push((
                    path,
                    "not valid base64, expected base64 text (standard alphabet, padded); use stringData for plain text".to_string(),
                )),
            }
        }
        for (key, text) in &self.string_data {
            out.insert(key.clone(), text.as_bytes().to_vec());
        }
        for key in self.data.keys().chain(self.string_data.keys()) {
            if !valid_secret_key(key) {
                let field = if self.string_data.contains_key(key) {
                    "stringData"
                } else {
                    "data"
                };
                problems.push((
                    format!("spec.{field}"),
                    format!("invalid key {key:?}, expected 1 to {SECRET_KEY_MAX_BYTES} letters, digits, '-', '_' or '.'"),
                ));
            }
        }
        let total: usize = out.values().map(Vec::len).sum();
        if total > SECRET_MAX_BYTES {
            problems.push((
                "spec".to_string(),
                format!("the Secret's values are {total} bytes, expected at most {SECRET_MAX_BYTES} bytes (1 MiB) in all"),
            ));
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(problems)
        }
    }
}

/// One stored key of a Secret, as printed: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyStatus {
    /// The key.
    pub name: String,
    /// Bytes of the value.
    pub size: u64,
    /// `sha256:` and the first 16 hex digits of SHA-256 over the Secret's
    /// own salt and the value: equal within one Secret across applies
    /// (so a change shows), unrelated across Secrets (so equal values in
    /// two Secrets do not show).
    pub digest: String,
}

/// Observed state of a Secret.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedSecret {
    /// The stored keys, by name.
    #[serde(default)]
    pub keys: Vec<SecretKeyStatus>,
    /// The encryption key the values are sealed with now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_id: Option<String>,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Latest observations.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod secret_tests {
    use super::*;

    #[test]
    fn values_decode_and_string_data_wins() {
        let spec = SecretSpec {
            data: [("A".into(), "aGk=".into()), ("B".into(), "eA==".into())].into(),
            string_data: [("B".into(), "plain".into())].into(),
        };
        let v = spec.values().unwrap();
        assert_eq!(v["A"], b"hi");
        assert_eq!(v["B"], b"plain");
        assert!(!format!("{spec:?}").contains("aGk="));
    }

    #[test]
    fn problems_never_quote_values() {
        let spec = SecretSpec {
            data: [("K".into(), "not*base64-SECRETVALUE".into())].into(),
            string_data: [("bad key".into(), "x".into())].into(),
        };
        let problems = spec.values().unwrap_err();
        assert_eq!(problems.len(), 2);
        assert!(problems.iter().all(|(_, m)| !m.contains("SECRETVALUE")));
        let big = SecretSpec {
            string_data: [("K".into(), "x".repeat(SECRET_MAX_BYTES + 1))].into(),
            ..Default::default()
        };
        assert_eq!(big.values().unwrap_err()[0].0, "spec");
    }
}
