//! The `/api/v1` routes for operators and workers.

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::Router;

use super::{
    apply, attach as a, events, hosts, runs, schedules, secrets, served, sources, stream, tasks,
    tokens, webhooks, worker as w, AppState,
};

/// The default request body limit of apply and diff (`[api]
/// max_body_bytes`; other routes keep axum's 2 MB). An apply's peak RSS is
/// up to ~26× its body (issue 30, small documents), so this default keeps
/// one within the deploy files' 512 MiB (docs/operations.md, "Memory").
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 << 20;

/// The routes; apply and diff accept bodies up to `max_body_bytes`.
pub fn v1(max_body_bytes: usize) -> Router<AppState> {
    Router::new()
        // Large batches (10,000 manifests is several MB of YAML) exceed
        // axum's 2 MB default body limit.
        .route(
            "/api/v1/apply",
            post(apply::apply_handler).layer(DefaultBodyLimit::max(max_body_bytes)),
        )
        .route(
            "/api/v1/diff",
            post(apply::diff_handler).layer(DefaultBodyLimit::max(max_body_bytes)),
        )
        .route(
            "/api/v1/projects/{project}/tasks/{name}/transition",
            post(tasks::transition_task),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/stop",
            post(runs::stop_run),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/signal",
            post(runs::signal_run),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/output",
            get(runs::run_output),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/attach",
            post(a::acquire),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/attach/renew",
            post(a::renew),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/attach/release",
            post(a::release),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/attach/input",
            post(a::input),
        )
        .route("/api/v1/secrets/rotate-key", post(secrets::rotate_key))
        .route(
            "/api/v1/projects/{project}/schedules/{name}/trigger",
            post(schedules::trigger_schedule),
        )
        .route("/api/v1/hosts/{host}/{action}", post(hosts::host_action))
        .route("/api/v1/sources/{source}/sync", post(sources::sync_source))
        .route("/api/v1/webhookdeliveries", get(webhooks::list_deliveries))
        .route(
            "/api/v1/webhookdeliveries/{id}",
            get(webhooks::get_delivery),
        )
        .route(
            "/api/v1/webhookdeliveries/{id}/redeliver",
            post(webhooks::redeliver),
        )
        // The dashboard's run timeline.
        .route(
            "/api/v1/projects/{project}/runs/{name}/events",
            get(runs::run_events),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/result",
            get(runs::run_result),
        )
        .route(
            "/api/v1/tokens",
            get(tokens::list_tokens).post(tokens::create_token),
        )
        .route("/api/v1/tokens/{id}", delete(tokens::revoke_token))
        .route("/api/v1/events", get(events::list_events))
        .route("/api/v1/events/stream", get(stream::stream))
        .route("/api/v1/workers/register", post(w::register))
        .route("/api/v1/workers/heartbeat", post(w::heartbeat))
        .route("/api/v1/workers/desired", get(w::desired))
        .route("/api/v1/workers/claim", post(w::claim))
        // A `finished` signal may carry its workspace's patch (issue 32,
        // protocol::RESULT_PATCH_MAX_BYTES each).
        .route(
            "/api/v1/workers/signals",
            post(w::signals).layer(DefaultBodyLimit::max(max_body_bytes)),
        )
        .route("/api/v1/workers/snapshots", post(w::snapshot))
        // Issue 36: the dashboard's charts and run/Source actions.
        .merge(super::charts::routes())
        .merge(kinds())
}

/// List, get and delete of every kind of the registry
/// ([`served::routes`]).
fn kinds() -> Router<AppState> {
    pam_manifests::kinds::info::KINDS.iter().fold(
        Router::new(),
        |r, info| crate::rules::kind::for_kind!(info.kind, K => r.merge(served::routes::<K>())),
    )
}
