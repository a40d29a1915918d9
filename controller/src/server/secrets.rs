//! The secret files pamd keeps in its data dir: the admin token (so a local
//! pamctl works without configuration) and, with `--local-worker`, the
//! local worker's token. Written atomically with mode 0600; the tokens
//! themselves are never logged.
//!
//! # Guarantees
//! - A secret file pamd finds at start that other users may read (group or
//!   other bits set, e.g. 0644 after a restore or a hand copy) is made 0600
//!   and a warning names it and its old mode ([`make_private`]): pamd owns
//!   these files, so it repairs them rather than refusing to start (and
//!   with it the fleet). When it cannot (not the owner, a read-only
//!   file system) it refuses to start, saying which file and what to run.
//!   The token is kept: rotate it by deleting the file and restarting pamd.
//! - A path that is not a regular file (a directory, a FIFO) is refused,
//!   never read.

use std::os::unix::fs::PermissionsExt as _;

use pam_store::TokenKind;

use crate::ctx::Ctx;
use crate::rules::tokens;

/// The admin token file in the data dir (mode 0600): written on pamd's
/// first start so a local pamctl works without configuration.
pub const ADMIN_TOKEN_FILE: &str = "admin.token";

/// Makes sure `<data_dir>/admin.token` holds a live operator token named
/// `admin-<replica id>` ([`ensure_token_file`]): per replica, so pamd
/// replicas sharing a database never revoke each other's. A
/// new one also revokes a live token named plain `admin` (what pamd
/// before replicas named it), whose file is then lost.
pub async fn ensure_admin_token(
    ctx: &Ctx,
    data_dir: &std::path::Path,
) -> anyhow::Result<std::path::PathBuf> {
    let path = data_dir.join(ADMIN_TOKEN_FILE);
    let name = format!("admin-{}", super::leader::replica_id(data_dir)?);
    let wrote = ensure_token_file(ctx, &path, TokenKind::Operator, &name, None).await?;
    if wrote {
        let mut tx = ctx.store.begin().await?;
        tokens::revoke_named(tx.as_mut(), TokenKind::Operator, "admin", ctx.now()).await?;
        ctx.commit(tx).await?;
    }
    if wrote {
        tracing::info!(path = %path.display(), "wrote a new admin token");
    }
    Ok(path)
}

/// The operator token named `admin` whose value is in `path` (`[api]
/// admin_token_file`: a file pamd only reads, e.g. a Kubernetes Secret):
/// every replica reading the same file keeps one token, where
/// [`ensure_admin_token`] mints one per replica id — and a pod's
/// replica id dies with its `emptyDir`. A token not yet known is
/// recorded (its fingerprint only) and the other live `admin` tokens are
/// revoked: the file was rotated. The file must be a regular file that
/// other users cannot read, holding an operator token (`pam_` and at
/// least 32 more letters or digits, e.g. `pamctl`'s own format); the
/// token is never logged or echoed.
pub async fn admin_token_from_file(ctx: &Ctx, path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let meta = std::fs::metadata(path).with_context(|| format!("read {}", path.display()))?;
    anyhow::ensure!(meta.is_file(), "{} is not a regular file", path.display());
    anyhow::ensure!(
        meta.permissions().mode() & 0o004 == 0,
        "{} is readable by every user (mode {:04o}): make it 0600 or 0440",
        path.display(),
        meta.permissions().mode() & 0o7777
    );
    let text = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    let token = text.trim();
    let well_formed = tokens::well_formed(TokenKind::Operator, token);
    anyhow::ensure!(
        well_formed,
        "{} does not hold an operator token: expected `pam_` and at least 32 letters or digits \
         (make one with: printf 'pam_%s\\n' \"$(head -c32 /dev/urandom | od -An -tx1 | tr -d ' \\n')\")",
        path.display()
    );
    let fingerprint = tokens::fingerprint(token);
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    if let Some(t) = tx.get_token_by_fingerprint(&fingerprint).await? {
        anyhow::ensure!(
            t.kind == TokenKind::Operator && t.revoked_at.is_none(),
            "{}'s token is a revoked or worker token: put a new one in the file",
            path.display()
        );
        return Ok(());
    }
    tokens::revoke_named(tx.as_mut(), TokenKind::Operator, "admin", now).await?;
    let recorded = tokens::record(
        tx.as_mut(),
        TokenKind::Operator,
        "admin".into(),
        None,
        fingerprint,
        now,
    )
    .await;
    match recorded {
        // Another replica reading the same file recorded it first.
        Err(pam_store::StoreError::AlreadyExists(_)) => return Ok(()),
        r => {
            r?;
        }
    }
    ctx.commit(tx).await?;
    tracing::info!(path = %path.display(), "recorded the admin token of the file");
    Ok(())
}

/// Makes sure the file at `path` holds a live token of this kind (and, for
/// a worker token, this host): reuses the file's token when the database
/// knows it, else mints a new one named `name` — revoking older live tokens
/// of that name and kind, whose token was lost with the file — and writes
/// it with mode 0600. Returns whether it wrote a new token. The token
/// itself is never logged.
pub async fn ensure_token_file(
    ctx: &Ctx,
    path: &std::path::Path,
    kind: TokenKind,
    name: &str,
    host: Option<&str>,
) -> anyhow::Result<bool> {
    make_private(path)?;
    let now = ctx.now();
    let mut tx = ctx.store.begin().await?;
    if let Ok(text) = std::fs::read_to_string(path) {
        let fp = tokens::fingerprint(text.trim());
        if let Some(t) = tx.get_token_by_fingerprint(&fp).await? {
            if t.revoked_at.is_none() && t.kind == kind && t.host_name.as_deref() == host {
                return Ok(false);
            }
        }
    }
    tokens::revoke_named(tx.as_mut(), kind, name, now).await?;
    let (_, token) = tokens::mint(
        tx.as_mut(),
        kind,
        name.to_string(),
        host.map(str::to_string),
        now,
    )
    .await?;
    write_secret_file(path, &format!("{token}\n"))?;
    // Commit only once the file is in place: a crash in between leaves an
    // unused row, never a file whose token the database does not know.
    ctx.commit(tx).await?;
    Ok(true)
}

/// Makes an existing secret file readable by its owner only (mode 0600),
/// warning when it was not; refuses what is not a regular file, and a mode
/// it cannot fix. A missing file is fine (it is written next).
pub fn make_private(path: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("inspect {}", path.display())),
    };
    anyhow::ensure!(
        meta.is_file(),
        "{} is not a regular file; remove it and start pamd again to write a new token there",
        path.display()
    );
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).with_context(|| {
        format!(
            "{} holds a token and has mode {mode:04o} (other users may read it), and pamd \
             cannot make it 0600; run `chmod 600 {}` (or delete the file to get a new \
             token) and start pamd again",
            path.display(),
            path.display()
        )
    })?;
    tracing::warn!(
        path = %path.display(),
        old_mode = %format!("{mode:04o}"),
        "a token file was readable by other users; its mode is now 0600 \
         (if others could have read it, rotate it: delete the file and restart pamd)"
    );
    Ok(())
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
