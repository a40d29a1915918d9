//! `/api/v1/projects`: list, get, delete (served by [`super::served`]).

use std::borrow::Cow;
use std::collections::HashMap;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::kinds::Kind;
use pam_store::prelude::*;
use pam_store::{Labels, Project, StoreResult};
use serde_json::Value;

use super::list::{to_json, ListQuery};
use super::served::Served;
use super::{lookup, objects, ApiError};
use crate::rules::projects;

type ApiResult<T> = Result<T, ApiError>;

#[async_trait]
impl Served for Project {
    const KIND: Kind = Kind::Project;

    async fn list(tx: &mut dyn Tx, _p: Option<&Project>, _q: &ListQuery) -> ApiResult<Vec<Self>> {
        Ok(tx.list_projects().await?)
    }

    /// A project is named by its slug.
    async fn find(tx: &mut dyn Tx, _p: Option<&Project>, slug: &str) -> StoreResult<Option<Self>> {
        tx.get_project_by_slug(slug).await
    }

    fn labels(&self) -> Cow<'_, Labels> {
        Cow::Borrowed(&self.meta.labels)
    }

    /// With the Source that owns it and its usage (issue 21): one read of
    /// each for the whole batch.
    async fn print(
        tx: &mut dyn Tx,
        _p: Option<&Project>,
        items: &[Self],
        _now: DateTime<Utc>,
    ) -> ApiResult<Vec<Value>> {
        let ids: Vec<_> = items.iter().map(|p| p.id).collect();
        let mut owners = lookup::project_owners(tx, &ids).await?;
        let usage: HashMap<_, _> = tx.usage_by_project(&ids).await?.into_iter().collect();
        Ok(items
            .iter()
            .map(|p| to_json(&objects::project(p, owners.remove(&p.id), usage.get(&p.id))))
            .collect())
    }

    async fn delete(
        self,
        tx: &mut dyn Tx,
        _p: Option<&Project>,
        _now: DateTime<Utc>,
    ) -> ApiResult<()> {
        projects::delete(tx, &self).await?;
        Ok(())
    }
}
