//! A run's environment: `spec.env` and `spec.envFrom`, the
//! wait for a Secret that does not exist yet, and the values an attempt
//! gets.
//!
//! # Guarantees
//! - A pending run whose environment names a missing Secret or key has a
//!   wait row ([`check_wait`], the one rule that sets or clears it): the
//!   claim skips it and its `SecretMissing` condition names the Secret
//!   and key. It is set when the run is created and re-checked by each
//!   loop pass (`reconcile::secrets`), which clears it once the Secret is
//!   applied.
//! - [`environment`] opens values only for the run being spawned, in the
//!   transaction that answers its worker; they leave pamd only in that
//!   worker's desired set.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use pam_manifests::kinds::valid_env_name;
use pam_store::prelude::*;
use pam_store::{Run, Secret, StoreResult};

use crate::rules::secrets::{self, missing_message, Keyring, ResolveError};

/// The condition a waiting run shows.
pub use pam_manifests::conditions::SECRET_MISSING;

pub use pam_store::secrets::{env_of, reads_secrets};

/// The first Secret or key the run's environment names that does not
/// exist, as the message of its wait; `None` when all do. Reads key
/// names only, opens nothing.
pub async fn missing(tx: &mut dyn Tx, run: &Run) -> StoreResult<Option<String>> {
    let (env, from) = env_of(&run.meta.spec);
    let mut keys_of: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
    let mut wanted: Vec<(String, Option<String>)> = Vec::new();
    for f in &from {
        wanted.push((f.secret_ref.name.to_string(), None));
    }
    for v in &env {
        if let Some(from) = &v.value_from {
            let r = &from.secret_key_ref;
            wanted.push((r.name.to_string(), Some(r.key.clone())));
        }
    }
    for (name, key) in wanted {
        if !keys_of.contains_key(&name) {
            let s = tx.by_name::<Secret>(run.project_id, &name).await?;
            keys_of.insert(name.clone(), s.as_ref().map(secrets::key_names));
        }
        match (&keys_of[&name], &key) {
            (None, _) => return Ok(Some(missing_message(&name, None))),
            (Some(keys), Some(k)) if !keys.contains(k) => {
                return Ok(Some(missing_message(&name, Some(k))))
            }
            _ => {}
        }
    }
    Ok(None)
}

/// Sets or clears the run's wait for a Secret (the one rule): a pending
/// run waits while [`missing`] names something; any other run never
/// does. Returns whether the run was released (it waited and may be
/// claimed now).
pub async fn check_wait(
    tx: &mut dyn Tx,
    run: &Run,
    waiting: Option<&str>,
    now: DateTime<Utc>,
) -> StoreResult<bool> {
    let want = if run.status == pam_manifests::state::RunStatus::Pending
        && reads_secrets(&run.meta.spec)
    {
        missing(tx, run).await?
    } else {
        None
    };
    if want.as_deref() == waiting {
        return Ok(false);
    }
    tx.set_run_secret_wait(run.id, want.as_deref(), now).await?;
    Ok(want.is_none())
}

/// Why an attempt's environment could not be built.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error(transparent)]
    Resolve(#[from] ResolveError),
    #[error("Secret {name:?} key {key:?} is not UTF-8 text without NUL, expected such text for an environment variable")]
    NotText { name: String, key: String },
}

fn text(name: &str, key: &str, bytes: Vec<u8>) -> Result<String, EnvError> {
    String::from_utf8(bytes)
        .ok()
        .filter(|s| !s.contains('\0'))
        .ok_or_else(|| EnvError::NotText {
            name: name.to_string(),
            key: key.to_string(),
        })
}

/// The environment of the run's attempt, by name: `envFrom` Secrets'
/// keys (those that are valid variable names), then `env` over them.
/// Values are opened here, in the caller's transaction.
pub async fn environment(
    tx: &mut dyn Tx,
    ring: &Keyring,
    run: &Run,
) -> Result<BTreeMap<String, String>, EnvError> {
    let (env, from) = env_of(&run.meta.spec);
    let mut out = BTreeMap::new();
    for f in &from {
        let name = f.secret_ref.name.as_str();
        let s = tx
            .by_name::<Secret>(run.project_id, name)
            .await
            .map_err(ResolveError::from)?
            .ok_or_else(|| ResolveError::Missing(missing_message(name, None)))?;
        let values = secrets::open_values(ring, &s).map_err(|source| ResolveError::Unreadable {
            name: name.to_string(),
            source,
        })?;
        for (key, bytes) in values {
            if valid_env_name(&key) {
                out.insert(key.clone(), text(name, &key, bytes)?);
            }
        }
    }
    for v in &env {
        let value = match (&v.value, &v.value_from) {
            (Some(value), _) => value.clone(),
            (None, Some(from)) => {
                let r = &from.secret_key_ref;
                let bytes =
                    secrets::resolve(tx, ring, run.project_id, r.name.as_str(), &r.key).await?;
                text(r.name.as_str(), &r.key, bytes)?
            }
            (None, None) => continue,
        };
        out.insert(v.name.clone(), value);
    }
    Ok(out)
}
