//! The API's list, get and delete of every named kind, written once
//! (a Kind is described once and generic code serves it). A kind
//! says how to find, print and delete its objects ([`Served`], next to its
//! other handlers); [`routes`] gives the route table the same three
//! routes for each, at the paths its registry row
//! ([`pam_manifests::kinds::Kind::info`]) names:
//!
//! - a project-scoped kind (Tasks, Runs, Secrets, Schedules):
//!   `GET /api/v1/projects/{project}/<plural>`,
//!   `GET|DELETE /api/v1/projects/{project}/<plural>/{name}` and every
//!   project's at `GET /api/v1/<plural>` (`pamctl get … -A`);
//! - a cluster-scoped kind (Projects, Hosts, Sources, Webhooks):
//!   `GET /api/v1/<plural>`, `GET|DELETE /api/v1/<plural>/{<singular>}`.
//!
//! Every listing filters by `labelSelector` here, and a missing object is
//! the same 404 for every kind.

use async_trait::async_trait;
use axum::extract::State;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use pam_manifests::kinds::info::Scope;
use pam_store::prelude::*;
use pam_store::Project;
use schemars::{json_schema, Schema, SchemaGenerator};
use serde_json::Value;

use crate::api::access::auth::Operator;
use crate::api::access::authz;
use crate::api::extract::{Json, Path, Query};
use crate::api::operator::list::{list, selected, ListQuery};
use crate::api::routes::route::{delete, get, Access, Route};
use crate::api::{ApiError, AppState};
use crate::ctx::Wakeups;
use crate::rules::access::Verb;
use crate::rules::kind::Stored;
use crate::rules::objects::GenericObject;

type ApiResult<T> = Result<T, ApiError>;

/// What a printing is for: the project of a project-scoped kind's objects
/// (`None` for a cluster-scoped one) and the time it is printed at.
#[derive(Clone, Copy)]
pub struct At<'a> {
    pub project: Option<&'a Project>,
    pub now: DateTime<Utc>,
}

impl<'a> At<'a> {
    pub fn new(project: Option<&'a Project>, now: DateTime<Utc>) -> Self {
        At { project, now }
    }
}

/// How the API serves one stored kind ([`Stored`]: finding, listing and
/// deleting it). `project` is the project a project-scoped kind's objects
/// live in, `None` for a cluster-scoped one.
#[async_trait]
pub trait Served: Stored {
    /// Its objects (of `project`), in name order. `q` carries the filters
    /// a kind may add (`phase`, `host` for Runs); the label selector is
    /// applied by the caller.
    async fn list(
        tx: &mut dyn Tx,
        project: Option<&Project>,
        _q: &ListQuery,
    ) -> ApiResult<Vec<Self>> {
        Ok(Self::all(tx, project).await?)
    }

