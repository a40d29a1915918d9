//! The `/api/v1` routes for operators and workers.

use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::Router;

use super::{attach as a, resources as r, worker as w, AppState};

/// Request body limit of apply and diff (other routes keep axum's 2 MB).
pub const APPLY_BODY_LIMIT: usize = 256 << 20;

pub fn v1() -> Router<AppState> {
    Router::new()
        // Large batches (10,000 manifests is several MB of YAML) exceed
        // axum's 2 MB default body limit.
        .route(
            "/api/v1/apply",
            post(r::apply_handler).layer(DefaultBodyLimit::max(APPLY_BODY_LIMIT)),
        )
        .route(
            "/api/v1/diff",
            post(r::diff_handler).layer(DefaultBodyLimit::max(APPLY_BODY_LIMIT)),
        )
        .route("/api/v1/projects", get(r::list_projects))
        .route(
            "/api/v1/projects/{project}",
            get(r::get_project).delete(r::delete_project),
        )
        .route("/api/v1/projects/{project}/tasks", get(r::list_tasks))
        .route(
            "/api/v1/projects/{project}/tasks/{name}",
            get(r::get_task).delete(r::delete_task),
        )
        .route(
            "/api/v1/projects/{project}/tasks/{name}/transition",
            post(r::transition_task),
        )
        .route("/api/v1/projects/{project}/runs", get(r::list_runs))
        .route(
            "/api/v1/projects/{project}/runs/{name}",
            get(r::get_run).delete(r::delete_run),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/stop",
            post(r::stop_run),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/signal",
            post(r::signal_run),
        )
        .route(
            "/api/v1/projects/{project}/runs/{name}/output",
            get(r::run_output),
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
        .route("/api/v1/tasks", get(r::list_all_tasks))
        .route("/api/v1/runs", get(r::list_all_runs))
        .route("/api/v1/hosts", get(r::list_hosts))
        .route(
            "/api/v1/hosts/{name}",
            get(r::get_host).delete(r::delete_host),
        )
        .route("/api/v1/hosts/{name}/{action}", post(r::host_action))
        // The dashboard's run timeline.
        .route(
            "/api/v1/projects/{project}/runs/{name}/events",
            get(super::run_events::run_events),
        )
        .route("/api/v1/tokens", get(r::list_tokens).post(r::create_token))
        .route("/api/v1/tokens/{id}", delete(r::revoke_token))
        .route("/api/v1/events", get(r::list_events))
        .route("/api/v1/events/stream", get(crate::events::stream::stream))
        .route("/api/v1/workers/register", post(w::register))
        .route("/api/v1/workers/heartbeat", post(w::heartbeat))
        .route("/api/v1/workers/desired", get(w::desired))
        .route("/api/v1/workers/claim", post(w::claim))
        .route("/api/v1/workers/signals", post(w::signals))
        .route("/api/v1/workers/snapshots", post(w::snapshot))
}
