//! The one enforcement point of the route table's permissions:
//! every entry declaring [`Access::Op`] is wrapped in [`enforce`], which
//! authenticates the caller, asks [`access::authorize`] with the entry's
//! verb and resource and the `{project}` of the path, and hands the
//! [`Principal`] to the handler. Handlers never decide who may call them;
//! what they still do is filter lists and batches that span projects
//! ([`visible_projects`], [`Principal::grant`]).

use axum::extract::{FromRequestParts, RawPathParams, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::access::auth::{authenticate_parts, refused_name, Principal};
use crate::api::{ApiError, AppState};
use crate::rules::access::{self, Decision, Grant, Verb};

/// Who may call a route: its permission, checked for every
/// entry in one place ([`crate::api::access::authz::enforce`]); a test checks every
/// non-public entry names a resource [`crate::rules::access::known`]
/// knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token (probes, metrics, the dashboard's files, this document).
    Public,
    /// An operator-side token (pamctl, the dashboard) whose role may do
    /// this verb to this resource, in the path's `{project}` if it has
    /// one ([`crate::rules::access::authorize`]).
    Op(Verb, &'static str),
    /// A worker token, bound to one host.
    Worker,
}

/// What [`enforce`] is given per route.
#[derive(Clone)]
pub struct Permission {
    pub state: AppState,
    pub verb: Verb,
    pub resource: &'static str,
}

/// The 403 of a verb the role lacks. It names the verb and the resource,
/// never a project: a batch refused for a project the token cannot see
/// must not tell it exists.
pub fn forbidden(verb: Verb, resource: &str) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "forbidden",
        format!("this token may not {} {resource}", verb.as_str()),
    )
}

/// The 404 of a project the token may not see: the very answer a missing
/// project gets ([`crate::api::operator::served::project`]).
pub fn hidden(project: &str) -> ApiError {
    missing_project(project)
}

/// The 404 of a project that does not exist, which a token that may not
/// see a project gets too (the same body, nothing leaks).
pub fn missing_project(slug: &str) -> ApiError {
    let kind = pam_manifests::Kind::Project.info().singular;
    ApiError::not_found(format!("{kind} {slug:?} not found"))
}

/// Counts and logs a refusal: the token's name, never its value (a
/// session's as `session`: [`Principal::metric_label`]).
pub fn refused(st: &AppState, principal: &Principal, e: &ApiError) {
    refused_name(st, principal.metric_label(), e.status);
}

/// [`access::authorize`] as an API answer.
pub fn check(
    principal: &Principal,
    verb: Verb,
    resource: &'static str,
    project: Option<&str>,
) -> Result<(), ApiError> {
    let Some(grant) = principal.grant() else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "worker tokens may only call the worker endpoints",
        ));
    };
    match access::authorize(grant, verb, resource, project) {
        Decision::Allow => Ok(()),
        Decision::Forbidden => Err(forbidden(verb, resource)),
        Decision::Hidden => Err(hidden(project.unwrap_or_default())),
    }
}

/// The middleware of an [`Access::Op`] route.
pub async fn enforce(State(perm): State<Permission>, req: Request, next: Next) -> Response {
    let (mut parts, body) = req.into_parts();
    let project = match RawPathParams::from_request_parts(&mut parts, &()).await {
        Ok(params) => params
            .iter()
            .find(|(k, _)| *k == "project")
            .map(|(_, v)| v.to_string()),
        Err(e) => return ApiError::bad_request(e.body_text()).into_response(),
    };
    let st = &perm.state;
    let principal = match authenticate_parts(st, &parts).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Err(e) = check(&principal, perm.verb, perm.resource, project.as_deref()) {
        if e.status == StatusCode::FORBIDDEN {
            refused(st, &principal, &e);
        }
        return e.into_response();
    }
    // The audit trail: every event this request journals names its
    // token (name and role, never the token).
    let actor = actor(&principal);
    parts.extensions.insert(principal);
    pam_store::events::as_actor(actor, next.run(Request::from_parts(parts, body))).await
}

