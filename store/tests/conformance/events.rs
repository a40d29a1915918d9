//! Conformance: events.

use super::*;

pub async fn events_append_after_bounds_purge(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.event_bounds().await.unwrap(), None);
    let before = tx.event_high_water().await.unwrap();
    let mut seqs = Vec::new();
    for i in 0..5 {
        let e = tx
            .append_event("run.created", json!({ "i": i }), t(i))
            .await
            .unwrap();
        assert_eq!(e.topic, "run.created");
        assert_eq!(e.payload, json!({ "i": i }));
        assert_eq!(e.created_at, t(i));
        seqs.push(e.seq);
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert!(seqs[0] > before, "{before} {seqs:?}");
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let all = tx.events_after(0, 100).await.unwrap();
    assert_eq!(ids_i64(&all), seqs);
    assert_eq!(
        ids_i64(&tx.events_after(seqs[1], 2).await.unwrap()),
        &seqs[2..4]
    );
    assert!(tx.events_after(seqs[4], 10).await.unwrap().is_empty());
    assert_eq!(tx.event_bounds().await.unwrap(), Some((seqs[0], seqs[4])));
    assert_eq!(tx.purge_events_before(t(2)).await.unwrap(), 2);
    assert_eq!(tx.event_bounds().await.unwrap(), Some((seqs[2], seqs[4])));
    assert_eq!(ids_i64(&tx.events_after(0, 100).await.unwrap()), &seqs[2..]);
    assert_eq!(tx.purge_events_before(t(100)).await.unwrap(), 3);
    assert_eq!(tx.event_bounds().await.unwrap(), None);
    // The high-water mark outlives the purge.
    assert_eq!(tx.event_high_water().await.unwrap(), seqs[4]);
    tx.commit().await.unwrap();

    // Seqs keep increasing after a purge.
    let mut tx = s.begin().await.unwrap();
    let e = tx.append_event("x", json!({}), t(200)).await.unwrap();
    assert!(e.seq > seqs[4]);
}

/// `run_events_of_topic`: the events of one topic naming one of the runs
/// (`payload.run_id`), in seq order.
pub async fn run_events_of_topic_filters(s: &dyn Store) {
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    let mut tx = s.begin().await.unwrap();
    let mut want = Vec::new();
    for (topic, run) in [
        ("run.signal_received", a),
        ("run.started", a),
        ("run.signal_received", b),
        ("run.signal_received", c),
        ("run.signal_received", a),
    ] {
        let e = tx
            .append_event(topic, json!({"run_id": run, "signal": "INT"}), t(2))
            .await
            .unwrap();
        if topic == "run.signal_received" && run != c {
            want.push(e.seq);
        }
    }
    tx.append_event("run.signal_received", json!({}), t(2))
        .await
        .unwrap();
    let got: Vec<i64> = tx
        .run_events_of_topic("run.signal_received", &[b, a])
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(got, want);
    assert!(tx
        .run_events_of_topic("run.signal_received", &[])
        .await
        .unwrap()
        .is_empty());
}

