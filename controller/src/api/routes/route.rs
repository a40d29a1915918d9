//! One entry of the route table ([`crate::api::routes::table`]): the handler
//! with everything the OpenAPI document says about it. The table is the
//! only place routes are added, so the router ([`router`]) and the
//! document ([`crate::api::routes::openapi`]) cannot disagree on what exists.
//!
//! Schemas are kept as functions of a [`SchemaGenerator`]: the type is
//! known where the entry is written, the generator only where the document
//! is built (all types share one `components/schemas`).

use axum::extract::DefaultBodyLimit;
use axum::handler::Handler;
use axum::http::Method;
use axum::routing::{on, MethodFilter, MethodRouter};
use axum::Router;
use schemars::{json_schema, JsonSchema, Schema, SchemaGenerator};

use crate::api::AppState;

pub use crate::api::access::authz::Access;

/// A schema, given the generator of the document.
pub type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

fn schema_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// A JSON object built by hand in its handler (no Rust type to derive a
/// schema from): described in words by the entry.
fn any_object(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "object" })
}

/// What a successful call answers.
#[derive(Clone, Copy)]
pub enum Reply {
    /// `application/json` of this schema.
    Json(SchemaOf),
    /// No body (204, or a 202 without one).
    Empty,
    /// A Server-Sent Events stream (`text/event-stream`).
    EventStream,
    /// Another media type (HTML, JavaScript, OpenMetrics text).
    Content(&'static str),
}

/// One route: method, path (axum syntax: `{param}`, `{*rest}`), handler
/// and its documentation.
pub struct Route {
    pub method: Method,
    pub path: String,
    pub handler: MethodRouter<AppState>,
    pub access: Access,
    pub tag: &'static str,
    /// Unique in the document (a test checks).
    pub operation_id: String,
    pub summary: String,
    /// The `Query<…>` the handler extracts: one parameter per property.
    pub query: Option<SchemaOf>,
    /// The JSON body and whether it is required.
    pub body: Option<(SchemaOf, bool)>,
    pub status: u16,
    pub reply: Reply,
    /// The success response's description.
    pub answers: String,
}

fn route<H, T>(method: Method, path: impl Into<String>, handler: H, access: Access) -> Route
where
    H: Handler<T, AppState>,
    T: 'static,
{
    let filter = MethodFilter::try_from(method.clone()).expect("a standard method");
    Route {
        method,
        path: path.into(),
        handler: on(filter, handler),
        access,
        tag: "",
        operation_id: String::new(),
        summary: String::new(),
        query: None,
        body: None,
        status: 200,
        reply: Reply::Json(any_object),
        answers: "OK".into(),
    }
}

pub fn get<H: Handler<T, AppState>, T: 'static>(
    path: impl Into<String>,
    handler: H,
    access: Access,
) -> Route {
    route(Method::GET, path, handler, access)
}

pub fn post<H: Handler<T, AppState>, T: 'static>(
    path: impl Into<String>,
    handler: H,
    access: Access,
) -> Route {
    route(Method::POST, path, handler, access)
}

pub fn delete<H: Handler<T, AppState>, T: 'static>(
    path: impl Into<String>,
    handler: H,
    access: Access,
) -> Route {
    route(Method::DELETE, path, handler, access)
}

impl Route {
    /// Tag (the document's grouping), operationId and one-line summary.
    pub fn doc(
        mut self,
        tag: &'static str,
        id: impl Into<String>,
        summary: impl Into<String>,
    ) -> Self {
        self.tag = tag;
        self.operation_id = id.into();
        self.summary = summary.into();
        self
    }

    /// The handler's `Query<Q>`.
    pub fn query<Q: JsonSchema>(mut self) -> Self {
        self.query = Some(schema_of::<Q>);
        self
    }

    /// A required JSON body `B`.
    pub fn body<B: JsonSchema>(mut self) -> Self {
        self.body = Some((schema_of::<B>, true));
        self
    }

    /// A JSON body `B` that may be left out (`Option<Json<B>>`).
    pub fn optional_body<B: JsonSchema>(mut self) -> Self {
        self.body = Some((schema_of::<B>, false));
        self
    }

    /// Answers `status` with a JSON `R`.
    pub fn json<R: JsonSchema>(mut self, status: u16, answers: &str) -> Self {
        (self.status, self.reply, self.answers) =
            (status, Reply::Json(schema_of::<R>), answers.into());
        self
    }

    /// Answers `status` with JSON of the schema `schema` gives.
    pub fn schema(mut self, status: u16, schema: SchemaOf, answers: &str) -> Self {
        (self.status, self.reply, self.answers) = (status, Reply::Json(schema), answers.into());
        self
    }

    /// Answers `status` with a JSON object built in the handler.
    pub fn object(mut self, status: u16, answers: &str) -> Self {
        (self.status, self.reply, self.answers) = (status, Reply::Json(any_object), answers.into());
        self
    }

    /// Answers `status` with no body.
    pub fn empty(mut self, status: u16, answers: &str) -> Self {
        (self.status, self.reply, self.answers) = (status, Reply::Empty, answers.into());
        self
    }

    /// Answers 200 with a Server-Sent Events stream.
    pub fn events(mut self, answers: &str) -> Self {
        (self.status, self.reply, self.answers) = (200, Reply::EventStream, answers.into());
        self
    }

    /// Answers 200 with a body of `content_type`.
    pub fn content(mut self, content_type: &'static str, answers: &str) -> Self {
        (self.status, self.reply, self.answers) =
            (200, Reply::Content(content_type), answers.into());
        self
    }

    /// Accepts bodies up to `bytes` (axum's default is 2 MB).
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.handler = self.handler.layer(DefaultBodyLimit::max(bytes));
        self
    }
}

/// The router of a table: each entry's handler, behind its permission's
/// check, at its path (entries on one path with different methods share
/// it).
pub fn router(table: Vec<Route>, state: &AppState) -> Router<AppState> {
    table.into_iter().fold(Router::new(), |r, e| {
        r.route(
            &e.path,
            crate::api::access::authz::wrap(e.handler, e.access, state),
        )
    })
}
