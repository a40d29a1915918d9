//! Conformance: attach leases and their input.

use super::*;

fn lease(run: &Run, holder: &str, ttl_secs: u64, at: i64, token: Option<Uuid>) -> AttachLease {
    AttachLease {
        id: Uuid::new_v4(),
        run_id: run.id,
        attempt: run.attempt,
        holder: holder.into(),
        ttl: std::time::Duration::from_secs(ttl_secs),
        token_id: token,
        acquired_at: t(at),
        expires_at: t(at + ttl_secs as i64),
    }
}

pub async fn attach_lease_one_holder_input_expiry_and_revocation(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let r = run(&task, "r1", t(0));
    insert_runs(s, std::slice::from_ref(&r)).await;
    let tok = token("alice", TokenKind::Operator, "fp-alice", 0);
    let mut tx = s.begin().await.unwrap();
    tx.insert_token(&tok).await.unwrap();
    let a = lease(&r, "alice", 10, 0, Some(tok.id));
    assert_eq!(tx.acquire_attach(&a, t(0)).await.unwrap(), Ok(None));
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    // Held: another holder is refused, naming the holder.
    match tx
        .acquire_attach(&lease(&r, "bob", 10, 5, None), t(5))
        .await
        .unwrap()
    {
        Err(AttachRefusal::Held(h)) => assert_eq!(h.holder, "alice"),
        other => panic!("{other:?}"),
    }
    // Renewing extends by the TTL from now; a wrong id is not held.
    let renewed = tx.renew_attach(r.id, a.id, t(9)).await.unwrap().unwrap();
    assert_eq!(renewed.expires_at, t(19));
    assert_eq!(
        tx.renew_attach(r.id, Uuid::new_v4(), t(9)).await.unwrap(),
        None
    );
    assert_eq!(tx.get_attach(r.id, t(18)).await.unwrap().unwrap().id, a.id);
    // Input under the lease, for its attempt, in order, handed out once.
    tx.push_attach_input(r.id, a.id, "one", 2, t(10))
        .await
        .unwrap()
        .unwrap();
    tx.push_attach_input(r.id, a.id, "two", 2, t(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        tx.push_attach_input(r.id, a.id, "three", 2, t(10))
            .await
            .unwrap(),
        Err(AttachRefusal::Backlog)
    );
    assert_eq!(
        tx.push_attach_input(r.id, Uuid::new_v4(), "x", 2, t(10))
            .await
            .unwrap(),
        Err(AttachRefusal::NotHeld)
    );
    assert!(tx
        .take_attach_input(&[(r.id, r.attempt + 1)])
        .await
        .unwrap()
        .is_empty());
    tx.push_attach_input(r.id, a.id, "four", 2, t(10))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        tx.take_attach_input(&[(r.id, r.attempt)]).await.unwrap()[&r.id],
        ["four"]
    );
    assert!(tx
        .take_attach_input(&[(r.id, r.attempt)])
        .await
        .unwrap()
        .is_empty());
    // Expiry: not before, then taken once; a new holder may acquire.
    assert!(tx.take_expired_attach(t(18)).await.unwrap().is_empty());
    let gone = tx.take_expired_attach(t(19)).await.unwrap();
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].id, a.id);
    assert_eq!(tx.renew_attach(r.id, a.id, t(19)).await.unwrap(), None);
    let b = lease(&r, "bob", 10, 20, Some(tok.id));
    assert_eq!(tx.acquire_attach(&b, t(20)).await.unwrap(), Ok(None));
    // An expired lease is replaced (and returned, to journal).
    let c = lease(&r, "carol", 10, 31, None);
    let replaced = tx.acquire_attach(&c, t(31)).await.unwrap().unwrap();
    assert_eq!(replaced.map(|l| l.id), Some(b.id));
    assert_eq!(tx.release_attach(r.id, b.id, t(32)).await.unwrap(), None);
    assert_eq!(
        tx.release_attach(r.id, c.id, t(32))
            .await
            .unwrap()
            .unwrap()
            .id,
        c.id
    );
    assert_eq!(tx.get_attach(r.id, t(32)).await.unwrap(), None);
    // Revoking the acquirer's token releases its lease.
    let d = lease(&r, "alice", 60, 40, Some(tok.id));
    tx.acquire_attach(&d, t(40)).await.unwrap().unwrap();
    assert!(tx.take_revoked_attach().await.unwrap().is_empty());
    tx.revoke_token(tok.id, t(41)).await.unwrap();
    let revoked = tx.take_revoked_attach().await.unwrap();
    assert_eq!(revoked.iter().map(|l| l.id).collect::<Vec<_>>(), [d.id]);
    assert_eq!(tx.get_attach(r.id, t(42)).await.unwrap(), None);
    tx.commit().await.unwrap();
}
