//! `GET /metrics` and the middleware that times every request; the
//! registry itself is [`crate::metrics`].

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api::AppState;
use crate::metrics::Metrics;
use crate::rules::access::Verb;

/// `GET /metrics`. No token (like `/healthz`) unless `[metrics]
/// require_token`: then an admin or `metrics` token (or
/// session), asked of [`crate::rules::access::authorize`] like every
/// route. It carries counts and durations, never payloads or secrets
/// (docs/operations.md).
pub async fn handler(State(st): State<AppState>, req: Request) -> Response {
    if st.metrics_require_token {
        let (parts, _) = req.into_parts();
        let checked = match crate::api::access::auth::authenticate_parts(&st, &parts).await {
            Ok(p) => {
                crate::api::access::authz::check(&p, Verb::Get, "metrics", None).inspect_err(|e| {
                    crate::api::access::authz::refused(&st, &p, e);
                })
            }
            Err(e) => Err(e),
        };
        if let Err(e) = checked {
            return e.into_response();
        }
    }
    // Served even when the database is down (`pam_database_up` 0).
    let text = st.ctx.metrics.render(st.ctx.store.as_ref()).await;
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Middleware timing every request by its matched route (`unmatched` for
/// the fallback) and status class (`2xx`…`5xx`), so the label set stays
/// bounded.
pub async fn track(State(metrics): State<Arc<Metrics>>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_string(), |m| m.as_str().to_string());
    let method = match req.method().as_str() {
        m @ ("GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS") => m,
        _ => "other",
    }
    .to_string();
    let started = Instant::now();
    let resp = next.run(req).await;
    metrics
        .http_duration
        .get_or_create(&vec![
            ("method", method),
            ("route", route),
            // The class, not the code (one series per route
            // and class, not per route and code).
            ("status", format!("{}xx", resp.status().as_u16() / 100)),
        ])
        .observe(started.elapsed().as_secs_f64());
    resp
}
