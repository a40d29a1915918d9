//! The Store behaviour suite: one `pub async fn` per behaviour, each taking
//! a fresh, empty store. `store_conformance_tests!`
//! turns the list into one `#[tokio::test]` per behaviour, so a failure
//! names the behaviour and (by test file) the store:
//!
//! ```ignore
//! #[macro_use]
//! mod conformance;
//! store_conformance_tests!(make_store().await);
//! ```
//!
//! Times are a fixed base plus whole seconds (PostgreSQL keeps
//! microseconds; these survive the round trip exactly).

use chrono::{DateTime, Duration, TimeZone, Utc};
use pam_manifests::state::{
    FailureReason, HostStatus, Platform, ProjectStatus, RunStatus, WorkItemKind, WorkItemStatus,
};
use serde_json::json;
use uuid::Uuid;

#[allow(unused_imports)]
pub use pam_store::prelude::*;
#[allow(unused_imports)]
pub use pam_store::Position;
#[allow(unused_imports)]
pub use pam_store::{
    short_id, ApiToken, AttachLease, AttachRefusal, Event, Host, Labels, Meta, PendingRun, Project,
    Role, Run, RunFilter, RunUpdate, SignalMarker, Source, SourceObject, SourceStatus, Store,
    StoreError, StoreResult, Target, TokenKind, WorkItem,
};

/// Generates one `#[tokio::test]` per behaviour; `$make` is an expression
/// (evaluated per test) giving something that derefs to a [`Store`].
macro_rules! store_conformance_tests {
    ($make:expr) => {
        store_conformance_tests!(@each $make;
            project_crud,
            project_slug_unique_and_tx_usable_after,
            project_update_guarded_by_resource_version,
            records_round_trip,
            work_item_paths,
            work_item_parent_and_name_checks,
            insert_work_items_batch,
            subtree_prefix_equals_recursive,
            reparent_rewrites_descendant_paths,
            reparent_refuses_cycle_self_and_cross_project,
            work_item_status_guarded,
            work_item_update_guarded,
            delete_project_cascades,
            delete_work_item_cascades,
            work_items_with_ancestors_reads_chains,
            work_items_named_across_projects,
            runs_named_in_project,
            run_list_filters_and_order,
            run_name_unique_and_task_checks,
            session_name_unique_per_host,
            transition_run_guarded,
            requeue_run_resets_attempt,
            claim_runs_by_target,
            claim_runs_match_the_hosts_one_label_set,
            claim_runs_keep_worker_reported_labels_apart,
            claim_runs_match_the_hosts_providers_and_versions,
            claim_runs_keep_workspace_runs_off_low_disk_hosts,
            claim_runs_keep_full_permissions_to_hosts_that_take_them,
            live_runs_are_counted_per_host,
            claim_runs_order_limit_and_stop_requested,
            claim_runs_at_most_once,
            claim_runs_skip_a_session_name_the_host_holds,
            run_by_session_after_claim,
            advance_progress_monotonic,
            signal_batch_primitives,
            run_results_per_attempt,
            run_activity_per_attempt,
            run_events_of_topic_filters,
            sessions_journaled_names_this_hosts_sessions,
            run_events_timeline,
            pending_and_requeue_due_lists,
            mark_eligible_host_seen_only_pending,
            update_run_spec_guarded,
            count_live_runs,
            usage_rolls_up_per_project_and_subtree,
            claim_skips_runs_of_projects_over_budget,
            status_counts,
            host_crud_and_update,
            host_status_guarded,
            list_silent_hosts,
            host_batch_reads_and_touch,
            delete_host_refused_while_referenced,
            events_append_after_bounds_purge,
            append_events_batch,
            events_carry_the_actor_of_their_request,
            events_commit_returns_and_rollback_discards,
            journal_follows_finished_transactions,
            tokens_insert_lookup_revoke,
            custom_role_token_round_trips,
            tokens_touch_writes_at_most_once_per_window,
            tokens_keep_role_and_projects,
            rollback_on_drop,
            store_is_ready,
            source_crud_and_status,
            source_inventory_has_one_owner,
            deps_set_list_and_checks,
            deps_closure_follows_links,
            deps_gate_claims_and_refresh,
            deps_reopened_dependency_blocks_at_once,
            deps_requeue_of_a_blocked_task,
            deps_runs_waiting_on_cancelled,
            leader_lease_take_renew_expire_and_fence,
            attach_lease_one_holder_input_expiry_and_revocation,
            webhook_crud_targets_and_delivery_queue,
            objects_keyed_by_kind_scope_and_name,
            object_update_guarded_and_deleted_with_project,
            pending_events_are_the_transactions_own,
            idempotency_keys_claim_answer_replay_and_expire,
            secret_crud_unique_and_cascade,
            claim_skips_runs_waiting_for_a_secret,
            pending_runs_reading_secrets,
            schedule_ticks_are_taken_once,
            chart_reads_count_runs_into_buckets,
            managed_fields_bulk_round_trip,
            applyset_records_round_trip,
        );
    };
    (@each $make:expr; $($name:ident),+ $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                let store = $make;
                conformance::$name(&*store).await;
            }
        )+
    };
}

