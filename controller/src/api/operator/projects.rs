//! `/api/v1/projects`: list, get, delete (served by [`crate::api::operator::served`]).

use std::collections::HashMap;

use async_trait::async_trait;
use pam_store::prelude::*;
use pam_store::Project;
use serde_json::Value;

use crate::api::operator::list::to_json;
use crate::api::operator::served::{At, Served};
use crate::api::{operator::lookup, operator::objects, ApiError};

type ApiResult<T> = Result<T, ApiError>;

#[async_trait]
impl Served for Project {
    /// With the Source that owns it and its usage: one read of
    /// each for the whole batch.
    async fn print(tx: &mut dyn Tx, _at: At<'_>, items: &[Self]) -> ApiResult<Vec<Value>> {
        let ids: Vec<_> = items.iter().map(|p| p.id).collect();
        let mut owners = lookup::project_owners(tx, &ids).await?;
        let usage: HashMap<_, _> = tx.usage_by_project(&ids).await?.into_iter().collect();
        Ok(items
            .iter()
            .map(|p| to_json(&objects::project(p, owners.remove(&p.id), usage.get(&p.id))))
            .collect())
    }
}
