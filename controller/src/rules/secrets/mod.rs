//! Secret rules: creating and updating a Secret (sealing its
//! values), deleting it, re-sealing under a new key ([`rotate`]) and the
//! one way to read a value back ([`resolve`], [`open_values`]).
//!
//! # The API other features use
//! [`resolve`]`(tx, keyring, project_id, secret_name, key)` returns the
//! value's bytes inside the caller's transaction, or a [`ResolveError`]
//! naming the Secret and key (never a value): `Missing` when the Secret
//! or key does not exist, `Unreadable` when the key file cannot open it.
//!
//! # Guarantees
//! - The store holds ciphertext only: the values of a Secret are sealed
//!   together (AES-256-GCM, a fresh nonce per write, bound to the Secret's
//!   id and project) under the keyring's current key; the row records the
//!   key id ([`keyring`]).
//! - `meta.spec` holds each key's size and digest, never a value: the
//!   digest is `sha256:` and 16 hex digits of SHA-256(salt ‖ value) with a
//!   salt drawn per Secret at creation, so re-applying the same values is
//!   `unchanged` while equal values in two Secrets get unrelated digests.
//! - Nothing here logs, journals or formats a value into an error.

pub mod keyring;

use std::collections::BTreeMap;

use base64::Engine as _;
use chrono::{DateTime, Utc};
use pam_store::prelude::*;
use pam_store::{Secret, StoreError, StoreResult};
use serde_json::{json, Value};
use sha2::{Digest as _, Sha256};
use uuid::Uuid;

pub use keyring::{Keyring, OpenError};

use super::meta::{self, Change, Desired};

/// A Secret as declared: its values decoded.
pub struct SecretDesired {
    pub name: String,
    /// Labels and annotations (its spec is derived from `values`).
    pub desired: Desired,
    pub values: BTreeMap<String, Vec<u8>>,
}

impl SecretDesired {
    /// `values` come from [`pam_manifests::kinds::SecretSpec::values`]
    /// (validation already decoded them once).
    pub fn of(
        s: &pam_manifests::kinds::Secret,
        desired: Desired,
        values: BTreeMap<String, Vec<u8>>,
    ) -> SecretDesired {
        SecretDesired {
            name: s.metadata.name.to_string(),
            desired,
            values,
        }
    }
}

/// `sha256:` + 16 hex digits of SHA-256(salt ‖ value).
pub fn digest(salt: &[u8], value: &[u8]) -> String {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(value);
    format!("sha256:{}", &hex::encode(h.finalize())[..16])
}

/// The stored spec of these values under `salt`: each key's size and digest.
pub fn redacted_spec(salt: &[u8], values: &BTreeMap<String, Vec<u8>>) -> Value {
    let keys: serde_json::Map<String, Value> = values
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                json!({"size": v.len(), "digest": digest(salt, v)}),
            )
        })
        .collect();
    json!({ "keys": keys })
}

/// The key names a stored Secret holds.
pub fn key_names(s: &Secret) -> Vec<String> {
    s.meta
        .spec
        .get("keys")
        .and_then(Value::as_object)
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

fn aad(id: Uuid, project_id: Uuid) -> Vec<u8> {
    [id.as_bytes().as_slice(), project_id.as_bytes().as_slice()].concat()
}

fn seal(ring: &Keyring, s: &mut Secret, values: &BTreeMap<String, Vec<u8>>) {
    let map: BTreeMap<&String, String> = values
        .iter()
        .map(|(k, v)| (k, base64::engine::general_purpose::STANDARD.encode(v)))
        .collect();
    let plain = serde_json::to_vec(&map).expect("a map of strings is JSON");
    let (key_id, nonce, ct) = ring.seal(&aad(s.id, s.project_id), &plain);
    s.key_id = key_id;
    s.nonce = nonce;
    s.ciphertext = ct;
}

/// Every value of a stored Secret, opened.
pub fn open_values(ring: &Keyring, s: &Secret) -> Result<BTreeMap<String, Vec<u8>>, OpenError> {
    let plain = ring.open(&s.key_id, &aad(s.id, s.project_id), &s.nonce, &s.ciphertext)?;
    let map: BTreeMap<String, String> =
        serde_json::from_slice(&plain).map_err(|_| OpenError::Corrupt(s.key_id.clone()))?;
    map.into_iter()
        .map(|(k, v)| {
            base64::engine::general_purpose::STANDARD
                .decode(v)
                .map(|b| (k, b))
                .map_err(|_| OpenError::Corrupt(s.key_id.clone()))
        })
        .collect()
}

/// Creates a Secret in a project, sealed with the current key.
pub async fn create(
    tx: &mut dyn Tx,
    ring: &Keyring,
    project_id: Uuid,
    d: SecretDesired,
    now: DateTime<Utc>,
) -> StoreResult<Secret> {
    let salt = {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).expect("the OS random source works");
        b.to_vec()
    };
    let desired = Desired {
        spec: redacted_spec(&salt, &d.values),
        ..d.desired
    };
    let mut row = Secret {
        id: Uuid::new_v4(),
        project_id,
        name: d.name,
        meta: meta::new_meta(desired, now),
        salt,
        key_id: String::new(),
        nonce: Vec::new(),
        ciphertext: Vec::new(),
        created_at: now,
        updated_at: now,
    };
    seal(ring, &mut row, &d.values);
    tx.insert(&row).await?;
    Ok(row)
}

