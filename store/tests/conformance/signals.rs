//! Conformance: signal ingest's primitives — progress ordering and the
//! one-shot markers of processed_signals.

use super::*;

pub async fn advance_progress_monotonic(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let r = run(&task, "r", t(1));
    insert_runs(s, std::slice::from_ref(&r)).await;
    let mut tx = s.begin().await.unwrap();
    assert!(tx.advance_progress(r.id, 1, 5).await.unwrap());
    assert!(!tx.advance_progress(r.id, 1, 5).await.unwrap());
    assert!(!tx.advance_progress(r.id, 1, 3).await.unwrap());
    assert!(!tx.advance_progress(r.id, 2, 100).await.unwrap(), "attempt");
    assert!(!tx.advance_progress(r.id, 0, 100).await.unwrap(), "attempt");
    assert!(tx.advance_progress(r.id, 1, 6).await.unwrap());
    assert_err!(
        tx.advance_progress(Uuid::new_v4(), 1, 1).await,
        StoreError::NotFound(_)
    );
    tx.commit().await.unwrap();
    assert_eq!(get_run(s, r.id).await.last_progress_seq, Some(6));
}

pub(crate) fn marker(run_id: Uuid, attempt: i32, kind: &str) -> SignalMarker {
    SignalMarker {
        run_id,
        attempt,
        kind: kind.into(),
    }
}

