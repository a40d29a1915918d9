//! Secrets: sealed rows per project, rotation reads, and the
//! runs waiting for a Secret that the claim skips.

use super::*;
use pam_store::Secret;

fn secret(p: &Project, name: &str, key_id: &str) -> Secret {
    Secret {
        id: Uuid::new_v4(),
        project_id: p.id,
        name: name.to_string(),
        meta: Meta {
            spec: json!({"keys": {"TOKEN": {"size": 3, "digest": "sha256:00"}}}),
            ..Meta::default()
        },
        salt: vec![1; 16],
        key_id: key_id.to_string(),
        nonce: vec![7; 12],
        ciphertext: vec![0, 1, 2, 255],
        created_at: t(0),
        updated_at: t(0),
    }
}

pub async fn secret_crud_unique_and_cascade(s: &dyn Store) {
    let (p, _) = seed(s).await;
    let q = project("other");
    let a = secret(&p, "keys", "k1");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&q).await.unwrap();
    tx.insert(&a).await.unwrap();
    // Same name in another project is fine; twice in one is not.
    tx.insert(&secret(&q, "keys", "k1")).await.unwrap();
    let dup = tx.insert(&secret(&p, "keys", "k1")).await;
    assert!(matches!(dup, Err(StoreError::AlreadyExists(_))), "{dup:?}");
    let orphan = tx.insert(&secret(&project("nowhere"), "x", "k1")).await;
    assert!(matches!(orphan, Err(StoreError::NotFound(_))), "{orphan:?}");
    tx.insert(&secret(&p, "alpha", "k2")).await.unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let got = tx.by_name::<Secret>(p.id, "keys").await.unwrap().unwrap();
    assert_eq!(got, a);
    assert_eq!(tx.get::<Secret>(a.id).await.unwrap(), Some(a.clone()));
    assert_eq!(tx.get::<Secret>(Uuid::new_v4()).await.unwrap(), None);
    let names = names_of(tx.list::<Secret>(p.id).await, |x| &x.name);
    assert_eq!(names, ["alpha", "keys"]);

    // Guarded update writes the sealed columns and bumps the version.
    let mut b = got.clone();
    b.key_id = "k2".into();
    b.ciphertext = vec![9; 40];
    b.nonce = vec![8; 12];
    b.updated_at = t(5);
    let stale = tx.update(&b, 99).await;
    assert!(matches!(stale, Err(StoreError::Conflict(_))), "{stale:?}");
    let b2 = tx.update(&b, 1).await.unwrap();
    assert_eq!(b2.meta.resource_version, 2);
    assert_eq!(b2.ciphertext, vec![9; 40]);
    assert_eq!(b2.created_at, t(0));
    assert_eq!(b2.updated_at, t(5));

    // Rotation reads: what another key still seals.
    let other = names_of(tx.secrets_sealed_with_other("k2", 10).await, |x| &x.name);
    assert_eq!(other, ["keys"], "only q's Secret is sealed with k1");
    assert!(tx.secrets_sealed_with("k1").await.unwrap());
    assert!(!tx.secrets_sealed_with("k9").await.unwrap());
    tx.commit().await.unwrap();

    // Deleting the project deletes its Secrets.
    let mut tx = s.begin().await.unwrap();
    assert!(tx.delete::<Secret>(b2.id).await.unwrap());
    assert!(!tx.delete::<Secret>(b2.id).await.unwrap());
    assert!(tx.delete::<Project>(q.id).await.unwrap());
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert!(tx.by_name::<Secret>(q.id, "keys").await.unwrap().is_none());
    assert_eq!(tx.list::<Secret>(p.id).await.unwrap().len(), 1);
}

