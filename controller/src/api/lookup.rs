//! Finding the objects a URL names; a missing one is a 404 naming it.

use pam_store::prelude::*;
use pam_store::{Host, Project, Run, Source, WorkItem};

use super::ApiError;

type ApiResult<T> = Result<T, ApiError>;

pub async fn project(tx: &mut dyn Tx, slug: &str) -> ApiResult<Project> {
    tx.get_project_by_slug(slug)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("project {slug:?} not found")))
}

pub async fn task(tx: &mut dyn Tx, p: &Project, name: &str) -> ApiResult<WorkItem> {
    tx.get_work_item_by_name(p.id, name).await?.ok_or_else(|| {
        ApiError::not_found(format!("task {name:?} not found in project {:?}", p.slug))
    })
}

pub async fn run(tx: &mut dyn Tx, p: &Project, name: &str) -> ApiResult<Run> {
    tx.get_run_by_name(p.id, name).await?.ok_or_else(|| {
        ApiError::not_found(format!("run {name:?} not found in project {:?}", p.slug))
    })
}

pub async fn host(tx: &mut dyn Tx, name: &str) -> ApiResult<Host> {
    tx.get_host_by_name(name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("host {name:?} not found")))
}

pub async fn source(tx: &mut dyn Tx, name: &str) -> ApiResult<Source> {
    tx.get_source_by_name(name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("source {name:?} not found")))
}