pub async fn append_events_batch(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    assert!(tx.append_events(Vec::new(), t(0)).await.unwrap().is_empty());
    let first = tx.append_event("a", json!({"i": -1}), t(0)).await.unwrap();
    let batch: Vec<(&'static str, serde_json::Value)> = (0..7)
        .map(|i| (if i % 2 == 0 { "even" } else { "odd" }, json!({ "i": i })))
        .collect();
    let evs = tx.append_events(batch.clone(), t(1)).await.unwrap();
    assert_eq!(evs.len(), 7);
    for (e, (topic, payload)) in evs.iter().zip(&batch) {
        assert_eq!((e.topic.as_str(), &e.payload), (*topic, payload));
        assert_eq!(e.created_at, t(1));
    }
    assert!(first.seq < evs[0].seq);
    assert!(evs.windows(2).all(|w| w[0].seq < w[1].seq));
    let committed = tx.commit().await.unwrap().to_vec();
    assert_eq!(committed.len(), 8, "commit returns every appended event");
    assert_eq!(ids_i64(&committed[1..]), ids_i64(&evs));
    assert_eq!(committed[1..], evs[..], "payloads come back as appended");
    let mut tx = s.begin().await.unwrap();
    assert_eq!(
        ids_i64(&tx.events_after(first.seq, 100).await.unwrap()),
        ids_i64(&evs)
    );
}

pub(crate) fn ids_i64(v: &[Event]) -> Vec<i64> {
    v.iter().map(|e| e.seq).collect()
}

pub async fn events_commit_returns_and_rollback_discards(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let a = tx.append_event("a", json!({"n": 1}), t(1)).await.unwrap();
    let b = tx.append_event("b", json!({"n": 2}), t(2)).await.unwrap();
    let published = tx.commit().await.unwrap();
    assert_eq!(published, vec![a.clone(), b.clone()]);

    // A transaction without events returns none.
    let tx = s.begin().await.unwrap();
    assert!(tx.commit().await.unwrap().is_empty());

    let mut tx = s.begin().await.unwrap();
    let dropped = tx.append_event("c", json!({}), t(3)).await.unwrap();
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    assert_eq!(tx.events_after(0, 10).await.unwrap(), vec![a, b.clone()]);
    let d = tx.append_event("d", json!({}), t(4)).await.unwrap();
    assert!(d.seq > b.seq && d.seq > dropped.seq, "seqs never go back");
    assert_eq!(tx.commit().await.unwrap(), vec![d]);
}

/// `run_events`: one run's timeline (every topic, every attempt), after a
/// seq, at most a limit, in seq order.
pub async fn run_events_timeline(s: &dyn Store) {
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let mut tx = s.begin().await.unwrap();
    let mut of_a = Vec::new();
    for (i, (topic, run)) in [
        ("run.created", a),
        ("run.created", b),
        ("run.spawning", a),
        ("work_item.created", Uuid::nil()),
        ("run.started", a),
        ("run.started", b),
    ]
    .into_iter()
    .enumerate()
    {
        let e = tx
            .append_event(
                topic,
                json!({ "run_id": run.to_string(), "attempt": i }),
                t(1),
            )
            .await
            .unwrap();
        if run == a {
            of_a.push(e.seq);
        }
    }
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    assert_eq!(ids_i64(&tx.run_events(a, 0, 100).await.unwrap()), of_a);
    assert_eq!(
        ids_i64(&tx.run_events(a, of_a[0], 100).await.unwrap()),
        &of_a[1..]
    );
    assert_eq!(ids_i64(&tx.run_events(a, 0, 2).await.unwrap()), &of_a[..2]);
    assert!(tx
        .run_events(Uuid::new_v4(), 0, 100)
        .await
        .unwrap()
        .is_empty());
}

/// `sessions_journaled`: the given sessions an event of the topic already
/// names for this host, and only this host's.
pub async fn sessions_journaled_names_this_hosts_sessions(s: &dyn Store) {
    let (h1, h2) = (Uuid::new_v4(), Uuid::new_v4());
    let mut tx = s.begin().await.unwrap();
    for (topic, host, session) in [
        ("run.orphan_detected", h1, "pam-0000000a"),
        ("run.orphan_detected", h1, "pam-0000000a"),
        ("run.orphan_detected", h2, "pam-0000000b"),
        ("run.started", h1, "pam-0000000c"),
    ] {
        tx.append_event(
            topic,
            json!({ "host_id": host, "session_name": session }),
            t(1),
        )
        .await
        .unwrap();
    }
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let ask: Vec<String> = ["pam-0000000a", "pam-0000000b", "pam-0000000c"]
        .map(String::from)
        .to_vec();
    let found = tx
        .sessions_journaled("run.orphan_detected", h1, &ask)
        .await
        .unwrap();
    assert_eq!(found, vec!["pam-0000000a".to_string()]);
    assert!(tx
        .sessions_journaled("run.orphan_detected", h1, &[])
        .await
        .unwrap()
        .is_empty());
}

/// Waits until no committed event waits behind a transaction in flight:
/// on PostgreSQL the horizon is the whole cluster's, and other tests'
/// transactions (other databases) hold it back for a moment.
async fn settled(s: &dyn Store) {
    for _ in 0..1000 {
        if !s.read_journal(Position::START, 0).await.unwrap().held {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("the journal's horizon stayed behind for 10 s");
}

/// The journal as followers read it — the events of finished
/// transactions in (xid, seq) order, never a transaction's own before it
/// ends, never a rolled-back one; positions looked up by seq.
pub async fn journal_follows_finished_transactions(s: &dyn Store) {
    let mut tx = s.begin().await.unwrap();
    let start = tx.journal_end().await.unwrap();
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    let a = tx.append_event("a", json!({}), t(1)).await.unwrap();
    let b = tx.append_event("b", json!({}), t(1)).await.unwrap();
    assert_eq!(a.xid, b.xid, "one transaction, one xid");
    tx.commit().await.unwrap();
    // A rolled-back transaction leaves a gap in the seqs.
    let mut tx = s.begin().await.unwrap();
    let gone = tx.append_event("gone", json!({}), t(2)).await.unwrap();
    drop(tx);
    settled(s).await;
    let mut tx = s.begin().await.unwrap();
    let own = tx.append_event("own", json!({}), t(3)).await.unwrap();
    let own2 = tx.append_event("own2", json!({}), t(3)).await.unwrap();
    // Its own events are not journal until it ends.
    assert_eq!(
        ids_i64(&tx.journal_after(start, 100).await.unwrap()),
        [a.seq, b.seq]
    );
    assert_eq!(tx.journal_end().await.unwrap(), b.position());
    assert_eq!(tx.journal_position(b.seq).await.unwrap(), b.position());
    // A seq never committed stands for the event below it.
    assert_eq!(tx.journal_position(gone.seq).await.unwrap(), b.position());
    assert_eq!(tx.journal_position(0).await.unwrap(), Position::START);
    tx.commit().await.unwrap();
    settled(s).await;
    let mut tx = s.begin().await.unwrap();
    let all = [a.seq, b.seq, own.seq, own2.seq];
    assert_eq!(ids_i64(&tx.journal_after(start, 100).await.unwrap()), all);
    assert_eq!(
        ids_i64(&tx.journal_after(a.position(), 2).await.unwrap()),
        [b.seq, own.seq]
    );
    assert!(b.position() < own.position());
    assert_eq!(tx.journal_end().await.unwrap(), own2.position());
    assert!(!tx.journal_held().await.unwrap());
    drop(tx);
    let page = s.read_journal(start, 100).await.unwrap();
    assert_eq!(ids_i64(&page.events), all);
    assert!(!page.held);
    assert_eq!(
        ids_i64(&s.read_journal(b.position(), 1).await.unwrap().events),
        [own.seq]
    );
}

/// Events journaled inside [`pam_store::events::as_actor`] carry
/// its `actor` (one place for every rule's events), whether appended one
/// by one or in bulk; outside it, none; a payload's own `actor` is kept.
pub async fn events_carry_the_actor_of_their_request(s: &dyn Store) {
    let actor = json!({"name": "ci", "role": "operator"});
    let seqs = pam_store::events::as_actor(actor.clone(), async {
        let mut tx = s.begin().await.unwrap();
        let one = tx
            .append_event("run.created", json!({"name": "a"}), t(1))
            .await
            .unwrap();
        let bulk = tx
            .append_events(
                vec![
                    ("run.created", json!({"name": "b"})),
                    ("run.created", json!({"name": "c", "actor": "own"})),
                ],
                t(1),
            )
            .await
            .unwrap();
        tx.commit().await.unwrap();
        (one.seq, bulk[0].seq, bulk[1].seq)
    })
    .await;
    let mut tx = s.begin().await.unwrap();
    let loop_made = tx
        .append_event("run.created", json!({"name": "d"}), t(2))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let all = tx.events_after(0, 100).await.unwrap();
    let payload = |seq: i64| all.iter().find(|e| e.seq == seq).unwrap().payload.clone();
    assert_eq!(payload(seqs.0)["actor"], actor);
    assert_eq!(payload(seqs.1)["actor"], actor);
    assert_eq!(payload(seqs.2)["actor"], "own");
    assert!(payload(loop_made.seq).get("actor").is_none());
}