// ---- fixtures -------------------------------------------------------------------

/// The fixed base time plus `secs` seconds.
pub fn t(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap() + Duration::seconds(secs)
}

pub fn project(slug: &str) -> Project {
    Project {
        id: Uuid::new_v4(),
        name: format!("Project {slug}"),
        slug: slug.to_string(),
        description: String::new(),
        status: ProjectStatus::Active,
        meta: Meta::default(),
        created_at: t(0),
        updated_at: t(0),
    }
}

pub fn item(p: &Project, parent: Option<&WorkItem>, name: &str) -> WorkItem {
    WorkItem {
        id: Uuid::new_v4(),
        project_id: p.id,
        parent_id: parent.map(|w| w.id),
        name: name.to_string(),
        kind: WorkItemKind::Task,
        title: format!("Title {name}"),
        description: String::new(),
        status: WorkItemStatus::Todo,
        assignee: None,
        path: String::new(),
        sort_order: 0,
        meta: Meta::default(),
        created_at: t(0),
        updated_at: t(0),
    }
}

pub fn run(task: &WorkItem, name: &str, pending_since: DateTime<Utc>) -> Run {
    let id = Uuid::new_v4();
    Run {
        provider: "claude".into(),
        prompt: "do it".into(),
        cwd: "/src".into(),
        backoff_seconds: 10,
        backoff_max_seconds: 300,
        // What the store computes for a task without dependencies.
        dispatchable_since: Some(pending_since),
        ..Run::first_attempt(id, (task.project_id, task.id), name, pending_since)
    }
}

pub fn host(name: &str, labels: &[(&str, &str)]) -> Host {
    Host {
        // Operator labels (a Host's spec.labels).
        dispatch_labels: labels_of(labels),
        ..Host::new(name.to_string(), Platform::Linux, t(0))
    }
}