pub async fn claim_skips_runs_waiting_for_a_secret(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let h = inserted_host(s, "h").await;
    let waiting = run(&task, "waiting", t(1));
    let free = run(&task, "free", t(2));
    insert_runs(s, &[waiting.clone(), free.clone()]).await;

    let mut tx = s.begin().await.unwrap();
    tx.set_run_secret_wait(waiting.id, Some("Secret \"keys\" missing"), t(3))
        .await
        .unwrap();
    // A second set keeps `since` and takes the new message.
    tx.set_run_secret_wait(waiting.id, Some("key \"TOKEN\" missing"), t(4))
        .await
        .unwrap();
    let gone = tx
        .set_run_secret_wait(Uuid::new_v4(), Some("m"), t(4))
        .await;
    assert!(matches!(gone, Err(StoreError::NotFound(_))), "{gone:?}");
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let waits = tx.run_secret_waits(None).await.unwrap();
    assert_eq!(waits.len(), 1);
    assert_eq!(waits[0].run_id, waiting.id);
    assert_eq!(waits[0].message, "key \"TOKEN\" missing");
    assert_eq!(waits[0].since, t(3));
    assert!(tx
        .run_secret_waits(Some(&[free.id]))
        .await
        .unwrap()
        .is_empty());
    // Neither claimed nor timed out while waiting.
    let pending: Vec<Uuid> = tx
        .list_pending_runs(10)
        .await
        .unwrap()
        .iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(pending, [free.id]);
    let claimed = tx.claim_runs(&h, 10, t(5)).await.unwrap();
    assert_eq!(claimed.iter().map(|r| r.id).collect::<Vec<_>>(), [free.id]);
    tx.set_run_secret_wait(waiting.id, None, t(6))
        .await
        .unwrap();
    // Released: its dispatch timeout counts from now (OQ-15).
    let released = tx.get_run(waiting.id).await.unwrap().unwrap();
    assert_eq!(released.dispatchable_since, Some(t(6)));
    // Clearing where there is no wait changes nothing.
    tx.set_run_secret_wait(free.id, None, t(7)).await.unwrap();
    let f = tx.get_run(free.id).await.unwrap().unwrap();
    assert_eq!(f.dispatchable_since, Some(t(2)));
    let claimed = tx.claim_runs(&h, 10, t(6)).await.unwrap();
    assert_eq!(
        claimed.iter().map(|r| r.id).collect::<Vec<_>>(),
        [waiting.id]
    );
    tx.commit().await.unwrap();

    // Deleting the run deletes its wait.
    let mut tx = s.begin().await.unwrap();
    tx.set_run_secret_wait(free.id, Some("m"), t(7))
        .await
        .unwrap();
    assert!(tx.delete_run(free.id).await.unwrap());
    assert!(tx.run_secret_waits(None).await.unwrap().is_empty());
}

/// The Secret loop's read: the pending runs whose spec reads a Secret, by
/// the same test in both stores (`pam_store::secrets::reads_secrets` and
/// its SQL form).
pub async fn pending_runs_reading_secrets(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let with = |name: &str, at: i64, spec: serde_json::Value| {
        let mut r = run(&task, name, t(at));
        r.meta.spec = spec;
        r
    };
    let key_ref = json!({"secretKeyRef": {"name": "keys", "key": "TOKEN"}});
    let runs = [
        with("plain", 1, json!({"prompt": "p"})),
        with("literal", 2, json!({"env": [{"name": "A", "value": "1"}]})),
        with(
            "value-from",
            3,
            json!({"env": [{"name": "A", "value": "1"}, {"name": "B", "valueFrom": key_ref}]}),
        ),
        with(
            "env-from",
            4,
            json!({"envFrom": [{"secretRef": {"name": "keys"}}]}),
        ),
        with("env-from-empty", 5, json!({"envFrom": []})),
        with(
            "waiting",
            6,
            json!({"envFrom": [{"secretRef": {"name": "gone"}}]}),
        ),
    ];
    insert_runs(s, &runs).await;
    let mut tx = s.begin().await.unwrap();
    tx.set_run_secret_wait(runs[5].id, Some("Secret \"gone\" missing"), t(7))
        .await
        .unwrap();
    let names = |v: Vec<Run>| v.into_iter().map(|r| r.name).collect::<Vec<_>>();
    assert_eq!(
        names(tx.list_pending_runs_reading_secrets(10).await.unwrap()),
        ["value-from", "env-from"],
        "a waiting run is the other loop's; literals and an empty envFrom read nothing"
    );
    assert_eq!(
        names(tx.list_pending_runs_reading_secrets(1).await.unwrap()),
        ["value-from"]
    );
    for r in &runs[..5] {
        assert_eq!(
            pam_store::secrets::reads_secrets(&r.meta.spec),
            ["value-from", "env-from"].contains(&r.name.as_str()),
            "{}",
            r.name
        );
    }
    tx.commit().await.unwrap();
}