    /// The objects as the API shows them, in order; one round of extra
    /// reads for the whole batch.
    async fn print(tx: &mut dyn Tx, at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>>;

    /// One object as the API shows it (a kind may read less for one).
    async fn print_one(&self, tx: &mut dyn Tx, at: At<'_>) -> ApiResult<Value> {
        let mut v = Self::print(tx, at, std::slice::from_ref(self)).await?;
        Ok(v.pop().unwrap_or(Value::Null))
    }

    /// The listing: [`Served::list`], the selector, [`Served::print`]. A
    /// kind whose printing needs the unfiltered list (a task's parent and
    /// completion) does it in one read instead.
    async fn listed(
        tx: &mut dyn Tx,
        project: Option<&Project>,
        q: &ListQuery,
        now: DateTime<Utc>,
    ) -> ApiResult<Vec<Value>> {
        let sel = q.selector()?;
        let items: Vec<Self> = Self::list(tx, project, q)
            .await?
            .into_iter()
            .filter(|o| selected(&sel, &o.labels()))
            .collect();
        Self::print(tx, At { project, now }, &items).await
    }

    /// Every project's listing (`GET /api/v1/<plural>` of a
    /// project-scoped kind): [`Served::listed`] per project. A kind whose
    /// printing reads context of its own (a run's task and host names)
    /// reads it once for all of them instead.
    async fn listed_everywhere(
        tx: &mut dyn Tx,
        projects: &[Project],
        q: &ListQuery,
        now: DateTime<Utc>,
    ) -> ApiResult<Vec<Value>> {
        let mut items = Vec::new();
        for p in projects {
            items.extend(Self::listed(tx, Some(p), q, now).await?);
        }
        Ok(items)
    }

    /// The API's delete: through its rule ([`Stored::delete`]); a kind
    /// may refuse first (a host with live runs).
    async fn remove(self, tx: &mut dyn Tx, now: DateTime<Utc>) -> ApiResult<()> {
        self.delete(tx, now).await?;
        Ok(())
    }

    /// Who to wake once a deletion is committed (latency only).
    fn deleted(_w: &Wakeups) {}
}

/// Every kind stored generically prints the same way: its row
/// as the kind's manifest type reads it (a stored spec the type no longer
/// reads prints as stored).
#[async_trait]
impl<M: pam_manifests::kinds::Generic> Served for GenericObject<M> {
    async fn print(_tx: &mut dyn Tx, at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        Ok(items
            .iter()
            .map(|o| {
                let v = crate::api::operator::objects::generic(&o.row, at.project);
                serde_json::from_value::<M>(v.clone())
                    .and_then(serde_json::to_value)
                    .unwrap_or(v)
            })
            .collect())
    }
}

/// The object named `name` (of `project`), or the 404 that names it.
pub async fn one<K: Served>(
    tx: &mut dyn Tx,
    project: Option<&Project>,
    name: &str,
) -> ApiResult<K> {
    K::by_name(tx, project, name).await?.ok_or_else(|| {
        let kind = <K as Stored>::KIND.info().singular;
        ApiError::not_found(match project {
            Some(p) => format!("{kind} {name:?} not found in project {:?}", p.slug),
            None => format!("{kind} {name:?} not found"),
        })
    })
}

/// The object `/api/v1/projects/{slug}/<plural>/{name}` names, with its
/// project: each a 404 naming it when missing.
pub async fn one_in<K: Served>(tx: &mut dyn Tx, slug: &str, name: &str) -> ApiResult<(Project, K)> {
    let p = project(tx, slug).await?;
    let o = one::<K>(tx, Some(&p), name).await?;
    Ok((p, o))
}

/// The project a URL names (`/api/v1/projects/{project}/…`).
pub async fn project(tx: &mut dyn Tx, slug: &str) -> ApiResult<Project> {
    one::<Project>(tx, None, slug).await
}

/// `GET /api/v1/projects/{project}/<plural>`.
#[tracing::instrument(skip_all, fields(kind = <K as Stored>::KIND.info().name, project = %slug))]
async fn list_in<K: Served>(
    State(st): State<AppState>,
    _op: Operator,
    Path(slug): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let p = project(tx.as_mut(), &slug).await?;
    Ok(list(
        K::listed(tx.as_mut(), Some(&p), &q, st.ctx.now()).await?,
    ))
}

/// `GET /api/v1/<plural>`: a cluster-scoped kind's objects, or a
/// project-scoped kind's in every project.
#[tracing::instrument(skip_all, fields(kind = <K as Stored>::KIND.info().name))]
async fn list_all<K: Served>(
    State(st): State<AppState>,
    Operator(op): Operator,
    Query(q): Query<ListQuery>,
) -> ApiResult<Json<Value>> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    // Filtered to the token's projects, not refused.
    let grant = op.grant();
    let items = match <K as Stored>::KIND.info().scope {
        Scope::Cluster if <K as Stored>::KIND == pam_manifests::kinds::Kind::Project => {
            let all = K::listed(tx.as_mut(), None, &q, now).await?;
            authz::visible(grant, (Verb::List, info_plural::<K>()), all, |v| {
                v.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            })
        }
        Scope::Cluster => K::listed(tx.as_mut(), None, &q, now).await?,
        Scope::Project => {
            let all = tx.list::<Project>(()).await?;
            let projects =
                authz::visible(grant, (Verb::List, info_plural::<K>()), all, |p| &p.slug);
            K::listed_everywhere(tx.as_mut(), &projects, &q, now).await?
        }
    };
    Ok(list(items))
}

/// The resource a list of `K` is authorized as: its plural.
fn info_plural<K: Served>() -> &'static str {
    <K as Stored>::KIND.info().plural
}

/// `GET /api/v1/projects/{project}/<plural>/{name}`.
#[tracing::instrument(skip_all, fields(kind = <K as Stored>::KIND.info().name, project = %slug, name = %name))]
async fn get_in<K: Served>(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let (p, o) = one_in::<K>(tx.as_mut(), &slug, &name).await?;
    let v = o
        .print_one(tx.as_mut(), At::new(Some(&p), st.ctx.now()))
        .await?;
    Ok(Json(with_managed_fields(tx.as_mut(), &o, v).await?))
}

/// A printed object of one get with its `metadata.managedFields`: one more
/// read, for one object (a listing goes without).
async fn with_managed_fields<K: Served>(tx: &mut dyn Tx, o: &K, mut v: Value) -> ApiResult<Value> {
    let key = (<K as Stored>::KIND.as_str().to_string(), o.id());
    if let Some(r) = tx.managed_fields_of(&[key]).await?.pop() {
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert(
                "managedFields".into(),
                crate::apply::managed::managed_fields_json(&r.entries),
            );
        }
    }
    Ok(v)
}

/// `GET /api/v1/<plural>/{<singular>}`.
#[tracing::instrument(skip_all, fields(kind = <K as Stored>::KIND.info().name, name = %name))]
async fn get_cluster<K: Served>(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let mut tx = st.ctx.store.begin().await?;
    let o = one::<K>(tx.as_mut(), None, &name).await?;
    let v = o
        .print_one(tx.as_mut(), At::new(None, st.ctx.now()))
        .await?;
    Ok(Json(with_managed_fields(tx.as_mut(), &o, v).await?))
}

