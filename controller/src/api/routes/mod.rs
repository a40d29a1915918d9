//! The route table: every route pamd serves, one entry each, from which
//! both the router ([`router`]) and the OpenAPI document
//! ([`crate::api::routes::openapi`], `schemas/openapi.json`) are built. A test fails
//! when a `.route(` call appears anywhere else in the controller, so a
//! route cannot exist without its documentation.
//!
//! Adding a route is one entry here (or in a `Vec` this table appends):
//!
//! ```text
//! post("/api/v1/projects/{project}/runs/{name}/rerun", runs::rerun, Op(Create, "runs"))
//!     .doc("runs", "rerunRun", "Start a finished run again")
//!     .object(201, "the new Run"),
//! ```
//!
//! - `get`/`post`/`delete`(path, handler, who may call it: [`Access`],
//!   for a token's route the verb and resource its role needs);
//! - `.doc(tag, operationId, summary)` — the operationId must be unique;
//! - the handler's `Query<Q>` as `.query::<Q>()`, its `Json<B>` body as
//!   `.body::<B>()` (`Option<Json<B>>`: `.optional_body::<B>()`);
//! - its answer: `.json::<R>(status, …)` for a typed body, `.object(…)`
//!   for JSON built by hand, `.empty(…)`, `.events(…)` (SSE) or
//!   `.content(media type, …)`. Types need `schemars::JsonSchema`.
//!
//! Then regenerate the document (`api::openapi::REGENERATE_COMMAND`).

pub mod openapi;
pub mod route;

use axum::Router;
use pam_manifests::kinds;
use pam_manifests::protocol::{
    DesiredSet, Heartbeat, OutputSnapshot, RegisterRequest, RegisterResponse, SignalAck,
    SignalBatch,
};

use crate::api::{
    access::authz, access::oidc, dashboard, logs, metrics, operator::actions, operator::apply,
    operator::attach as a, operator::charts, operator::events, operator::hosts, operator::runs,
    operator::schedules, operator::secrets, operator::served, operator::sources, operator::tasks,
    operator::tokens, operator::webhooks, source_hooks, stream, workers::watch,
    workers::worker as w, AppState,
};
use crate::rules::access::{self, Verb::*};
use route::{delete, get, post, Access::*, Route};

/// The default request body limit of apply and diff (`[api]
/// max_body_bytes`; other routes keep axum's 2 MB). An apply's peak RSS is
/// up to ~26× its body (small documents), so this default keeps
/// one within the deploy files' 512 MiB (docs/operations.md, "Memory").
pub const DEFAULT_MAX_BODY_BYTES: usize = 16 << 20;

/// The router of [`table`].
pub fn router(state: &AppState) -> Router<AppState> {
    route::router(table(state.max_body_bytes), state)
}

