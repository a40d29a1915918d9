//! The calls every kind with a table of its own shares: insert,
//! read by id, by name in its scope, list a scope, update at a resource
//! version, delete. [`NamedTx`] declares them once, generic over the kind,
//! and each store implements it once for all its kinds; [`crate::Tx`] is
//! `NamedTx<K>` for each such kind. Callers reach them as methods of
//! `dyn Tx`: `tx.get::<Project>(id)`.

use async_trait::async_trait;
use uuid::Uuid;

use chrono::{DateTime, Utc};

use crate::{Meta, StoreResult, Tx};

/// The columns every named row has, read and written alike by both
/// stores.
pub trait Row {
    fn id(&self) -> Uuid;
    fn meta(&self) -> &Meta;
    fn meta_mut(&mut self) -> &mut Meta;
    fn updated_at(&self) -> DateTime<Utc>;
    fn updated_at_mut(&mut self) -> &mut DateTime<Utc>;
}

/// [`Row`] for a row type with the fields `id`, `meta` and `updated_at`
/// (as a derive would write it); each kind's file says it of its row.
macro_rules! row {
    ($ty:ty) => {
        impl $crate::named::Row for $ty {
            fn id(&self) -> uuid::Uuid {
                self.id
            }
            fn meta(&self) -> &$crate::Meta {
                &self.meta
            }
            fn meta_mut(&mut self) -> &mut $crate::Meta {
                &mut self.meta
            }
            fn updated_at(&self) -> chrono::DateTime<chrono::Utc> {
                self.updated_at
            }
            fn updated_at_mut(&mut self) -> &mut chrono::DateTime<chrono::Utc> {
                &mut self.updated_at
            }
        }
    };
}
pub(crate) use row;

/// A kind whose objects have a name that is unique in a scope.
pub trait NamedKind: Row + Clone + Send + Sync + 'static {
    /// What a name is unique in: `()` for a cluster-wide kind, the
    /// project's id for a project-scoped one, `(kind, project)` for the
    /// kinds stored generically ([`crate::Object`]).
    type Scope: Clone + PartialEq + Send + Sync + 'static;
    /// How messages call the kind (`work item`).
    const NOUN: &'static str;
    fn scope(&self) -> Self::Scope;
    /// How a refused write names the object (`project <id>`): both stores
    /// say the same.
    fn what(&self) -> String {
        format!("{} {}", Self::NOUN, self.id())
    }
}

/// The calls of one kind ([`NamedKind`]). Part of every [`crate::Tx`];
/// called as `dyn Tx`'s methods of the same names without the prefix
/// (`tx.get::<Host>(id)`), which name the kind.
#[async_trait]
pub trait NamedTx<K: NamedKind>: Send {
    /// Inserts it (`resource_version` stored as given, normally 1). A taken
    /// id or name (in its scope) is `AlreadyExists`; a missing project
    /// `NotFound`.
    async fn named_insert(&mut self, x: &K) -> StoreResult<()>;
    async fn named_get(&mut self, id: Uuid) -> StoreResult<Option<K>>;
    async fn named_by_name(&mut self, scope: K::Scope, name: &str) -> StoreResult<Option<K>>;
    /// Every object of the scope, by name (byte order).
    async fn named_list(&mut self, scope: K::Scope) -> StoreResult<Vec<K>>;
    /// Writes its metadata (except `resource_version`), `updated_at` and
    /// the kind's own spec columns where `resource_version = expected_rv`,
    /// bumping it; the row as written. Another version is `Conflict`, a
    /// row that is gone `NotFound`. Never a status: those have their own
    /// guarded calls.
    async fn named_update(&mut self, x: &K, expected_rv: i64) -> StoreResult<K>;
    /// Deletes it and what its table's foreign keys cascade to; whether it
    /// was there. A row still referenced (a host that runs name) is
    /// `Invalid`.
    async fn named_delete(&mut self, id: Uuid) -> StoreResult<bool>;
}

/// The [`NamedTx`] calls on a transaction, the kind named once where the
/// arguments do not say it: `tx.get::<Project>(id)`, `tx.insert(&host)`.
impl<'t> dyn Tx + 't {
    pub async fn insert<K: NamedKind>(&mut self, x: &K) -> StoreResult<()>
    where
        Self: NamedTx<K>,
    {
        NamedTx::<K>::named_insert(self, x).await
    }
    pub async fn get<K: NamedKind>(&mut self, id: Uuid) -> StoreResult<Option<K>>
    where
        Self: NamedTx<K>,
    {
        NamedTx::<K>::named_get(self, id).await
    }
    pub async fn by_name<K: NamedKind>(
        &mut self,
        scope: K::Scope,
        name: &str,
    ) -> StoreResult<Option<K>>
    where
        Self: NamedTx<K>,
    {
        NamedTx::<K>::named_by_name(self, scope, name).await
    }
    pub async fn list<K: NamedKind>(&mut self, scope: K::Scope) -> StoreResult<Vec<K>>
    where
        Self: NamedTx<K>,
    {
        NamedTx::<K>::named_list(self, scope).await
    }
    pub async fn update<K: NamedKind>(&mut self, x: &K, expected_rv: i64) -> StoreResult<K>
    where
        Self: NamedTx<K>,
    {
        NamedTx::<K>::named_update(self, x, expected_rv).await
    }
    pub async fn delete<K: NamedKind>(&mut self, id: Uuid) -> StoreResult<bool>
    where
        Self: NamedTx<K>,
    {
        NamedTx::<K>::named_delete(self, id).await
    }
}