/// `DELETE /api/v1/projects/{project}/<plural>/{name}`.
#[tracing::instrument(skip_all, fields(kind = <K as Stored>::KIND.info().name, project = %slug, name = %name))]
async fn delete_in<K: Served>(
    State(st): State<AppState>,
    _op: Operator,
    Path((slug, name)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let (_, o) = one_in::<K>(tx.as_mut(), &slug, &name).await?;
    o.remove(tx.as_mut(), now).await?;
    st.ctx.commit(tx).await?;
    K::deleted(&st.ctx.wakeups);
    Ok(StatusCode::NO_CONTENT)
}

/// `DELETE /api/v1/<plural>/{<singular>}`.
#[tracing::instrument(skip_all, fields(kind = <K as Stored>::KIND.info().name, name = %name))]
async fn delete_cluster<K: Served>(
    State(st): State<AppState>,
    _op: Operator,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let now = st.ctx.now();
    let mut tx = st.ctx.store.begin().await?;
    let o = one::<K>(tx.as_mut(), None, &name).await?;
    o.remove(tx.as_mut(), now).await?;
    st.ctx.commit(tx).await?;
    K::deleted(&st.ctx.wakeups);
    Ok(StatusCode::NO_CONTENT)
}

/// List, get and delete of kind `K`, at the paths its scope gives: its
/// entries of the route table ([`crate::api::routes::table`]).
pub fn routes<K: Served>() -> Vec<Route> {
    let info = <K as Stored>::KIND.info();
    let (name, plural) = (info.name, info.plural);
    let mut title = plural.to_string();
    title[..1].make_ascii_uppercase();
    let tag = "objects";
    let list_all = get(
        format!("/api/v1/{plural}"),
        list_all::<K>,
        Access::Op(Verb::List, plural),
    )
    .query::<ListQuery>()
    .schema(200, list_schema::<K>, "a List of the objects");
    match info.scope {
        Scope::Project => vec![
            get(
                format!("/api/v1/projects/{{project}}/{plural}"),
                list_in::<K>,
                Access::Op(Verb::List, plural),
            )
            .doc(
                tag,
                format!("list{title}InProject"),
                format!("List a project's {plural}"),
            )
            .query::<ListQuery>()
            .schema(200, list_schema::<K>, "a List of the objects"),
            get(
                format!("/api/v1/projects/{{project}}/{plural}/{{name}}"),
                get_in::<K>,
                Access::Op(Verb::Get, plural),
            )
            .doc(
                tag,
                format!("get{name}"),
                format!("Get a {name} with its status"),
            )
            .schema(200, object_schema::<K>, "the object"),
            delete(
                format!("/api/v1/projects/{{project}}/{plural}/{{name}}"),
                delete_in::<K>,
                Access::Op(Verb::Delete, plural),
            )
            .doc(tag, format!("delete{name}"), format!("Delete a {name}"))
            .empty(204, "deleted"),
            list_all.doc(
                tag,
                format!("list{title}"),
                format!("List the {plural} of every project"),
            ),
        ],
        Scope::Cluster => {
            let one = format!("/api/v1/{plural}/{{{}}}", info.singular);
            vec![
                list_all.doc(tag, format!("list{title}"), format!("List the {plural}")),
                get(one.clone(), get_cluster::<K>, Access::Op(Verb::Get, plural))
                    .doc(
                        tag,
                        format!("get{name}"),
                        format!("Get a {name} with its status"),
                    )
                    .schema(200, object_schema::<K>, "the object"),
                delete(one, delete_cluster::<K>, Access::Op(Verb::Delete, plural))
                    .doc(tag, format!("delete{name}"), format!("Delete a {name}"))
                    .empty(204, "deleted"),
            ]
        }
    }
}

/// The schema of a printed `K` (the manifest type, with its status).
fn object_schema<K: Served>(g: &mut SchemaGenerator) -> Schema {
    pam_manifests::schema::object_schema(<K as Stored>::KIND, g)
}

/// The schema of a List of `K` ([`list`]).
fn list_schema<K: Served>(g: &mut SchemaGenerator) -> Schema {
    let item = object_schema::<K>(g);
    json_schema!({
        "type": "object",
        "required": ["apiVersion", "kind", "items"],
        "properties": {
            "apiVersion": { "const": "pam.dev/v1" },
            "kind": { "const": "List" },
            "items": { "type": "array", "items": item },
        },
    })
}

/// The project of a project-scoped kind (the generic handlers always pass
/// one).
pub fn scoped(project: Option<&Project>) -> ApiResult<&Project> {
    project.ok_or_else(|| ApiError::internal("a project-scoped kind served without its project"))
}
