use super::named::Table;
use super::*;
use crate::{Secret, SecretWait};

#[async_trait]
impl SecretTx for MemTx {
    async fn secrets_sealed_with_other(
        &mut self,
        key_id: &str,
        limit: i64,
    ) -> StoreResult<Vec<Secret>> {
        let mut v: Vec<Secret> = self
            .work
            .secrets
            .values()
            .filter(|x| x.key_id != key_id)
            .cloned()
            .collect();
        v.sort_by_key(|x| x.id);
        v.truncate(take(limit));
        Ok(v)
    }

    async fn secrets_sealed_with(&mut self, key_id: &str) -> StoreResult<bool> {
        Ok(self.work.secrets.values().any(|x| x.key_id == key_id))
    }

    async fn set_run_secret_wait(
        &mut self,
        run_id: Uuid,
        wait: Option<&str>,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let s = &mut self.work;
        match wait {
            None => {
                if s.secret_waits.remove(&run_id).is_some() {
                    if let Some(r) = s.runs.get_mut(&run_id) {
                        if r.status == pam_manifests::state::RunStatus::Pending
                            && r.dispatchable_since.is_some()
                        {
                            r.dispatchable_since = Some(now);
                            r.updated_at = now;
                            r.meta.resource_version += 1;
                        }
                    }
                }
            }
            Some(message) => {
                if !s.runs.contains_key(&run_id) {
                    return Err(StoreError::NotFound(format!(
                        "referenced row (run {run_id})"
                    )));
                }
                let w = s.secret_waits.entry(run_id).or_insert(SecretWait {
                    run_id,
                    message: String::new(),
                    since: now,
                });
                w.message = message.to_string();
            }
        }
        Ok(())
    }

    async fn run_secret_waits(&mut self, run_ids: Option<&[Uuid]>) -> StoreResult<Vec<SecretWait>> {
        Ok(self
            .work
            .secret_waits
            .values()
            .filter(|w| run_ids.is_none_or(|ids| ids.contains(&w.run_id)))
            .cloned()
            .collect())
    }
}

// Its generic reads and key checks (named.rs).
super::named::named!(
    crate::Secret,
    secrets,
    "secrets",
    "secrets_project_id_name_key",
    name,
    |x| Some(x.project_id)
);

impl Table for Secret {
    fn copy_own(&mut self, x: &Self) {
        self.salt = x.salt.clone();
        self.key_id = x.key_id.clone();
        self.nonce = x.nonce.clone();
        self.ciphertext = x.ciphertext.clone();
    }
}
