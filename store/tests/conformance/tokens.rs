//! Conformance: tokens.

use super::*;

pub async fn tokens_insert_lookup_revoke(s: &dyn Store) {
    let op = token("admin", TokenKind::Operator, "fp-op", 2);
    let wk = token("h1", TokenKind::Worker, "fp-wk", 1);
    let mut tx = s.begin().await.unwrap();
    tx.insert_token(&op).await.unwrap();
    tx.insert_token(&wk).await.unwrap();
    // The re-check of held tokens, set-based.
    let gone = Uuid::new_v4();
    assert_eq!(tx.dead_tokens(&[op.id, wk.id, gone]).await.unwrap(), [gone]);
    assert!(tx.revoke_token(wk.id, t(1)).await.unwrap());
    let mut dead = tx.dead_tokens(&[op.id, wk.id, gone]).await.unwrap();
    dead.sort();
    let mut want = vec![wk.id, gone];
    want.sort();
    assert_eq!(dead, want);
    assert!(tx.dead_tokens(&[]).await.unwrap().is_empty());
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    tx.insert_token(&op).await.unwrap();
    tx.insert_token(&wk).await.unwrap();
    assert_err!(
        tx.insert_token(&token("other", TokenKind::Operator, "fp-op", 3))
            .await,
        StoreError::AlreadyExists(_)
    );
    assert_err!(
        tx.insert_token(&token("admin", TokenKind::Operator, "fp-2", 3))
            .await,
        StoreError::AlreadyExists(_)
    );
    let mut hostless = token("w", TokenKind::Worker, "fp-3", 3);
    hostless.host_name = None;
    assert_err!(tx.insert_token(&hostless).await, StoreError::Invalid(_));
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        tx.get_token_by_fingerprint("fp-op").await.unwrap(),
        Some(op.clone())
    );
    assert_eq!(tx.get_token_by_fingerprint("nope").await.unwrap(), None);
    assert_eq!(
        tx.list_tokens().await.unwrap(),
        vec![wk.clone(), op.clone()]
    );
    assert!(tx.revoke_token(op.id, t(9)).await.unwrap());
    assert!(!tx.revoke_token(op.id, t(10)).await.unwrap());
    assert!(!tx.revoke_token(Uuid::new_v4(), t(10)).await.unwrap());
    // A revoked operator token frees its name.
    tx.insert_token(&token("admin", TokenKind::Operator, "fp-new", 11))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let got = tx.get_token_by_fingerprint("fp-op").await.unwrap().unwrap();
    assert_eq!(got.revoked_at, Some(t(9)), "revoked tokens are still found");
    drop(tx);
    // The same lookup outside a transaction sees what was committed.
    assert_eq!(s.token_by_fingerprint("fp-op").await.unwrap(), Some(got));
    assert_eq!(
        s.token_by_fingerprint("fp-wk").await.unwrap(),
        Some(wk.clone())
    );
    assert_eq!(s.token_by_fingerprint("nope").await.unwrap(), None);
    // Many at once: those found (a revoked one too), unknown ones left out.
    let fps = ["fp-wk", "nope", "fp-op"].map(String::from);
    let mut many = s.tokens_by_fingerprints(&fps).await.unwrap();
    many.sort_by(|a, b| a.fingerprint.cmp(&b.fingerprint));
    assert_eq!(
        many.iter()
            .map(|t| t.fingerprint.as_str())
            .collect::<Vec<_>>(),
        ["fp-op", "fp-wk"]
    );
    assert!(s.tokens_by_fingerprints(&[]).await.unwrap().is_empty());
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.list_tokens().await.unwrap().len(), 3);
}

pub async fn tokens_touch_writes_at_most_once_per_window(s: &dyn Store) {
    let op = token("ops", TokenKind::Operator, "fp-touch", 1);
    let mut tx = s.begin().await.unwrap();
    tx.insert_token(&op).await.unwrap();
    let window = chrono::Duration::seconds(10);
    let touch = |id, at| [(id, t(at))];
    assert_eq!(
        tx.touch_tokens(&touch(op.id, 10), window).await.unwrap(),
        1,
        "never used"
    );
    assert_eq!(
        tx.touch_tokens(&touch(op.id, 20), window).await.unwrap(),
        0,
        "used at the window's start: not written"
    );
    assert_eq!(tx.touch_tokens(&touch(op.id, 80), window).await.unwrap(), 1);
    assert_eq!(
        tx.touch_tokens(&touch(Uuid::new_v4(), 80), window)
            .await
            .unwrap(),
        0
    );
    // Many in one statement: each by its own guard.
    let other = token("other", TokenKind::Worker, "fp-touch-2", 2);
    tx.insert_token(&other).await.unwrap();
    let uses = [(op.id, t(85)), (other.id, t(85)), (Uuid::new_v4(), t(85))];
    assert_eq!(
        tx.touch_tokens(&uses, window).await.unwrap(),
        1,
        "only other's"
    );
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let got = tx
        .get_token_by_fingerprint("fp-touch")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.last_used_at, Some(t(80)));
}

/// A token's role and projects are kept as written; a scoped
/// role without projects and a worker role on an operator token are
/// refused by both stores.
pub async fn tokens_keep_role_and_projects(s: &dyn Store) {
    let mut viewer = token("web-viewer", TokenKind::Operator, "fp-viewer", 1);
    viewer.role = Role::Viewer;
    viewer.projects = vec!["web".into(), "api".into()];
    let mut tx = s.begin().await.unwrap();
    tx.insert_token(&viewer).await.unwrap();
    let mut unscoped = token("nowhere", TokenKind::Operator, "fp-nowhere", 2);
    unscoped.role = Role::Operator;
    assert_err!(tx.insert_token(&unscoped).await, StoreError::Invalid(_));
    let mut odd = token("odd", TokenKind::Operator, "fp-odd", 2);
    odd.role = Role::Worker;
    assert_err!(tx.insert_token(&odd).await, StoreError::Invalid(_));
    tx.commit().await.unwrap();
    assert_eq!(
        s.token_by_fingerprint("fp-viewer").await.unwrap(),
        Some(viewer.clone())
    );
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.list_tokens().await.unwrap(), vec![viewer]);
}

/// A token bound to a custom role keeps the Role's name (its
/// rules are pamd's to resolve) and names no projects of its own; an
/// operator or viewer token still needs some.
pub async fn custom_role_token_round_trips(s: &dyn Store) {
    let mut custom = token("ci-reader", TokenKind::Operator, "fp-custom", 1);
    custom.role = Role::named("run-reader");
    custom.projects = Vec::new();
    let mut viewer = token("v", TokenKind::Operator, "fp-viewer", 2);
    viewer.role = Role::Viewer;
    viewer.projects = Vec::new();
    let mut tx = s.begin().await.unwrap();
    tx.insert_token(&custom).await.unwrap();
    assert_err!(tx.insert_token(&viewer).await, StoreError::Invalid(_));
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let got = tx
        .get_token_by_fingerprint("fp-custom")
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(&got.role, Role::Custom(c) if c.name == "run-reader" && c.rules.is_empty()));
    assert_eq!(got, custom);
}