/// Every route; apply, diff and the workers' signals accept bodies up to
/// `max_body_bytes`.
pub fn table(max_body_bytes: usize) -> Vec<Route> {
    let run = "/api/v1/projects/{project}/runs/{name}";
    let mut t = vec![
        // Large batches (10,000 manifests is several MB of YAML) exceed
        // axum's 2 MB default body limit.
        post(
            "/api/v1/apply",
            apply::apply_handler,
            Op(Update, "manifests"),
        )
        .doc(
            "apply",
            "apply",
            "Apply manifests (create or update, optionally prune)",
        )
        .query::<apply::ApplyQuery>()
        .body::<crate::apply::ApplyRequest>()
        .json::<apply::ApplyResponse>(200, "what was done to each object")
        .body_limit(max_body_bytes),
        post("/api/v1/diff", apply::diff_handler, Op(Get, "manifests"))
            .doc(
                "apply",
                "diff",
                "What an apply would change, changing nothing",
            )
            .query::<apply::ApplyQuery>()
            .body::<crate::apply::ApplyRequest>()
            .object(200, "`{items}`: each object's difference")
            .body_limit(max_body_bytes),
        post(
            "/api/v1/projects/{project}/tasks/{name}/transition",
            tasks::transition_task,
            Op(Update, "tasks"),
        )
        .doc("tasks", "transitionTask", "Move a task to another status")
        .body::<tasks::TransitionBody>()
        .object(200, "`{task, cascade, changed, dryRun}`"),
        post(format!("{run}/stop"), runs::stop_run, Op(Signal, "runs"))
            .doc("runs", "stopRun", "Ask a run's session to stop")
            .json::<kinds::Run>(200, "the Run"),
        post(
            format!("{run}/signal"),
            runs::signal_run,
            Op(Signal, "runs"),
        )
        .doc("runs", "signalRun", "Send a signal to a run's session")
        .body::<runs::SignalBody>()
        .object(202, "`{accepted: true}`: handed to the run's worker"),
        get(format!("{run}/output"), runs::run_output, Op(Get, "runs"))
            .doc(
                "runs",
                "getRunOutput",
                "The latest output snapshot of a run's session",
            )
            .object(200, "the snapshot"),
        get(format!("{run}/log"), logs::run_log, Op(Get, "runs"))
            .doc(
                "runs",
                "getRunLog",
                "A run's raw log, read from its worker (streamed)",
            )
            .query::<logs::LogQuery>()
            .content(
                "text/plain",
                "the log's bytes; headers x-pam-attempt, x-pam-offset (where they start), x-pam-size, x-pam-done",
            ),
        get(format!("{run}/transcript"), logs::run_transcript, Op(Get, "runs"))
            .doc(
                "runs",
                "getRunTranscript",
                "A run's transcript as JSON lines, read from its worker (streamed)",
            )
            .query::<logs::TranscriptQuery>()
            .content(
                "application/x-ndjson",
                "one activity entry a line; the same headers as the log",
            ),
        post(format!("{run}/attach"), a::acquire, Op(Attach, "runs"))
            .doc(
                "attach",
                "acquireAttachLease",
                "Take the run's attach lease",
            )
            .optional_body::<a::AcquireBody>()
            .object(201, "the lease"),
        post(format!("{run}/attach/renew"), a::renew, Op(Attach, "runs"))
            .doc("attach", "renewAttachLease", "Extend an attach lease")
            .body::<a::LeaseBody>()
            .object(200, "the lease"),
        post(
            format!("{run}/attach/release"),
            a::release,
            Op(Attach, "runs"),
        )
        .doc("attach", "releaseAttachLease", "Give an attach lease back")
        .body::<a::LeaseBody>()
        .empty(204, "released"),
        post(format!("{run}/attach/input"), a::input, Op(Attach, "runs"))
            .doc(
                "attach",
                "sendAttachInput",
                "Type a line into an attached session",
            )
            .body::<a::InputBody>()
            .object(202, "`{accepted: true}`"),
        post(
            "/api/v1/secrets/rotate-key",
            secrets::rotate_key,
            Op(Update, "secretkeys"),
        )
        .doc(
            "secrets",
            "rotateSecretsKey",
            "Seal every Secret with a new key",
        )
        .optional_body::<secrets::RotateRequest>()
        .json::<crate::rules::secrets::Rotation>(200, "what the rotation did"),
        post(
            "/api/v1/projects/{project}/schedules/{name}/trigger",
            schedules::trigger_schedule,
            Op(Trigger, "schedules"),
        )
        .doc("schedules", "triggerSchedule", "Start a schedule's run now")
        .object(201, "`{run}`: the run started"),
        post(
            "/api/v1/hosts/{host}/{action}",
            hosts::host_action,
            Op(Update, "hosts"),
        )
        .doc(
            "hosts",
            "hostAction",
            "disable, enable or clear-suspect a host ({action})",
        )
        .json::<kinds::Host>(200, "the Host"),
        post(
            "/api/v1/sources/{source}/sync",
            sources::sync_source,
            Op(Sync, "sources"),
        )
        .doc("sources", "syncSource", "Sync a Source now")
        .json::<kinds::Source>(202, "the Source, its sync requested"),
        get("/api/v1/sources/{source}/diff", sources::diff_source, Op(Get, "sources"))
            .doc(
                "sources",
                "diffSource",
                "What a sync of the Source (or of ?revision=REF) would change, without changing anything",
            )
            .query::<sources::DiffQuery>()
            .object(200, "`{source, revision, changes: [{kind, project, name, action}]}`"),
        // No bearer token; the provider's own proof
        // (api::source_hooks) against spec.receiver.secretRef.
        post(
            "/api/v1/sources/{source}/hooks/{provider}",
            source_hooks::receive,
            Public,
        )
        .doc(
            "sources",
            "receiveSourcePush",
            "A git host's push notification (github, gitlab, gitea, generic): a verified push of the Source's ref syncs it now",
        )
        .object(202, "{triggered: true, source, ref}; 200 {triggered: false} for a ping"),
        get(
            "/api/v1/webhookdeliveries",
            webhooks::list_deliveries,
            Op(List, "webhookdeliveries"),
        )
        .doc(
            "webhooks",
            "listWebhookDeliveries",
            "List webhook deliveries",
        )
        .query::<webhooks::DeliveriesQuery>()
        .object(200, "`{items}`: the deliveries, newest first"),
        get(
            "/api/v1/webhookdeliveries/{id}",
            webhooks::get_delivery,
            Op(Get, "webhookdeliveries"),
        )
        .doc("webhooks", "getWebhookDelivery", "Get a webhook delivery")
        .object(200, "the delivery"),
        post(
            "/api/v1/webhookdeliveries/{id}/redeliver",
            webhooks::redeliver,
            Op(Create, "webhookdeliveries"),
        )
        .doc("webhooks", "redeliverWebhook", "Send a delivery again")
        .object(202, "the new delivery"),
        // The dashboard's run timeline.
        get(
            format!("{run}/events"),
            runs::run_events,
            Op(List, "events"),
        )
        .doc("runs", "listRunEvents", "A run's events, oldest first")
        .query::<runs::RunEventsQuery>()
        .object(200, "`{items}`: the events"),
        get(format!("{run}/activity"), runs::run_activity, Op(Get, "runs"))
            .doc(
                "runs",
                "getRunActivity",
                "What an attempt's agent did lately (the newest 20 steps)",
            )
            .query::<runs::RunActivityQuery>()
            .json::<runs::RunActivity>(200, "the attempt's newest activity items"),
        get(format!("{run}/result"), runs::run_result, Op(Get, "runs"))
            .doc(
                "runs",
                "getRunResult",
                "An attempt's workspace result with its patch",
            )
            .query::<runs::RunResultQuery>()
            .object(200, "the workspace result"),
        get("/api/v1/tokens", tokens::list_tokens, Op(List, "tokens"))
            .doc(
                "tokens",
                "listTokens",
                "List API tokens (never their values)",
            )
            .object(200, "`{items}`: the tokens"),
        post("/api/v1/tokens", tokens::create_token, Op(Create, "tokens"))
            .doc(
                "tokens",
                "createToken",
                "Create an operator or worker token",
            )
            .body::<tokens::NewToken>()
            .object(201, "the token, with its value shown this once"),
        delete(
            "/api/v1/tokens/{id}",
            tokens::revoke_token,
            Op(Delete, "tokens"),
        )
        .doc("tokens", "revokeToken", "Revoke a token")
        .empty(204, "revoked"),
        get("/api/v1/events", events::list_events, Op(List, "events"))
            .doc("events", "listEvents", "A page of the event journal")
            .query::<events::EventsQuery>()
            .object(200, "`{items, next}`: the events"),
        get("/api/v1/events/stream", stream::stream, Op(Watch, "events"))
            .doc(
                "events",
                "streamEvents",
                "The event journal, live (Server-Sent Events)",
            )
            .query::<stream::StreamQuery>()
            .events("one SSE event per journal event, its `id` the event's seq"),
        get("/api/v1/whoami", authz::whoami, Op(Get, access::SELF))
            .doc("auth", "whoami", "The caller's token: name, role, projects")
            .object(200, "`{name, role, projects}`"),
        get("/api/v1/auth/can-i", authz::can_i, Op(Get, access::SELF))
            .doc(
                "auth",
                "canI",
                "Whether the caller's token may do a verb to a resource (in a project)",
            )
            .query::<authz::CanIQuery>()
            .object(200, "`{allowed}`"),
        post("/api/v1/workers/register", w::register, Worker)
            .doc("workers", "registerWorker", "A worker registers its host")
            .body::<RegisterRequest>()
            .json::<RegisterResponse>(200, "the host's id and heartbeat period"),
        post("/api/v1/workers/heartbeat", w::heartbeat, Worker)
            .doc("workers", "heartbeat", "A worker's heartbeat")
            .body::<Heartbeat>()
            .json::<DesiredSet>(200, "the runs the host should have"),
        get("/api/v1/workers/desired", w::desired, Worker)
            .doc("workers", "getDesired", "The runs the host should have")
            .json::<DesiredSet>(200, "the desired set"),
        get("/api/v1/workers/watch", watch::watch, Worker)
            .doc(
                "workers",
                "watchDesired",
                "Changes of the host's desired set, live (Server-Sent Events)",
            )
            .events("`event: desired` when the host's desired set changed, its `id` the version to resume at (Last-Event-ID)"),
        post("/api/v1/workers/claim", w::claim, Worker)
            .doc("workers", "claimRuns", "Claim pending runs (long-poll)")
            .query::<w::ClaimQuery>()
            .json::<DesiredSet>(200, "the runs claimed"),
        // A `finished` signal may carry its workspace's patch
        // (protocol::RESULT_PATCH_MAX_BYTES each).
        post("/api/v1/workers/signals", w::signals, Worker)
            .doc("workers", "sendSignals", "Report what runs did")
            .body::<SignalBatch>()
            .json::<SignalAck>(200, "each signal's outcome")
            .body_limit(max_body_bytes),
        post("/api/v1/workers/snapshots", w::snapshot, Worker)
            .doc("workers", "sendSnapshot", "A run's latest output")
            .body::<OutputSnapshot>()
            .empty(204, "kept"),
        // Probes and metrics: no token, nothing secret in them.
        get("/healthz", crate::api::healthz, Public)
            .doc("system", "healthz", "Liveness: the process serves HTTP")
            .object(200, "`{status: ok}`"),
        get("/readyz", crate::api::readyz, Public)
            .doc(
                "system",
                "readyz",
                "Readiness: the database answers, migrations applied",
            )
            .object(200, "`{status: ready}`"),
        get("/metrics", metrics::handler, Public)
            .doc("system", "metrics", "Prometheus metrics")
            .content(
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
                "the metrics",
            ),
        get("/api/v1/version", crate::api::version, Public)
            .doc("system", "version", "pamd's version and schema version")
            .object(200, "`{name, version, apiVersion, schemaVersion}`"),
        get("/api/v1/openapi.json", serve_openapi, Public)
            .doc("system", "openapi", "This document")
            .object(200, "the OpenAPI 3.1 document"),
        // Dashboard sign-in with OIDC (api/oidc). No token:
        // the sign-in makes the session; logout checks the session's CSRF
        // value itself.
        get("/auth/info", oidc::info, Public)
            .doc("auth", "authInfo", "Whether this pamd offers OIDC sign-in")
            .object(200, "`{oidc}`"),
        get("/auth/login", oidc::login, Public)
            .doc("auth", "oidcLogin", "Start an OIDC sign-in: a redirect to the issuer")
            .empty(303, "to the issuer's authorization endpoint"),
        get("/auth/callback", oidc::callback, Public)
            .doc(
                "auth",
                "oidcCallback",
                "The issuer's redirect back: the code for a session cookie",
            )
            .empty(303, "to the dashboard, signed in"),
        post("/auth/logout", oidc::logout, Public)
            .doc("auth", "oidcLogout", "End the dashboard session (X-PAM-CSRF)")
            .empty(204, "signed out"),
        get("/", dashboard::index, Public)
            .doc("dashboard", "dashboard", "The dashboard's page")
            .content("text/html", "the dashboard"),
        get("/ui/{*path}", dashboard::ui_asset, Public)
            .doc("dashboard", "dashboardAsset", "A file of the dashboard")
            .content("*/*", "the file (JavaScript, CSS, HTML)"),
        // The dashboard's charts, re-run, suspend and resume.
        get("/api/v1/projects/{project}/charts", charts::project_charts, Op(Get, "runs"))
            .doc(
                "projects",
                "projectCharts",
                "A project's runs over time: outcomes, throughput, durations, cost with the budget, dispatch latency",
            )
            .query::<charts::ChartsQuery>()
            .object(200, "`{window, budget, buckets: [...]}`"),
        post(format!("{run}/rerun"), actions::rerun, Op(Create, "runs"))
            .doc("runs", "rerunRun", "Start a finished run again, as a new run <name>-r<N>")
            .object(201, "the new Run"),
        post("/api/v1/sources/{source}/suspend", actions::suspend_source::<true>, Op(Update, "sources"))
            .doc("sources", "suspendSource", "Stop syncing a Source (spec.suspend: true)")
            .object(200, "the Source"),
        post("/api/v1/sources/{source}/resume", actions::suspend_source::<false>, Op(Update, "sources"))
            .doc("sources", "resumeSource", "Sync a suspended Source again")
            .object(200, "the Source"),
        post(
            "/api/v1/projects/{project}/schedules/{name}/suspend",
            actions::suspend_schedule::<true>,
            Op(Update, "schedules"),
        )
        .doc("schedules", "suspendSchedule", "Stop a Schedule's ticks (spec.suspend: true)")
        .object(200, "the Schedule"),
        post(
            "/api/v1/projects/{project}/schedules/{name}/resume",
            actions::suspend_schedule::<false>,
            Op(Update, "schedules"),
        )
        .doc("schedules", "resumeSchedule", "Start a suspended Schedule's ticks again")
        .object(200, "the Schedule"),
    ];
    t.extend(kinds());
    t
}

/// List, get and delete of every kind of the registry
/// ([`served::routes`]).
fn kinds() -> Vec<Route> {
    pam_manifests::kinds::info::KINDS
        .iter()
        .flat_map(|info| crate::rules::each_kind::for_kind!(info.kind, K => served::routes::<K>()))
        .collect()
}

/// `GET /api/v1/openapi.json`: the document of the route table.
async fn serve_openapi() -> axum::response::Response {
    use axum::response::IntoResponse;
    static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let text = TEXT.get_or_init(openapi_text).clone();
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        text,
    )
        .into_response()
}

/// The OpenAPI document of the route table, as committed in
/// `schemas/openapi.json` ([`openapi::REGENERATE_COMMAND`]).
pub fn openapi_text() -> String {
    openapi::text_of(&table(DEFAULT_MAX_BODY_BYTES))
}

/// The OpenAPI document of the route table.
pub fn openapi_document() -> serde_json::Value {
    openapi::document_of(&table(DEFAULT_MAX_BODY_BYTES))
}
