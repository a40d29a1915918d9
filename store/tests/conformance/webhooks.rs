//! Conformance: webhooks — the Webhook rows, the targets the
//! fan-out reads, and the delivery queue: seq order, guarded outcomes,
//! redelivery, counts, retention.

use super::*;
use pam_store::{Delivery, DeliveryFilter, DeliveryOutcome, DeliveryStatus, Webhook};

pub fn webhook(name: &str, projects: &[&str]) -> Webhook {
    Webhook {
        id: Uuid::new_v4(),
        name: name.to_string(),
        meta: Meta {
            spec: json!({"url": "http://127.0.0.1:9/h", "topics": ["run."], "projects": projects}),
            ..Meta::default()
        },
        created_at: t(0),
        updated_at: t(0),
    }
}

fn delivery(w: &Webhook, seq: i64, at: DateTime<Utc>) -> Delivery {
    Delivery {
        id: Uuid::new_v4(),
        webhook_id: w.id,
        event_seq: seq,
        topic: "run.created".into(),
        payload: json!({"seq": seq}),
        status: DeliveryStatus::Pending,
        attempts: 0,
        next_attempt_at: None,
        last_attempt_at: None,
        last_code: None,
        last_error: String::new(),
        created_at: at,
    }
}

pub async fn webhook_crud_targets_and_delivery_queue(s: &dyn Store) {
    let p = project("web");
    let (a, b) = (webhook("b-hook", &["web", "gone"]), webhook("a-hook", &[]));
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    tx.insert(&a).await.unwrap();
    tx.insert(&b).await.unwrap();
    assert_err!(
        tx.insert(&webhook("a-hook", &[])).await,
        StoreError::AlreadyExists(_)
    );
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let names = names_of(tx.list::<Webhook>(()).await, |w| &w.name);
    assert_eq!(names, ["a-hook", "b-hook"]);
    let by_id = tx.get::<Webhook>(a.id).await.unwrap().unwrap();
    assert_eq!((by_id.id, by_id.name.as_str()), (a.id, "b-hook"));
    assert!(tx.get::<Webhook>(Uuid::new_v4()).await.unwrap().is_none());
    // The targets resolve the project names that exist.
    let targets = tx.webhook_targets().await.unwrap();
    assert_eq!(targets.len(), 2);
    assert_eq!(targets[0].0.name, "a-hook");
    assert!(targets[0].1.is_empty());
    assert_eq!(targets[1].1, vec![p.id]);
    // Spec writes are guarded by resource_version.
    let mut got = tx.by_name::<Webhook>((), "b-hook").await.unwrap().unwrap();
    got.meta.generation = 2;
    let updated = tx.update(&got, 1).await.unwrap();
    assert_eq!(updated.meta.resource_version, 2);
    assert_err!(tx.update(&got, 1).await, StoreError::Conflict(_));

    // The queue: one row per (webhook, seq), read in seq order.
    let rows = [
        delivery(&a, 7, t(1)),
        delivery(&a, 5, t(1)),
        delivery(&b, 5, t(1)),
    ];
    tx.insert_deliveries(&rows).await.unwrap();
    tx.insert_deliveries(&[delivery(&a, 5, t(1))])
        .await
        .unwrap();
    let head = tx.pending_deliveries(a.id, 10).await.unwrap();
    let seqs: Vec<i64> = head.iter().map(|d| d.event_seq).collect();
    assert_eq!(seqs, [5, 7]);
    assert_eq!(head[0].id, rows[1].id, "the duplicate was skipped");
    assert_eq!(head[0].next_attempt_at, Some(t(1)));
    let mut due = tx.webhooks_due(t(1)).await.unwrap();
    due.sort();
    let mut both = vec![a.id, b.id];
    both.sort();
    assert_eq!(due, both);
    assert!(tx.webhooks_due(t(0)).await.unwrap().is_empty());

    // An attempt's outcome is guarded by the attempt count.
    let retry = DeliveryOutcome {
        status: DeliveryStatus::Pending,
        attempts: 1,
        next_attempt_at: Some(t(10)),
        at: t(2),
        code: Some(500),
        error: "HTTP 500".into(),
    };
    let d = tx.record_delivery(rows[1].id, &retry).await.unwrap();
    assert_eq!((d.attempts, d.last_code), (1, Some(500)));
    assert_err!(
        tx.record_delivery(rows[1].id, &retry).await,
        StoreError::Conflict(_)
    );
    // Seq 5 waits for t(10); its webhook is still due for seq 7 (the
    // sender reads the head, in order, and finds it not due).
    assert_eq!(tx.webhooks_due(t(2)).await.unwrap().len(), 2);
    let done = DeliveryOutcome {
        status: DeliveryStatus::Delivered,
        attempts: 2,
        next_attempt_at: None,
        at: t(11),
        code: Some(204),
        error: String::new(),
    };
    tx.record_delivery(rows[1].id, &done).await.unwrap();
    let failed = DeliveryOutcome {
        status: DeliveryStatus::Failed,
        attempts: 1,
        next_attempt_at: None,
        at: t(11),
        code: None,
        error: "timed out".into(),
    };
    tx.record_delivery(rows[0].id, &failed).await.unwrap();
    assert!(tx.pending_deliveries(a.id, 10).await.unwrap().is_empty());
    let counts = tx.delivery_counts().await.unwrap();
    assert_eq!(counts.get(&a.id), Some(&(0, 1)));
    assert_eq!(counts.get(&b.id), Some(&(1, 0)));

    // Listing: newest first, filtered.
    let all = tx
        .list_deliveries(&DeliveryFilter {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    let seqs: Vec<i64> = all.iter().map(|d| d.event_seq).collect();
    assert_eq!(seqs, [7, 5, 5]);
    let failed_a = tx
        .list_deliveries(&DeliveryFilter {
            webhook_id: Some(a.id),
            status: Some(DeliveryStatus::Failed),
            limit: 10,
        })
        .await
        .unwrap();
    assert_eq!(failed_a.len(), 1);
    assert_eq!(failed_a[0].last_error, "timed out");

    // Redelivery queues it again, attempts kept.
    let again = tx.redeliver(rows[0].id, t(20)).await.unwrap();
    assert_eq!(again.status, DeliveryStatus::Pending);
    assert_eq!((again.attempts, again.next_attempt_at), (1, Some(t(20))));
    assert_err!(
        tx.redeliver(Uuid::new_v4(), t(20)).await,
        StoreError::NotFound(_)
    );

    // Retention takes finished deliveries only.
    assert_eq!(tx.purge_deliveries_before(t(5)).await.unwrap(), 1);
    assert!(tx.get_delivery(rows[1].id).await.unwrap().is_none());
    assert!(tx.get_delivery(rows[0].id).await.unwrap().is_some());

    // Deleting a webhook deletes its queue.
    assert!(tx.delete::<Webhook>(a.id).await.unwrap());
    assert!(tx.get_delivery(rows[0].id).await.unwrap().is_none());
    assert_err!(
        tx.insert_deliveries(&[delivery(&a, 9, t(1))]).await,
        StoreError::NotFound(_)
    );
    drop(tx);
}

pub async fn pending_events_are_the_transactions_own(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    assert!(tx.pending_events().is_empty());
    tx.append_event("project.created", json!({"n": 1}), t(1))
        .await
        .unwrap();
    tx.append_events(vec![("project.updated", json!({"n": 2}))], t(1))
        .await
        .unwrap();
    let topics: Vec<String> = tx.pending_events().iter().map(|e| e.topic).collect();
    assert_eq!(topics, ["project.created", "project.updated"]);
    let committed = tx.commit().await.unwrap();
    assert_eq!(committed.len(), 2);
}

pub async fn idempotency_keys_claim_answer_replay_and_expire(s: &dyn Store) {
    use pam_store::{Claimed, IdempotencyClaim};
    let claim = |hash: &str, now: i64| IdempotencyClaim {
        principal: "fp-1".into(),
        key_hash: "k-1".into(),
        request_hash: hash.into(),
        now: t(now),
        expires_at: t(now + 100),
        stale_before: t(now - 10),
    };
    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        tx.claim_idempotency_key(&claim("a", 0)).await.unwrap(),
        Claimed::New
    );
    // The same request while the first is in progress; another one.
    assert_eq!(
        tx.claim_idempotency_key(&claim("a", 1)).await.unwrap(),
        Claimed::InProgress
    );
    assert_eq!(
        tx.claim_idempotency_key(&claim("b", 1)).await.unwrap(),
        Claimed::Mismatch
    );
    // Another principal's key of the same name is its own.
    let mut other = claim("b", 1);
    other.principal = "fp-2".into();
    assert_eq!(
        tx.claim_idempotency_key(&other).await.unwrap(),
        Claimed::New
    );
    tx.answer_idempotency_key(
        "fp-1",
        "k-1",
        201,
        Some(b"{\"ok\":1}"),
        Some("application/json"),
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        tx.claim_idempotency_key(&claim("a", 2)).await.unwrap(),
        Claimed::Answered {
            status: 201,
            body: Some(b"{\"ok\":1}".to_vec()),
            content_type: Some("application/json".into()),
        }
    );
    // An abandoned claim (older than the lease) is taken over; a released
    // one is free again.
    assert_eq!(
        tx.claim_idempotency_key(&other).await.unwrap(),
        Claimed::InProgress
    );
    let mut later = other.clone();
    later.now = t(50);
    later.stale_before = t(40);
    later.expires_at = t(150);
    assert_eq!(
        tx.claim_idempotency_key(&later).await.unwrap(),
        Claimed::New
    );
    tx.release_idempotency_key("fp-2", "k-1").await.unwrap();
    assert_eq!(
        tx.claim_idempotency_key(&later).await.unwrap(),
        Claimed::New
    );
    // Past its expiry a key is new again, and retention deletes it.
    assert_eq!(
        tx.claim_idempotency_key(&claim("b", 100)).await.unwrap(),
        Claimed::New
    );
    assert_eq!(tx.purge_idempotency_keys(t(1000)).await.unwrap(), 2);
    assert_eq!(
        tx.claim_idempotency_key(&claim("c", 1000)).await.unwrap(),
        Claimed::New
    );
    drop(tx);
}