/// The desired state of `d` as it would be stored on `row` (its salt):
/// what apply and diff compare.
pub fn desired_on(row: &Secret, d: &SecretDesired) -> Desired {
    Desired {
        spec: redacted_spec(&row.salt, &d.values),
        ..d.desired.clone()
    }
}

/// Updates a Secret (guarded by its resourceVersion): new values are
/// sealed anew with the current key; the same values write nothing.
pub async fn update(
    tx: &mut dyn Tx,
    ring: &Keyring,
    mut row: Secret,
    d: SecretDesired,
    now: DateTime<Utc>,
) -> StoreResult<(Secret, Change)> {
    let rv = row.meta.resource_version;
    let desired = desired_on(&row, &d);
    let change = meta::set_desired(&mut row.meta, desired, now);
    if !change.changed() {
        return Ok((row, change));
    }
    if change == Change::Spec {
        seal(ring, &mut row, &d.values);
    }
    row.updated_at = now;
    let row = tx.update(&row, rv).await?;
    Ok((row, change))
}

/// Deletes a Secret. Runs that name it wait again at their next check.
pub async fn delete(tx: &mut dyn Tx, id: Uuid) -> StoreResult<bool> {
    tx.delete::<Secret>(id).await
}

/// Why a value could not be read. Messages name the Secret and key only.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The Secret or the key does not exist (yet).
    #[error("{0}")]
    Missing(String),
    /// The Secret exists but the key file cannot open it.
    #[error("Secret {name:?}: {source}")]
    Unreadable {
        name: String,
        #[source]
        source: OpenError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The message for a missing Secret or key (a run's `SecretMissing`
/// condition, a resolve error).
pub fn missing_message(name: &str, key: Option<&str>) -> String {
    match key {
        None => format!("Secret {name:?} does not exist in the run's project"),
        Some(key) => format!("Secret {name:?} has no key {key:?}"),
    }
}

/// The value of `key` in Secret `name` of the project, read in the
/// caller's transaction: the one way to read a Secret back.
pub async fn resolve(
    tx: &mut dyn Tx,
    ring: &Keyring,
    project_id: Uuid,
    name: &str,
    key: &str,
) -> Result<Vec<u8>, ResolveError> {
    let s = tx
        .by_name::<Secret>(project_id, name)
        .await?
        .ok_or_else(|| ResolveError::Missing(missing_message(name, None)))?;
    let mut values = open_values(ring, &s).map_err(|source| ResolveError::Unreadable {
        name: name.to_string(),
        source,
    })?;
    values
        .remove(key)
        .ok_or_else(|| ResolveError::Missing(missing_message(name, Some(key))))
}

/// What a rotation did.
#[derive(Debug, Clone, Default, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rotation {
    /// The key everything is sealed with now.
    pub key_id: String,
    /// Secrets re-sealed.
    pub resealed: u64,
    /// Old keys dropped from the key file (nothing sealed with them is
    /// left).
    pub retired: Vec<String>,
    /// A re-seal only (the key file is not pamd's to write): the old keys
    /// nothing is sealed with any more, whose lines may now be removed
    /// where the file comes from; always there (empty after a rotation
    /// pamd wrote, or when nothing is left to remove).
    pub removable: Vec<String>,
}

/// Re-seals up to `limit` Secrets sealed with another key than the
/// current one, in the caller's transaction; returns how many. The
/// resourceVersion moves (a write); generation and spec do not.
pub async fn reseal_batch(
    tx: &mut dyn Tx,
    ring: &Keyring,
    limit: i64,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let current = ring.current_id();
    let rows = tx.secrets_sealed_with_other(&current, limit).await?;
    let mut n = 0;
    for mut row in rows {
        let values = open_values(ring, &row).map_err(|e| {
            StoreError::Invalid(format!("Secret {:?} cannot be re-sealed: {e}", row.name))
        })?;
        let rv = row.meta.resource_version;
        seal(ring, &mut row, &values);
        row.updated_at = now;
        tx.update(&row, rv).await?;
        n += 1;
    }
    Ok(n)
}