/// Signal ingest's batch primitives: the locked read of runs and their
/// markers, the bulk marker insert (exactly once per (run, attempt, kind)),
/// and the all-or-nothing guarded write of run state.
pub async fn signal_batch_primitives(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (r, r2) = (run(&task, "r", t(1)), run(&task, "r2", t(1)));
    insert_runs(s, &[r.clone(), r2.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    let (runs, markers) = tx.lock_runs_with_signals(&[]).await.unwrap();
    assert!(runs.is_empty() && markers.is_empty());
    // The existing runs of the ids, in id order; unknown ids are skipped.
    let (got, markers) = tx
        .lock_runs_with_signals(&[r2.id, Uuid::new_v4(), r.id])
        .await
        .unwrap();
    let mut want = vec![
        tx.get_run(r.id).await.unwrap().unwrap(),
        tx.get_run(r2.id).await.unwrap().unwrap(),
    ];
    want.sort_by_key(|x| x.id);
    assert_eq!(got, want);
    assert!(markers.is_empty());

    assert_eq!(tx.insert_signal_markers(&[], t(2)).await.unwrap(), 0);
    let first = [marker(r.id, 1, "started")];
    assert_eq!(tx.insert_signal_markers(&first, t(2)).await.unwrap(), 1);
    assert_eq!(tx.insert_signal_markers(&first, t(3)).await.unwrap(), 0);
    let more = [
        marker(r.id, 2, "started"),
        marker(r.id, 1, "finished"),
        marker(r2.id, 1, "started"),
        marker(r.id, 1, "started"),
    ];
    assert_eq!(tx.insert_signal_markers(&more, t(3)).await.unwrap(), 3);
    // An unknown run is NotFound, and the transaction stays usable.
    assert_err!(
        tx.insert_signal_markers(&[marker(Uuid::new_v4(), 1, "started")], t(4))
            .await,
        StoreError::NotFound(_)
    );
    assert_eq!(
        tx.insert_signal_markers(&[marker(r2.id, 1, "lost")], t(4))
            .await
            .unwrap(),
        1
    );
    tx.commit().await.unwrap();

    let mut tx = s.begin().await.unwrap();
    let (_, mut markers) = tx.lock_runs_with_signals(&[r.id]).await.unwrap();
    markers.sort();
    let mut want = vec![
        marker(r.id, 1, "started"),
        marker(r.id, 2, "started"),
        marker(r.id, 1, "finished"),
    ];
    want.sort();
    assert_eq!(markers, want);

    // write_run_states: every per-attempt column, guarded on the
    // resource_version read; one stale row means nothing is written.
    let cur = tx.get_run(r.id).await.unwrap().unwrap();
    let cur2 = tx.get_run(r2.id).await.unwrap().unwrap();
    let mut next = cur.clone();
    next.status = RunStatus::Failed;
    next.exit_code = Some(3);
    next.failure_reason = Some(FailureReason::SessionLost);
    next.failure_message = Some("session gone".into());
    next.started_at = Some(t(5));
    next.finished_at = Some(t(6));
    next.requeue_at = Some(t(7));
    next.last_progress_seq = Some(9);
    // Usage of the attempt and of all attempts.
    next.usage = pam_store::RunUsage {
        attempt: pam_store::Usage {
            input_tokens: 100,
            cached_input_tokens: 40,
            output_tokens: 7,
            cost_micro_usd: 12_345,
        },
        total: pam_store::Usage {
            input_tokens: 300,
            cached_input_tokens: 41,
            output_tokens: 9,
            cost_micro_usd: 99_999,
        },
    };
    next.updated_at = t(6);
    next.meta.resource_version = cur.meta.resource_version + 2;
    let mut next2 = cur2.clone();
    next2.last_progress_seq = Some(1);
    next2.meta.resource_version = cur2.meta.resource_version + 1;
    assert_err!(
        tx.write_run_states(&[
            (next.clone(), cur.meta.resource_version),
            (next2.clone(), cur2.meta.resource_version - 1),
        ])
        .await,
        StoreError::Conflict(_)
    );
    assert_eq!(tx.get_run(r.id).await.unwrap().unwrap(), cur);
    assert_eq!(tx.get_run(r2.id).await.unwrap().unwrap(), cur2);
    tx.write_run_states(&[
        (next.clone(), cur.meta.resource_version),
        (next2.clone(), cur2.meta.resource_version),
    ])
    .await
    .unwrap();
    tx.write_run_states(&[]).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(get_run(s, r.id).await, next);
    assert_eq!(get_run(s, r2.id).await, next2);
}

fn result_row(run_id: Uuid, attempt: i32, branch: &str, patch: &str) -> pam_store::RunResultRow {
    pam_store::RunResultRow {
        run_id,
        attempt,
        branch: branch.into(),
        base_commit: "a".repeat(40),
        head_commit: "b".repeat(40),
        commits: 1,
        files_changed: 2,
        insertions: 3,
        deletions: 4,
        patch: patch.into(),
        patch_bytes: 0,
        patch_truncated: attempt == 2,
        pushed: (attempt == 2).then_some(false),
        push_message: (attempt == 2).then(|| "rejected".to_string()),
        recorded_at: t(5),
    }
}

/// Workspace results per (run, attempt): the first one kept,
/// read whole or the latest per run without its patch (its size kept),
/// a missing run NotFound, gone with the run.
pub async fn run_results_per_attempt(s: &dyn Store) {
    let (_, task) = seed(s).await;
    let (r, r2) = (run(&task, "r", t(1)), run(&task, "r2", t(1)));
    insert_runs(s, &[r.clone(), r2.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    tx.insert_run_results(&[
        result_row(r.id, 1, "b1", "+one\n"),
        result_row(r.id, 2, "b2", "+two\n"),
        result_row(r2.id, 1, "c1", ""),
    ])
    .await
    .unwrap();
    // A result is recorded once: a second report keeps the first.
    tx.insert_run_results(&[result_row(r.id, 1, "other", "+x\n")])
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let all = tx.run_results(r.id, None).await.unwrap();
    let branches: Vec<&str> = all.iter().map(|x| x.branch.as_str()).collect();
    assert_eq!(branches, ["b1", "b2"]);
    assert_eq!(all[0].patch, "+one\n");
    assert_eq!(all[0].patch_bytes, 5);
    assert_eq!(all[0].recorded_at, t(5));
    assert_eq!(tx.run_results(r.id, Some(2)).await.unwrap()[0].branch, "b2");
    assert!(tx.run_results(r.id, Some(3)).await.unwrap().is_empty());
    let mut latest = tx.latest_run_results(&[r.id, r2.id]).await.unwrap();
    latest.sort_by(|a, b| a.branch.cmp(&b.branch));
    assert_eq!(latest.len(), 2);
    assert_eq!((latest[0].branch.as_str(), latest[0].attempt), ("b2", 2));
    assert!(latest[0].patch.is_empty() && latest[0].patch_truncated);
    assert_eq!(latest[0].pushed, Some(false));
    assert_eq!(latest[0].push_message.as_deref(), Some("rejected"));
    assert_eq!(
        (all[0].pushed, all[0].push_message.as_deref()),
        (None, None)
    );
    assert_eq!(latest[0].patch_bytes, 5);
    assert_eq!(latest[1].branch, "c1");
    assert!(tx.latest_run_results(&[]).await.unwrap().is_empty());
    assert_err!(
        tx.insert_run_results(&[result_row(Uuid::new_v4(), 1, "x", "")])
            .await,
        StoreError::NotFound(_)
    );
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    assert!(tx.delete_run(r.id).await.unwrap());
    assert!(tx.run_results(r.id, None).await.unwrap().is_empty());
    tx.commit().await.unwrap();
}

/// What an agent did: each attempt keeps its newest activity items (in
/// order, appends of one attempt merged), a missing run is NotFound, gone
/// with the run; the run's own activity columns (permissions, session id,
/// last activity, denials) round-trip, and the restart requeue clears the
/// per-attempt ones.
pub async fn run_activity_per_attempt(s: &dyn Store) {
    use pam_manifests::kinds::{
        EffectivePermissions, PermissionMode, Permissions, PermissionsFrom,
    };
    use pam_manifests::protocol::{Entry, EntryKind, ACTIVITY_KEPT};
    use pam_store::ActivityAppend;
    let item = |n: usize| {
        let mut e = Entry::new(EntryKind::ToolCall);
        e.tool = Some("Write".into());
        e.target = Some(format!("f{n}.txt"));
        e.at = Some(format!("2025-01-01T00:00:{:02}Z", n % 60));
        e
    };
    let (_, task) = seed(s).await;
    let mut r = run(&task, "r", t(1));
    r.permissions = Some(EffectivePermissions {
        permissions: Permissions {
            mode: PermissionMode::ReadOnly,
            allow_tools: vec!["Bash(ls:*)".into()],
            deny_tools: vec![],
        },
        from: PermissionsFrom::Task,
    });
    insert_runs(s, &[r.clone()]).await;
    let mut tx = s.begin().await.unwrap();
    let append = |attempt: i32, from: usize, to: usize| ActivityAppend {
        run_id: r.id,
        attempt,
        items: (from..to).map(item).collect(),
    };
    tx.append_run_activity(&[append(1, 0, 5), append(2, 100, 101)], t(2))
        .await
        .unwrap();
    // Two appends of one attempt in one call, past the limit.
    tx.append_run_activity(&[append(1, 5, 15), append(1, 15, 30)], t(3))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut tx = s.begin().await.unwrap();
    let first = tx.run_activity(r.id, 1).await.unwrap();
    assert_eq!(first.len(), ACTIVITY_KEPT);
    assert_eq!(first[0], item(30 - ACTIVITY_KEPT));
    assert_eq!(first.last().unwrap(), &item(29));
    assert_eq!(tx.run_activity(r.id, 2).await.unwrap(), [item(100)]);
    assert!(tx.run_activity(r.id, 3).await.unwrap().is_empty());
    assert_err!(
        tx.append_run_activity(
            &[ActivityAppend {
                run_id: Uuid::new_v4(),
                ..append(1, 0, 1)
            }],
            t(4)
        )
        .await,
        StoreError::NotFound(_)
    );
    drop(tx);
    let mut tx = s.begin().await.unwrap();
    let mut stored = tx.get_run(r.id).await.unwrap().unwrap();
    assert_eq!(stored.permissions, r.permissions);
    let rv = stored.meta.resource_version;
    let mut denied = Entry::new(EntryKind::Denied);
    denied.tool = Some("Write".into());
    denied.target = Some("hello.txt".into());
    assert!(stored.record_activity(
        &[item(1), denied.clone(), denied],
        Some("s-1"),
        "2025-01-01T00:00:09Z",
        t(5)
    ));
    tx.write_run_states(&[(stored.clone(), rv)]).await.unwrap();
    let back = tx.get_run(r.id).await.unwrap().unwrap();
    assert_eq!(back.session_id.as_deref(), Some("s-1"));
    assert_eq!(back.last_activity.as_ref().unwrap().kind, EntryKind::Denied);
    assert_eq!(
        back.last_activity.as_ref().unwrap().at.as_deref(),
        Some("2025-01-01T00:00:09Z")
    );
    let d = back.denials.clone().unwrap();
    assert_eq!((d.count, d.items.len(), d.since), (2, 1, t(5)));
    // The per-attempt columns go with the attempt.
    let running = tx
        .transition_run(
            r.id,
            1,
            RunStatus::Pending,
            RunStatus::Failed,
            &RunUpdate::default(),
            t(6),
        )
        .await
        .unwrap();
    let requeued = tx.requeue_run(r.id, running.attempt, t(7)).await.unwrap();
    assert_eq!(
        (
            requeued.session_id,
            requeued.last_activity,
            requeued.denials
        ),
        (None, None, None)
    );
    assert_eq!(requeued.permissions, r.permissions);
    assert!(tx.delete_run(r.id).await.unwrap());
    assert!(tx.run_activity(r.id, 1).await.unwrap().is_empty());
    tx.commit().await.unwrap();
}
