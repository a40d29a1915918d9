//! Conformance: leader leases and the fence.

use super::*;

pub async fn leader_lease_take_renew_expire_and_fence(s: &dyn Store) {
    let ttl = Duration::seconds(10);
    let (a1, a2, b) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let lead = |holder: &'static str, instance: Uuid, at: i64| async move {
        let mut tx = s.begin().await.unwrap();
        let term = tx
            .lead("loops", holder, instance, ttl, t(at))
            .await
            .unwrap();
        tx.commit().await.unwrap();
        term
    };
    // First come; renewing keeps the term.
    assert_eq!(lead("a", a1, 0).await, Some(1));
    assert_eq!(lead("a", a1, 3).await, Some(1));
    // Another replica waits until it expires (renewed at 3: until 13).
    assert_eq!(lead("b", b, 12).await, None);
    let mut tx = s.begin().await.unwrap();
    let l = tx.get_lease("loops").await.unwrap().unwrap();
    assert_eq!((l.holder.as_str(), l.instance, l.term), ("a", a1, 1));
    assert_eq!((l.renewed_at, l.expires_at), (t(3), t(13)));
    tx.fence("loops", 1).await.unwrap();
    drop(tx);
    assert_eq!(lead("b", b, 13).await, Some(2), "expired: taken, new term");
    // The old leader can neither renew nor write.
    assert_eq!(lead("a", a1, 14).await, None);
    let mut tx = s.begin().await.unwrap();
    assert!(matches!(
        tx.fence("loops", 1).await,
        Err(StoreError::Fenced(_))
    ));
    tx.fence("loops", 2).await.unwrap();
    assert!(matches!(
        tx.fence("nope", 1).await,
        Err(StoreError::Fenced(_))
    ));
    drop(tx);
    // Resigning hands over at once.
    let mut tx = s.begin().await.unwrap();
    tx.resign("loops", a1, t(15)).await.unwrap(); // not the holder: nothing
    tx.resign("loops", b, t(15)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(lead("a", a1, 15).await, Some(3));
    // A new process of the same replica (a restart) takes over at once.
    assert_eq!(lead("a", a2, 16).await, Some(4));
    assert_eq!(lead("a", a1, 16).await, Some(5), "and so would the old one");
}
