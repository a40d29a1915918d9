//! The rules of every kind stored generically (registry row
//! `generic`, table `objects`): creating, updating (the desired state,
//! through the generation rule) and deleting one, and its [`Stored`]
//! impl — written once, for any such kind. Such a kind journals no
//! event (its record is the object and its managed fields, as a
//! Webhook's).

use std::marker::PhantomData;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use pam_manifests::kinds::Generic;
use pam_manifests::Kind;
use pam_store::prelude::*;
use pam_store::{Meta, Object, Project, StoreResult};
use serde_json::json;
use uuid::Uuid;

use super::kind::Stored;
use super::meta::{self, Change, Desired};

/// An object of the generically stored kind whose manifest type is `M`:
/// the row, typed by its kind for the generic layers ([`Stored`]).
pub struct GenericObject<M> {
    pub row: Object,
    kind: PhantomData<fn() -> M>,
}

impl<M: Generic> GenericObject<M> {
    /// `row` as an object of `M`'s kind (the caller read it by that kind).
    pub fn new(row: Object) -> GenericObject<M> {
        GenericObject {
            row,
            kind: PhantomData,
        }
    }

    /// `row` when it is of `M`'s kind.
    fn of(row: Object) -> Option<GenericObject<M>> {
        (row.kind == M::KIND.as_str()).then(|| GenericObject::new(row))
    }
}

/// An object as declared: its kind, scope, name and desired state.
#[derive(Debug, Clone)]
pub struct ObjectDesired {
    pub project_id: Option<Uuid>,
    pub name: String,
    pub desired: Desired,
}

/// Creates an object of `M`'s kind.
pub async fn create<M: Generic>(
    tx: &mut dyn Tx,
    d: ObjectDesired,
    now: DateTime<Utc>,
) -> StoreResult<GenericObject<M>> {
    let row = Object {
        id: Uuid::new_v4(),
        kind: M::KIND.as_str().to_string(),
        project_id: d.project_id,
        name: d.name,
        meta: meta::new_meta(d.desired, now),
        status: json!({}),
        created_at: now,
        updated_at: now,
    };
    tx.insert(&row).await?;
    Ok(GenericObject::new(row))
}

/// Updates its spec, labels and annotations (guarded by its
/// resourceVersion); the same desired state writes nothing.
pub async fn update<M: Generic>(
    tx: &mut dyn Tx,
    o: GenericObject<M>,
    d: ObjectDesired,
    now: DateTime<Utc>,
) -> StoreResult<(GenericObject<M>, Change)> {
    let (row, change) = meta::write_desired(tx, o.row, d.desired, now, |_| {}).await?;
    Ok((GenericObject::new(row), change))
}

#[async_trait]
impl<M: Generic> Stored for GenericObject<M> {
    const KIND: Kind = M::KIND;

    fn id(&self) -> Uuid {
        self.row.id
    }
    fn name(&self) -> &str {
        &self.row.name
    }
    fn meta(&self) -> &Meta {
        &self.row.meta
    }

    async fn by_id(tx: &mut dyn Tx, id: Uuid) -> StoreResult<Option<Self>> {
        Ok(tx.get::<Object>(id).await?.and_then(GenericObject::of))
    }

    async fn by_name(
        tx: &mut dyn Tx,
        project: Option<&Project>,
        name: &str,
    ) -> StoreResult<Option<Self>> {
        let Some(scope) = scope::<M>(project) else {
            return Ok(None);
        };
        let kind = M::KIND.as_str();
        Ok(tx
            .by_name::<Object>((kind.into(), scope), name)
            .await?
            .map(GenericObject::new))
    }

    async fn all(tx: &mut dyn Tx, project: Option<&Project>) -> StoreResult<Vec<Self>> {
        let Some(scope) = scope::<M>(project) else {
            return Ok(Vec::new());
        };
        let rows = tx.list::<Object>((M::KIND.as_str().into(), scope)).await?;
        Ok(rows.into_iter().map(GenericObject::new).collect())
    }

    async fn delete(self, tx: &mut dyn Tx, _now: DateTime<Utc>) -> StoreResult<bool> {
        tx.delete::<Object>(self.row.id).await
    }
}

/// The scope objects of `M`'s kind are looked up in: the project for a
/// project-scoped kind (`None` without one: nothing to find), the
/// cluster (`Some(None)`) otherwise.
fn scope<M: Generic>(project: Option<&Project>) -> Option<Option<Uuid>> {
    if M::KIND.is_project_scoped() {
        project.map(|p| Some(p.id))
    } else {
        Some(None)
    }
}