/// The `actor` of the events a principal's requests journal.
pub fn actor(principal: &Principal) -> serde_json::Value {
    let role = principal.grant().map_or("worker", |g| g.role.as_str());
    match principal.subject() {
        // Signed in with OIDC: the issuer's subject too.
        Some(sub) => serde_json::json!({ "name": principal.name(), "role": role, "subject": sub }),
        None => serde_json::json!({ "name": principal.name(), "role": role }),
    }
}

/// The route's handler wrapped in its permission's check.
pub fn wrap(
    handler: axum::routing::MethodRouter<AppState>,
    access: Access,
    state: &AppState,
) -> axum::routing::MethodRouter<AppState> {
    match access {
        Access::Op(verb, resource) => handler.layer(axum::middleware::from_fn_with_state(
            Permission {
                state: state.clone(),
                verb,
                resource,
            },
            enforce,
        )),
        // Worker routes check their token in their extractor (bound to a
        // host); public ones need none.
        Access::Public | Access::Worker => handler,
    }
}

/// Of `projects` (slugs), those where the caller may `verb` `resource`
/// ([`Grant::scope_for`]): lists are filtered, not refused.
pub fn visible<T>(
    grant: Option<&Grant>,
    (verb, resource): (Verb, &str),
    items: Vec<T>,
    slug: impl Fn(&T) -> &str,
) -> Vec<T> {
    match grant.and_then(|g| g.scope_for(&[verb], resource)) {
        None => items,
        Some(scope) => items
            .into_iter()
            .filter(|i| scope.iter().any(|p| p == slug(i)))
            .collect(),
    }
}

/// `GET /api/v1/whoami`: the caller's token name, role and projects.
pub async fn whoami(
    crate::api::access::auth::Operator(op): crate::api::access::auth::Operator,
) -> crate::api::extract::Json<serde_json::Value> {
    let (role, projects, read_only) = match op.grant() {
        Some(g) => (g.role.as_str(), g.projects.clone(), g.read_only.clone()),
        None => ("worker", Vec::new(), Vec::new()),
    };
    let mut me = serde_json::json!({
        "name": op.name(),
        "role": role,
        "projects": projects,
    });
    // A custom role: its rules as resolved for this request
    // (selectors matched; none while its Role is missing).
    if let Some(access::Role::Custom(c)) = op.grant().map(|g| &g.role) {
        let rules: Vec<serde_json::Value> = c
            .rules
            .iter()
            .map(|r| {
                serde_json::json!({"verbs": r.verbs, "kinds": r.resources, "projects": r.projects})
            })
            .collect();
        me["rules"] = rules.into();
    }
    // A dashboard session: who signed in, and the projects
    // its groups only let it read.
    if let Some(sub) = op.subject() {
        me["subject"] = sub.into();
        me["readOnlyProjects"] = read_only.into();
    }
    crate::api::extract::Json(me)
}

/// `GET /api/v1/auth/can-i`'s question.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CanIQuery {
    /// get, list, watch, create, update, delete, attach, signal, sync,
    /// trigger.
    verb: String,
    /// A kind's plural (`runs`), or events, manifests, tokens, secretkeys,
    /// webhookdeliveries.
    resource: String,
    /// The project asked about; none: the verb itself.
    #[serde(default)]
    project: Option<String>,
}

/// `GET /api/v1/auth/can-i`: whether the caller's token may, by the very
/// [`access::authorize`] every route asks (kubectl's `auth can-i`).
pub async fn can_i(
    crate::api::access::auth::Operator(op): crate::api::access::auth::Operator,
    crate::api::extract::Query(q): crate::api::extract::Query<CanIQuery>,
) -> Result<crate::api::extract::Json<serde_json::Value>, ApiError> {
    let verb = Verb::parse(&q.verb)
        .ok_or_else(|| ApiError::bad_request(format!("unknown verb {:?}", q.verb)))?;
    let resource = q.resource.as_str();
    if resource == access::SELF || !access::known(resource) {
        return Err(ApiError::bad_request(format!(
            "unknown resource {:?}",
            q.resource
        )));
    }
    let allowed = op.grant().is_some_and(|g| {
        access::authorize(g, verb, resource, q.project.as_deref()) == Decision::Allow
    });
    Ok(crate::api::extract::Json(
        serde_json::json!({ "allowed": allowed }),
    ))
}
