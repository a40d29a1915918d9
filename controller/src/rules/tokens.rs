//! API token rules: tokens are random, shown once, and stored only as
//! their SHA-256 fingerprint (`api_tokens.fingerprint`); the token itself
//! never reaches the database, a log or an event.

use chrono::{DateTime, Utc};
use pam_store::prelude::*;
use pam_store::{ApiToken, Object, Project, StoreResult, TokenKind};
use sha2::{Digest, Sha256};

use super::access::{Grant, Role};
use pam_manifests::kinds::RoleSpec;
use pam_manifests::Kind;
use pam_store::{CustomRole, Permission};
use std::sync::Arc;
use uuid::Uuid;

/// The SHA-256 hex fingerprint of a token: what the database keeps.
pub fn fingerprint(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// What a token of each kind starts with.
pub fn prefix(kind: TokenKind) -> &'static str {
    match kind {
        TokenKind::Operator => "pam_",
        TokenKind::Worker => "pamw_",
    }
}

/// A new random token (256 bits) with a kind prefix, and its fingerprint.
pub fn generate(kind: TokenKind) -> (String, String) {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    let token = format!("{}{}", prefix(kind), hex::encode(bytes));
    let fp = fingerprint(&token);
    (token, fp)
}

/// Whether `token` has the shape of a token of `kind` that an operator
/// made themselves (`[api] admin_token_file`): the kind's prefix, then at
/// least 32 letters or digits ([`generate`]'s are 64 hex digits).
pub fn well_formed(kind: TokenKind, token: &str) -> bool {
    token
        .strip_prefix(prefix(kind))
        .is_some_and(|rest| rest.len() >= 32 && rest.chars().all(|c| c.is_ascii_alphanumeric()))
}

/// Mints a token: the row keeps only the fingerprint; the token itself is
/// returned once, to show or to write to a file. An operator token is an
/// `admin` (pamd's own, the benchmarks'), a worker token a `worker`.
pub async fn mint(
    tx: &mut dyn Tx,
    kind: TokenKind,
    name: String,
    host_name: Option<String>,
    now: DateTime<Utc>,
) -> StoreResult<(ApiToken, String)> {
    let grant = default_grant(kind);
    mint_with(tx, kind, name, host_name, grant, now).await
}

/// [`mint`] with a role and projects (`pamctl token create
/// --role viewer --project web`).
pub async fn mint_with(
    tx: &mut dyn Tx,
    kind: TokenKind,
    name: String,
    host_name: Option<String>,
    grant: Grant,
    now: DateTime<Utc>,
) -> StoreResult<(ApiToken, String)> {
    let (token, fingerprint) = generate(kind);
    let t = insert(tx, kind, name, host_name, grant, fingerprint, now).await?;
    Ok((t, token))
}

/// What a token of `kind` may do unless told otherwise: every token made
/// before roles existed keeps its power.
pub fn default_grant(kind: TokenKind) -> Grant {
    let role = match kind {
        TokenKind::Operator => Role::Admin,
        TokenKind::Worker => Role::Worker,
    };
    Grant {
        role,
        projects: Vec::new(),
        read_only: Vec::new(),
    }
}

/// The grant of token `t`: its role and projects. A custom
/// role's rules are resolved here, at every authentication: the `Role`
/// object is read and each `projectSelector` matched against the
/// projects' labels now, so a change to the Role or to a project's labels
/// takes effect at the token's next request (nothing is cached). A token
/// whose Role is gone has no rules and no projects: no rights but
/// `whoami`.
pub async fn grant_of(tx: &mut dyn Tx, t: &ApiToken) -> StoreResult<Grant> {
    let Role::Custom(c) = &t.role else {
        return Ok(Grant {
            role: t.role.clone(),
            projects: t.projects.clone(),
            read_only: Vec::new(),
        });
    };
    let spec = tx
        .by_name::<Object>((Kind::Role.as_str().into(), None), &c.name)
        .await?
        .and_then(|o| serde_json::from_value::<RoleSpec>(o.meta.spec).ok());
    let rules = match spec {
        Some(spec) => resolve(tx, spec).await?,
        None => Vec::new(),
    };
    let mut projects: Vec<String> = rules
        .iter()
        .flat_map(|r| r.projects.iter().cloned())
        .collect();
    projects.sort();
    projects.dedup();
    Ok(Grant {
        role: Role::Custom(Arc::new(CustomRole {
            name: c.name.clone(),
            rules,
        })),
        projects,
        read_only: Vec::new(),
    })
}

