//! The secret aggregate: [`Secret`] rows — a project's sealed
//! values with their declarative metadata — and the runs waiting for a
//! Secret ([`SecretTx::set_run_secret_wait`]).
//!
//! The store never sees a value: `ciphertext` is sealed (AES-256-GCM) and
//! opened by pamd's rules with its key file; `meta.spec` holds each key's
//! name, size and digest.
//!
//! # Guarantees
//! - `(project_id, name)` is unique; deleting a project deletes its
//!   Secrets.
//! - A run with a wait row is never claimed ([`crate::RunTx::claim_runs`])
//!   nor listed as pending for the dispatch timeout; deleting the run
//!   deletes its wait row.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::kinds::{EnvFromSource, EnvVar};
use serde_json::Value;
use uuid::Uuid;

use crate::{Meta, StoreResult};

/// The `env` and `envFrom` of a stored run spec.
pub fn env_of(spec: &Value) -> (Vec<EnvVar>, Vec<EnvFromSource>) {
    let get = |field: &str| spec.get(field).cloned().unwrap_or(Value::Array(vec![]));
    (
        serde_json::from_value(get("env")).unwrap_or_default(),
        serde_json::from_value(get("envFrom")).unwrap_or_default(),
    )
}

/// Whether a stored run spec reads any Secret (an `envFrom` entry, or an
/// `env` entry with a `valueFrom`). [`READS_SECRETS_SQL`] is the same test
/// over `runs.spec`; the conformance suite keeps the two equal
/// ([`crate::RunTx::list_pending_runs_reading_secrets`]).
pub fn reads_secrets(spec: &Value) -> bool {
    let (env, from) = env_of(spec);
    !from.is_empty() || env.iter().any(|v| v.value_from.is_some())
}

/// [`reads_secrets`] as a condition over `runs.spec`.
pub const READS_SECRETS_SQL: &str = "(jsonb_typeof(spec->'envFrom') = 'array' \
    AND jsonb_array_length(spec->'envFrom') > 0 \
    OR jsonb_path_exists(spec, '$.env[*].valueFrom ? (@ != null)'))";

/// A Secret: its metadata and its sealed values.
#[derive(Clone, PartialEq)]
pub struct Secret {
    pub id: Uuid,
    pub project_id: Uuid,
    /// Operator name, unique per project.
    pub name: String,
    /// `meta.spec`: `{"keys": {KEY: {"size": N, "digest": "sha256:…"}}}`.
    pub meta: Meta,
    /// The per-Secret salt of the digests.
    pub salt: Vec<u8>,
    /// The id of the key (in pamd's key file) that sealed `ciphertext`.
    pub key_id: String,
    /// The 12-byte AES-GCM nonce.
    pub nonce: Vec<u8>,
    /// The sealed values, with the GCM tag.
    pub ciphertext: Vec<u8>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// Sizes only: no byte of a Secret reaches a log through `{:?}`.
impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secret")
            .field("id", &self.id)
            .field("project_id", &self.project_id)
            .field("name", &self.name)
            .field("key_id", &self.key_id)
            .field("ciphertext_len", &self.ciphertext.len())
            .finish_non_exhaustive()
    }
}

/// A pending run waiting for a Secret or key that does not exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretWait {
    pub run_id: Uuid,
    /// Names the Secret and key (never a value).
    pub message: String,
    pub since: DateTime<Utc>,
}

/// Secrets (`secrets`, `run_secret_waits`). Part of every [`crate::Tx`].
#[async_trait]
pub trait SecretTx: Send {
    /// Up to `limit` Secrets of any project sealed with a key other than
    /// `key_id` (key rotation), ordered by id.
    async fn secrets_sealed_with_other(
        &mut self,
        key_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Secret>>;
    /// Whether any Secret is still sealed with `key_id`.
    async fn secrets_sealed_with(&mut self, key_id: &str) -> StoreResult<bool>;

    /// Sets (`Some`) or clears (`None`) a run's wait for a Secret. Setting
    /// an existing wait keeps its `since` and writes the new message.
    /// Clearing a wait that existed restarts the dispatch-timeout anchor
    /// of a dispatchable pending run (`dispatchable_since = now`, OQ-15):
    /// waiting for a Secret never counts against the dispatch timeout.
    async fn set_run_secret_wait(
        &mut self,
        run_id: Uuid,
        wait: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()>;
    /// The waits of these runs (`None`: every wait), ordered by run id.
    async fn run_secret_waits(&mut self, run_ids: Option<&[Uuid]>) -> StoreResult<Vec<SecretWait>>;
}

crate::named::row!(Secret);

impl crate::NamedKind for Secret {
    type Scope = Uuid;
    const NOUN: &'static str = "secret";
    fn scope(&self) -> Uuid {
        self.project_id
    }
}