fn labels_of(kv: &[(&str, &str)]) -> Labels {
    kv.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn token(name: &str, kind: TokenKind, fp: &str, at: i64) -> ApiToken {
    ApiToken {
        id: Uuid::new_v4(),
        name: name.to_string(),
        kind,
        fingerprint: fp.to_string(),
        host_name: (kind == TokenKind::Worker).then(|| name.to_string()),
        role: match kind {
            TokenKind::Operator => Role::Admin,
            TokenKind::Worker => Role::Worker,
        },
        projects: Vec::new(),
        created_at: t(at),
        last_used_at: None,
        revoked_at: None,
    }
}

/// A project with one task, committed.
async fn seed(s: &dyn Store) -> (Project, WorkItem) {
    let p = project("seed");
    let mut tx = s.begin().await.unwrap();
    tx.insert(&p).await.unwrap();
    let task = tx.insert_work_item(&item(&p, None, "task")).await.unwrap();
    tx.commit().await.unwrap();
    (p, task)
}

/// Projects `p` and `q`, inserted in `tx` (for what must stay apart
/// between two projects).
async fn projects_p_q(tx: &mut dyn Tx) -> (Project, Project) {
    let (p, q) = (project("p"), project("q"));
    tx.insert(&p).await.unwrap();
    tx.insert(&q).await.unwrap();
    (p, q)
}

async fn insert_runs(s: &dyn Store, runs: &[Run]) {
    let mut tx = s.begin().await.unwrap();
    for r in runs {
        tx.insert_run(r).await.unwrap();
    }
    tx.commit().await.unwrap();
}

async fn insert_hosts(s: &dyn Store, hosts: &[&Host]) {
    let mut tx = s.begin().await.unwrap();
    for h in hosts {
        tx.insert(*h).await.unwrap();
    }
    tx.commit().await.unwrap();
}

/// Host `name` without labels, committed.
async fn inserted_host(s: &dyn Store, name: &str) -> Host {
    let h = host(name, &[]);
    insert_hosts(s, &[&h]).await;
    h
}

async fn get_run(s: &dyn Store, id: Uuid) -> Run {
    let mut tx = s.begin().await.unwrap();
    tx.get_run(id).await.unwrap().expect("run exists")
}

/// A second project `slug` with one task, `qt` (for what must stay apart
/// from the seed's).
async fn other_project(s: &dyn Store, slug: &str) -> (Project, WorkItem) {
    let q = project(slug);
    let mut tx = s.begin().await.unwrap();
    tx.insert(&q).await.unwrap();
    let q_task = tx.insert_work_item(&item(&q, None, "qt")).await.unwrap();
    tx.commit().await.unwrap();
    (q, q_task)
}

/// The names of a listing, in its order.
fn names_of<T>(v: StoreResult<Vec<T>>, name: impl Fn(&T) -> &str) -> Vec<String> {
    v.unwrap().iter().map(|x| name(x).to_string()).collect()
}

fn ids<T>(v: &[T], id: impl Fn(&T) -> Uuid) -> Vec<Uuid> {
    v.iter().map(id).collect()
}

macro_rules! assert_err {
    ($e:expr, $pat:pat) => {
        match $e {
            Err($pat) => {}
            other => panic!(
                "expected {}, got {:?}",
                stringify!($pat),
                other.map(|_| "Ok(..)")
            ),
        }
    };
}

mod attach;
mod charts;
mod deps;
mod dispatch;
mod events;
mod hosts;
mod leader;
mod managed;
mod named;
mod objects;
mod projects;
mod runs;
mod schedules;
mod secrets;
mod signals;
mod sources;
mod tokens;
mod transactions;
mod usage;
mod webhooks;
mod work_items;
#[allow(unused_imports)]
pub use attach::*;
#[allow(unused_imports)]
pub use charts::*;
#[allow(unused_imports)]
pub use deps::*;
#[allow(unused_imports)]
pub use dispatch::*;
#[allow(unused_imports)]
pub use events::*;
#[allow(unused_imports)]
pub use hosts::*;
#[allow(unused_imports)]
pub use leader::*;
#[allow(unused_imports)]
pub use managed::*;
#[allow(unused_imports)]
pub use named::*;
#[allow(unused_imports)]
pub use objects::*;
#[allow(unused_imports)]
pub use projects::*;
#[allow(unused_imports)]
pub use runs::*;
#[allow(unused_imports)]
pub use schedules::*;
#[allow(unused_imports)]
pub use secrets::*;
#[allow(unused_imports)]
pub use signals::*;
#[allow(unused_imports)]
pub use sources::*;
#[allow(unused_imports)]
pub use tokens::*;
#[allow(unused_imports)]
pub use transactions::*;
#[allow(unused_imports)]
pub use usage::*;
pub use webhooks::*;
#[allow(unused_imports)]
pub use work_items::*;