/// A Role's rules with their projects named: those listed and those
/// whose labels a selector matches (the projects are read only when a
/// rule has a selector).
async fn resolve(tx: &mut dyn Tx, spec: RoleSpec) -> StoreResult<Vec<Permission>> {
    let selects = spec.rules.iter().any(|r| r.project_selector.is_some());
    let all = if selects {
        tx.list::<Project>(()).await?
    } else {
        Vec::new()
    };
    Ok(spec
        .rules
        .into_iter()
        .map(|r| {
            let mut projects: Vec<String> = r.projects.iter().map(|p| p.to_string()).collect();
            if let Some(sel) = &r.project_selector {
                projects.extend(
                    all.iter()
                        .filter(|p| sel.matches(|k| p.meta.labels.get(k).map(String::as_str)))
                        .map(|p| p.slug.clone()),
                );
            }
            projects.sort();
            projects.dedup();
            Permission {
                verbs: r.verbs,
                resources: r.kinds,
                projects,
            }
        })
        .collect())
}

/// Records a token by its fingerprint: [`mint`]'s row, or that of a token
/// pamd was given (`[api] admin_token_file`).
pub async fn record(
    tx: &mut dyn Tx,
    kind: TokenKind,
    name: String,
    host_name: Option<String>,
    fingerprint: String,
    now: DateTime<Utc>,
) -> StoreResult<ApiToken> {
    insert(
        tx,
        kind,
        name,
        host_name,
        default_grant(kind),
        fingerprint,
        now,
    )
    .await
}

async fn insert(
    tx: &mut dyn Tx,
    kind: TokenKind,
    name: String,
    host_name: Option<String>,
    grant: Grant,
    fingerprint: String,
    now: DateTime<Utc>,
) -> StoreResult<ApiToken> {
    let t = ApiToken {
        id: Uuid::new_v4(),
        name,
        kind,
        fingerprint,
        host_name,
        role: grant.role,
        projects: grant.projects,
        created_at: now,
        last_used_at: None,
        revoked_at: None,
    };
    tx.insert_token(&t).await?;
    Ok(t)
}

/// Revokes every live token of this kind and name (one replaced: its
/// token was lost with its file, or the file holds another now).
pub async fn revoke_named(
    tx: &mut dyn Tx,
    kind: TokenKind,
    name: &str,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    for t in tx.list_tokens().await? {
        if t.kind == kind && t.name == name && t.revoked_at.is_none() {
            revoke(tx, t.id, now).await?;
        }
    }
    Ok(())
}

/// Revokes a live token; returns whether one was revoked. Every request
/// looks its token up, so a revoked token is refused at once.
pub async fn revoke(tx: &mut dyn Tx, id: Uuid, now: DateTime<Utc>) -> StoreResult<bool> {
    tx.revoke_token(id, now).await
}

/// How stale `last_used_at` may be: a token is written at most
/// once per this window, not once per request.
pub const LAST_USED_GRANULARITY: chrono::Duration = chrono::Duration::seconds(60);

/// Whether a token last used at `last_used_at` is stale at `now`: then
/// the caller should [`touch`] it.
pub fn last_used_is_stale(last_used_at: Option<DateTime<Utc>>, now: DateTime<Utc>) -> bool {
    last_used_at.is_none_or(|at| at <= now - LAST_USED_GRANULARITY)
}

/// Records uses of tokens (`(id, when)`), each unless another request
/// already did within [`LAST_USED_GRANULARITY`] (the store's guard: a
/// burst of requests writes once); how many were written.
pub async fn touch(tx: &mut dyn Tx, uses: &[(Uuid, DateTime<Utc>)]) -> StoreResult<u64> {
    tx.touch_tokens(uses, LAST_USED_GRANULARITY).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_tokens_are_well_formed_and_of_their_kind_only() {
        for kind in [TokenKind::Operator, TokenKind::Worker] {
            let (token, fp) = generate(kind);
            assert!(well_formed(kind, &token), "{kind:?}");
            assert_eq!(fp, fingerprint(&token));
        }
        let (worker, _) = generate(TokenKind::Worker);
        assert!(!well_formed(TokenKind::Operator, &worker));
        assert!(!well_formed(TokenKind::Operator, "pam_short"));
        assert!(!well_formed(
            TokenKind::Operator,
            &format!("pam_{}-", "a".repeat(40))
        ));
    }
}
