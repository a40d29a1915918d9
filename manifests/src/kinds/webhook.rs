//! The `Webhook` kind: an HTTP endpoint that receives every
//! journal event matching its topics (and projects), signed with a secret
//! the manifest names but never holds.
//!
//! A Webhook is cluster-scoped, like a Source; `spec.projects` filters the
//! events by project. What the topics may name (the journal's topics) and
//! whether the secret exists are checked by pamd when the batch is applied;
//! what needs no stored state is checked here ([`WebhookSpec::problems`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::names::Name;

/// Where the signing secret lives: a key of a project's Secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    /// The project holding the Secret.
    pub project: Name,
    /// The Secret's name.
    pub name: Name,
    /// The key inside the Secret whose value signs deliveries.
    pub key: String,
}

/// Desired state of a Webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookSpec {
    /// The endpoint: an `http://` or `https://` URL without user info,
    /// POSTed one delivery at a time. pamd refuses private addresses unless
    /// its `[webhooks] allow_networks` lists them, and never follows a
    /// redirect.
    pub url: String,
    /// Which events: topic names (`run.finished`) and prefixes ending in a
    /// dot (`run.`), as `pamctl events --topic` takes them.
    pub topics: Vec<String>,
    /// Only events about these projects (by name); every event when empty.
    /// Events about no project (`worker.*`, `source.*`) never match a
    /// non-empty list.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub projects: Vec<Name>,
    /// The secret deliveries are signed with (HMAC-SHA256, the
    /// `Pam-Signature` header).
    pub signing_secret_ref: SecretKeyRef,
}

impl WebhookSpec {
    /// Per-document rules typing cannot express: `(field path, message)`.
    pub fn problems(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let url = self.url.trim();
        let scheme_ok = ["http://", "https://"]
            .iter()
            .any(|s| url.len() > s.len() && url[..s.len()].eq_ignore_ascii_case(s));
        // Never printed with its user info: it may hold a password.
        let shown = crate::urls::redacted(&self.url);
        if !scheme_ok || url.contains(char::is_whitespace) {
            out.push((
                "spec.url".to_string(),
                format!(
                    "{shown:?} is not an http(s) URL, expected http://HOST/PATH or https://HOST/PATH"
                ),
            ));
        } else if crate::urls::has_credentials(&self.url) {
            out.push((
                "spec.url".to_string(),
                format!(
                    "{shown:?} {} (a receiver checks the Pam-Signature header instead)",
                    crate::urls::CREDENTIALS_REFUSED
                ),
            ));
        }
        if self.topics.is_empty() {
            out.push((
                "spec.topics".to_string(),
                "empty, expected topics (run.finished) or prefixes (run.)".to_string(),
            ));
        }
        for (i, t) in self.topics.iter().enumerate() {
            let ok = !t.is_empty()
                && t.chars()
                    .all(|c| c.is_ascii_lowercase() || c == '_' || c == '.');
            if !ok {
                out.push((
                    format!("spec.topics[{i}]"),
                    format!("{t:?} is not a topic, expected a topic (run.finished) or a prefix ending in a dot (run.)"),
                ));
            }
        }
        if self.signing_secret_ref.key.trim().is_empty() {
            out.push((
                "spec.signingSecretRef.key".to_string(),
                "empty, expected the key of the Secret holding the signing secret".to_string(),
            ));
        }
        out
    }
}

/// Observed state of a Webhook: how its deliveries stand.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ObservedWebhook {
    /// Deliveries waiting to be sent or retried.
    #[serde(default)]
    pub pending: u64,
    /// Deliveries that gave up (`pamctl webhook redeliver ID` sends one
    /// again).
    #[serde(default)]
    pub failed: u64,
    /// The spec generation this status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str, topics: &[&str]) -> WebhookSpec {
        serde_json::from_value(serde_json::json!({
            "url": url, "topics": topics,
            "signingSecretRef": {"project": "web", "name": "hooks", "key": "signing"}
        }))
        .unwrap()
    }

    #[test]
    fn problems_name_the_field() {
        assert!(spec("https://ci.example/hook", &["run."])
            .problems()
            .is_empty());
        assert!(spec("HTTP://127.0.0.1:9/x", &["run.finished"])
            .problems()
            .is_empty());
        let p = spec("ftp://x", &[]).problems();
        let fields: Vec<&str> = p.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(fields, ["spec.url", "spec.topics"]);
        let p = spec("https://user:pa55w0rd@ci.example/h", &["run."]).problems();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].0, "spec.url");
        assert!(p[0]
            .1
            .contains("\"https://ci.example/h\" holds a password or token"));
        assert!(!p[0].1.contains("pa55w0rd"), "{p:?}");
        let p = spec("ftp://user:pa55w0rd@ci.example/h", &["run."]).problems();
        assert!(!p[0].1.contains("pa55w0rd"), "{p:?}");
        let p = spec("http://", &["Run.X"]).problems();
        let fields: Vec<&str> = p.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(fields, ["spec.url", "spec.topics[0]"]);
    }
}
