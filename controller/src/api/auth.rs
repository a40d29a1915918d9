//! Bearer-token authentication. Every `/api/v1` call except version needs
//! `Authorization: Bearer <token>`. Tokens are random, shown once, and
//! stored only as their SHA-256 fingerprint (`api_tokens.fingerprint`,
//! `hosts.token_fingerprint`); a revoked token is refused at once because
//! every request looks its fingerprint up.
//!
//! Two kinds: operator tokens (the API, pamctl, the dashboard) and worker
//! tokens, each bound to one host name, which may only call the worker
//! endpoints and only act for that host.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::{ApiError, AppState};
use crate::store::{ApiToken, TokenKind};

/// Who is calling.
#[derive(Debug, Clone)]
pub enum Principal {
    Operator { token_id: Uuid, name: String },
    Worker { token_id: Uuid, host: String },
}

/// The SHA-256 hex fingerprint of a token: what the database keeps.
pub fn fingerprint(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// A new random token (256 bits) with a kind prefix, and its fingerprint.
pub fn generate(kind: TokenKind) -> (String, String) {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).expect("the OS random source works");
    let prefix = match kind {
        TokenKind::Operator => "pam_",
        TokenKind::Worker => "pamw_",
    };
    let token = format!("{prefix}{}", hex::encode(bytes));
    let fp = fingerprint(&token);
    (token, fp)
}

/// Mints a token inside `tx`: the row keeps only the fingerprint, the
/// token itself is returned once to the caller (to show or write to a file).
pub async fn insert_new_token(
    tx: &mut dyn crate::store::Tx,
    kind: TokenKind,
    name: String,
    host_name: Option<String>,
    now: chrono::DateTime<chrono::Utc>,
) -> crate::store::StoreResult<(ApiToken, String)> {
    let (token, fingerprint) = generate(kind);
    let t = ApiToken {
        id: Uuid::new_v4(),
        name,
        kind,
        fingerprint,
        host_name,
        created_at: now,
        last_used_at: None,
        revoked_at: None,
    };
    tx.insert_token(&t).await?;
    Ok((t, token))
}

fn unauthorized(msg: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", msg)
}

/// Looks a bearer token up; revoked and unknown tokens are refused.
pub async fn authenticate(state: &AppState, header: Option<&str>) -> Result<Principal, ApiError> {
    let Some(value) = header else {
        return Err(unauthorized(
            "missing Authorization: Bearer <token> (pamctl: --token, PAM_TOKEN or the config file)",
        ));
    };
    let Some(token) = value.strip_prefix("Bearer ").map(str::trim) else {
        return Err(unauthorized(
            "the Authorization header must be `Bearer <token>`",
        ));
    };
    let fp = fingerprint(token);
    let mut tx = state.ctx.store.begin().await.map_err(ApiError::from)?;
    let found: Option<ApiToken> = tx
        .get_token_by_fingerprint(&fp)
        .await
        .map_err(ApiError::from)?;
    drop(tx);
    match found {
        None => Err(unauthorized("unknown token")),
        Some(t) if t.revoked_at.is_some() => Err(unauthorized("this token has been revoked")),
        Some(t) => Ok(match t.kind {
            TokenKind::Operator => Principal::Operator {
                token_id: t.id,
                name: t.name,
            },
            TokenKind::Worker => Principal::Worker {
                token_id: t.id,
                host: t.host_name.unwrap_or_default(),
            },
        }),
    }
}

fn auth_header(parts: &Parts) -> Option<&str> {
    parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
}

/// Extractor for operator endpoints.
pub struct Operator(pub Principal);

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match authenticate(state, auth_header(parts)).await? {
            p @ Principal::Operator { .. } => Ok(Operator(p)),
            Principal::Worker { .. } => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "worker tokens may only call the worker endpoints",
            )),
        }
    }
}

/// Extractor for worker endpoints: the host name the token is bound to.
pub struct Worker {
    pub host: String,
}

impl FromRequestParts<AppState> for Worker {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match authenticate(state, auth_header(parts)).await? {
            Principal::Worker { host, .. } => Ok(Worker { host }),
            Principal::Operator { .. } => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "this endpoint is for worker tokens (pamctl token create --worker HOST)",
            )),
        }
    }
}

/// The admin token file in the data dir (mode 0600): written on pamd's
/// first start so a local pamctl works without configuration.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

/// Makes sure `<data_dir>/admin.token` holds a live operator token: reuses
/// the file's token when the database knows it, else creates a new `admin`
/// token (revoking an older live `admin` whose token was lost) and writes
/// it with mode 0600. The token itself is never logged.
pub async fn ensure_admin_token(
    ctx: &crate::reconcile::Ctx,
    data_dir: &std::path::Path,
) -> anyhow::Result<std::path::PathBuf> {
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    if let Ok(text) = std::fs::read_to_string(&path) {
        let fp = fingerprint(text.trim());
        if let Some(t) = tx.get_token_by_fingerprint(&fp).await? {
            if t.revoked_at.is_none() && t.kind == TokenKind::Operator {
                return Ok(path);
            }
        }
    }
    for t in tx.list_tokens().await? {
        if t.kind == TokenKind::Operator && t.name == "admin" && t.revoked_at.is_none() {
            tx.revoke_token(t.id, now).await?;
        }
    }
    let (_, token) =
        insert_new_token(&mut *tx, TokenKind::Operator, "admin".into(), None, now).await?;
    write_secret_file(&path, &format!("{token}\n"))?;
    // Commit only once the file is in place: a crash in between leaves an
    // unused row, never a file whose token the database does not know.
    ctx.commit(tx).await?;
    tracing::info!(path = %path.display(), "wrote a new admin token");
    Ok(path)
}

/// Writes a secret (a token) to `path` atomically with mode 0600: a temp
/// file created exclusively next to it, synced, then renamed into place, so
/// a reader never sees a partial token and no other user can read it.
pub fn write_secret_file(path: &std::path::Path, contents: &str) -> anyhow::Result<()> {
    use anyhow::Context as _;
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let dir = path.parent().context("a secret file needs a directory")?;
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let name = path.file_name().context("a secret file needs a name")?;
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("write {}", tmp.display()))?;
    f.write_all(contents.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
        .with_context(|| format!("rename {} to {}", tmp.display(), path.display()))?;
    Ok(())
}
