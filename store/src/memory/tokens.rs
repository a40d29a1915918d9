use super::*;

#[async_trait]
impl TokenTx for MemTx {
    async fn insert_token(&mut self, t: &ApiToken) -> StoreResult<()> {
        if (t.kind == TokenKind::Worker) != t.host_name.is_some() {
            return Err(StoreError::Invalid("check api_tokens_check failed".into()));
        }
        if (t.kind == TokenKind::Worker) != (t.role == Role::Worker) {
            return Err(StoreError::Invalid(
                "check api_tokens_role_kind failed".into(),
            ));
        }
        if matches!(t.role, Role::Operator | Role::Viewer) && t.projects.is_empty() {
            return Err(StoreError::Invalid(
                "check api_tokens_role_projects failed".into(),
            ));
        }
        let s = &mut self.work;
        if s.tokens.contains_key(&t.id) {
            return Err(StoreError::AlreadyExists("api_tokens_pkey".into()));
        }
        if s.tokens.values().any(|o| o.fingerprint == t.fingerprint) {
            return Err(StoreError::AlreadyExists(
                "api_tokens_fingerprint_key".into(),
            ));
        }
        let live_operator = |o: &ApiToken| o.kind == TokenKind::Operator && o.revoked_at.is_none();
        if live_operator(t)
            && s.tokens
                .values()
                .any(|o| live_operator(o) && o.name == t.name)
        {
            return Err(StoreError::AlreadyExists("api_tokens_operator_name".into()));
        }
        s.tokens.insert(t.id, t.clone());
        Ok(())
    }

    async fn dead_tokens(&mut self, ids: &[Uuid]) -> StoreResult<Vec<Uuid>> {
        Ok(ids
            .iter()
            .filter(|id| {
                self.work
                    .tokens
                    .get(id)
                    .is_none_or(|t| t.revoked_at.is_some())
            })
            .copied()
            .collect())
    }

    async fn get_token_by_fingerprint(&mut self, fp: &str) -> StoreResult<Option<ApiToken>> {
        Ok(self
            .work
            .tokens
            .values()
            .find(|t| t.fingerprint == fp)
            .cloned())
    }

    async fn list_tokens(&mut self) -> StoreResult<Vec<ApiToken>> {
        let mut v: Vec<ApiToken> = self.work.tokens.values().cloned().collect();
        v.sort_by_key(|t| (t.created_at, t.id));
        Ok(v)
    }

    async fn revoke_token(&mut self, id: Uuid, now: DateTime<Utc>) -> StoreResult<bool> {
        match self.work.tokens.get_mut(&id) {
            Some(t) if t.revoked_at.is_none() => {
                t.revoked_at = Some(now);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn touch_tokens(
        &mut self,
        uses: &[(Uuid, DateTime<Utc>)],
        window: chrono::Duration,
    ) -> StoreResult<u64> {
        let mut written = 0;
        for (id, at) in uses {
            match self.work.tokens.get_mut(id) {
                Some(t) if t.last_used_at.is_none_or(|last| last < *at - window) => {
                    t.last_used_at = Some(*at);
                    written += 1;
                }
                _ => {}
            }
        }
        Ok(written)
    }
}
